"""The function URL's `grant` and `keys` paths (AWS's `done` Lambda serves them): a group's
storage grant and its entries, for an instance of that group only. Nothing here names a
cloud: the group, the credentials and the entries are the provider's `grants`
(`Provider.grants`; AWS: `spotbench.clouds.aws.function_grants.AwsGrants`).

The caller is an instance session of the sweep's one member role in the function's own
account (the URL verified the signature; `spotbench.clouds.aws.identity.caller_from_function_url`).
Which group it speaks for comes from the sweep's own records by the neutral rule
(`spotbench.auth.instance.group_of`, `instance_group`): the live instance with that id (EC2
DescribeInstances) must carry a `Name` that is one of the plan's member names and the
deployer-written `spotbench-group` tag of that member's group. Then:

- `grant`: the group's deadline is its latest launch in the open run + the spec's deadline
  (`deadline_of`); past it, or with no open run or launch, the answer is 403 — the same
  check and refusal as GCP's (`functions.grant.current_grant`). Otherwise the
  answer is the neutral `Grant` (`group`, `run`, `prefixes` relative to the results root
  `root`, `expires` = the deadline) plus `credentials` (STS, the grant role narrowed to the
  group's objects; their `Expiration` ≤ the deadline and ≤ 1 h: the member asks again) and
  `post` (a presigned POST for the group's records, `starts-with` its key prefix).
- `keys`: the group's entries (`SPOTBENCH_SECRET_FILES` names them): its ssh login and host
  keys derived from the sweep's one key seed for this group alone, a container's env as
  stored under the sweep's parameter path (`aws_grants.read_secrets`), as
  `{"group": …, "files": {name: base64}}`.

Every refusal is a JSON error naming what to do; nothing here trusts the request body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from functions.app import FunctionConfig
from functions.grant import current_grant
from spotbench.auth import Caller, Forbidden

log = logging.getLogger("spotbench.functions")

PATHS = ("grant", "keys")


def instance_group(config: FunctionConfig, caller: Caller, account: str) -> str:
    """The caller's run group by the neutral rule (`spotbench.auth.instance`), from the
    cloud's view of the calling instance; raises `InstanceRefused` (403) otherwise."""
    return config.grants.group(caller, account, config.sweep.groups, config.cloud.find)


def grant(config: FunctionConfig, caller: Caller, account: str,
          now: datetime | None = None) -> dict[str, Any]:
    """The caller's group's storage grant (see the module's docstring)."""
    now = now or datetime.now(UTC)
    group = instance_group(config, caller, account)
    granted = current_grant(config, group, now)  # the open run, the launch, the deadline
    answer = config.grants.storage(granted, caller, account, now)
    log.info("grant for %s: group %s, run %s, until %s", caller.name, group, granted.run,
             answer["credentials"]["Expiration"])
    return dict(answer)


def keys(config: FunctionConfig, caller: Caller, account: str) -> dict[str, Any]:
    """The caller's group's entries (base64): its keys derived from the seed, others as stored."""
    group = instance_group(config, caller, account)
    files = json.loads(config.env.get("SPOTBENCH_SECRET_FILES") or "[]")
    return {"group": group, "files": config.grants.files(group, [str(f) for f in files])}


def answer(path: str, config: FunctionConfig, caller: Caller, account: str,
           now: datetime | None = None) -> tuple[int, Mapping[str, Any]]:
    """(HTTP status, JSON body) of `grant` or `keys` for an authenticated member."""
    try:
        if path == "grant":
            return 200, grant(config, caller, account, now)
        return 200, keys(config, caller, account)
    except Forbidden as exc:
        log.warning("%s refused for %s: %s", path, caller.name, exc)
        return 403, {"error": str(exc)}
    except Exception:  # noqa: BLE001 - the caller gets JSON, the log gets the trace
        log.exception("%s failed for %s", path, caller.name)
        return 500, {"error": f"internal error in {path}; see the function's log"}
