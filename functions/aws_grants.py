"""The AWS function URL's `grant` and `keys` paths: a group's storage grant and its entries,
for an instance of that group only.

The caller is an instance session of the sweep's one member role (the URL verified the
signature; `spotbench.auth.aws.caller_from_function_url`). Which group it speaks for comes
from the sweep's own records (`instance_group`): the instance with that id must be one of
the sweep's (its deployer-written `spotbench-sweep` tag), its `Name` one of the plan's
member names and its `spotbench-group` tag that member's group. Then:

- `grant`: the group's deadline is its latest launch in the open run + the spec's deadline;
  past it, or with no open run or launch, the answer is 403. Otherwise the answer holds
  `credentials` (STS, the grant role narrowed to the group's objects, `expires` ≤ the
  deadline and ≤ 1 h: the member asks again), `post` (a presigned POST for the group's
  records, `starts-with` its key prefix), the `run`, `group`, `prefixes` and `expires`.
- `keys`: the group's entries under the sweep's parameter path (`SPOTBENCH_SECRET_FILES`
  names them), as `{"group": …, "files": {name: base64}}`.

Every refusal is a JSON error naming what to do; nothing here trusts the request body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from functions.app import FunctionConfig
from spotbench.auth import Caller, Forbidden
from spotbench.auth import aws_grants
from spotbench.auth.aws import grant_role_name, member_role_name
from spotbench.clouds import Instance
from spotbench.labels import GROUP_LABEL, SWEEP_LABEL, sweep_labels
from spotbench.results import run_id_lengths

log = logging.getLogger("spotbench.functions")

PATHS = ("grant", "keys")


def instance_group(config: FunctionConfig, instance_id: str,
                   find: Callable[[str], Instance | None] | None = None) -> str:
    """The run group of the sweep's instance `instance_id`, from the sweep's own records
    (raises `Forbidden` for an instance that is not the sweep's member of that name)."""
    spec = config.spec
    if find is None:
        def find(iid: str) -> Instance | None:
            return next((i for i in config.cloud.query(sweep_labels(spec.name)) if i.name == iid),
                        None)
    inst = find(instance_id)
    if inst is None or inst.labels.get(SWEEP_LABEL) != spec.name:
        raise Forbidden(f"instance {instance_id} is not part of sweep {spec.name}")
    members = {m.name: g.id for g in config.sweep.groups for m in g.members}
    name = inst.labels.get("Name", "")
    if name not in members:
        raise Forbidden(f"instance {instance_id} ({name or 'no Name tag'}) is not a member "
                        f"of sweep {spec.name}'s plan")
    if inst.labels.get(GROUP_LABEL) != members[name]:
        raise Forbidden(f"instance {instance_id} is tagged for group "
                        f"{inst.labels.get(GROUP_LABEL)}; member {name} is of {members[name]}")
    return members[name]


def _bucket_prefix(config: FunctionConfig) -> tuple[str, str]:
    url = config.env.get("SPOTBENCH_RESULTS_URL") or config.spec.results_url()
    if not url.startswith("s3://"):
        raise ValueError(f"results URL {url!r} is not an s3:// URL")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    return bucket, prefix.strip("/")


def grant(config: FunctionConfig, caller: Caller, account: str,
          now: datetime | None = None) -> dict[str, Any]:
    """The caller's group's storage grant (see the module's docstring)."""
    now = now or datetime.now(UTC)
    group = instance_group(config, caller.name)
    store = config.sweep.store
    run = store.current_run()
    if run is None:
        raise Forbidden(f"no run of sweep {config.spec.name} is open: nothing to write into")
    launched = store.last_launch(run.run, group)
    if launched is None:
        raise Forbidden(f"group {group} has not been launched in run {run.run}")
    deadline = launched + config.spec.deadline
    window = aws_grants.GrantWindow.until(deadline, now)
    if window is None:
        raise Forbidden(f"group {group} is past its deadline ({deadline.isoformat()}) in run "
                        f"{run.run}: no grant; the stop tick stops it")
    bucket, prefix = _bucket_prefix(config)
    checkpoints = config.spec.keeps_checkpoints()
    policy = aws_grants.session_policy(bucket, prefix, group, checkpoints=checkpoints,
                                       until=deadline, run_lengths=run_id_lengths())
    region = config.spec.region or ""
    role = f"arn:aws:iam::{account}:role/{grant_role_name(config.spec.name, region)}"
    creds = aws_grants.assume_grant(role, policy, session_name=caller.name,
                                    duration_s=window.duration_s)
    expires = window.expires(now)
    records = aws_grants.records_prefix(prefix, run.run, group)
    post = aws_grants.presigned_post(bucket, records, int((expires - now).total_seconds()))
    prefixes = [records] + ([aws_grants.checkpoints_prefix(prefix, group)] if checkpoints else [])
    log.info("grant for %s: group %s, run %s, until %s", caller.name, group, run.run,
             expires.isoformat())
    return {"group": group, "run": run.run, "bucket": bucket, "prefixes": prefixes,
            "expires": expires.isoformat(), "deadline": deadline.isoformat(),
            "credentials": creds, "post": post}


def keys(config: FunctionConfig, caller: Caller) -> dict[str, Any]:
    """The caller's group's entries (base64, as stored)."""
    group = instance_group(config, caller.name)
    files = json.loads(config.env.get("SPOTBENCH_SECRET_FILES") or "[]")
    return {"group": group,
            "files": aws_grants.read_secrets(config.spec.name, group, [str(f) for f in files])}


def member_role(config: FunctionConfig) -> str:
    return member_role_name(config.spec.name, config.spec.region or "")


def answer(path: str, config: FunctionConfig, caller: Caller, account: str,
           now: datetime | None = None) -> tuple[int, Mapping[str, Any]]:
    """(HTTP status, JSON body) of `grant` or `keys` for an authenticated member."""
    try:
        if path == "grant":
            return 200, grant(config, caller, account, now)
        return 200, keys(config, caller)
    except Forbidden as exc:
        log.warning("%s refused for %s: %s", path, caller.name, exc)
        return 403, {"error": str(exc)}
    except Exception:  # noqa: BLE001 - the caller gets JSON, the log gets the trace
        log.exception("%s failed for %s", path, caller.name)
        return 500, {"error": f"internal error in {path}; see the function's log"}
