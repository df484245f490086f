"""The AWS function URL's `grant` and `keys` paths: a group's storage grant and its entries,
for an instance of that group only.

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
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from functions.app import FunctionConfig
from functions.grant import current_grant, past_deadline
from spotbench.auth import Caller, Forbidden
from spotbench.auth.instance import InstanceClaim, LiveInstance, Roster, group_of
from spotbench.clouds import Instance
from spotbench.clouds.aws import grants as aws_grants
from spotbench.clouds.aws.identity import grant_role_name, member_role_name
from spotbench.labels import GROUP_LABEL

log = logging.getLogger("spotbench.functions")

PATHS = ("grant", "keys")


def instance_group(config: FunctionConfig, instance_id: str, account: str,
                   find: Callable[[str], Instance | None] | None = None) -> str:
    """The run group of instance `instance_id` by the neutral rule (`spotbench.auth.instance`):
    EC2 DescribeInstances by id gives its `Name` and deployer-written `spotbench-group` tags;
    the name must be one of the plan's members and the tag that member's group. Raises
    `InstanceRefused` (403) otherwise."""
    spec = config.spec
    if find is None:
        find = config.cloud.find  # spotbench.clouds.aws.ec2.AwsCloud.find
    found = find(instance_id)

    def lookup(claim: InstanceClaim) -> LiveInstance | None:
        if found is None or found.name != claim.instance_id:
            return None
        return LiveInstance(found.name, found.labels.get("Name", ""), found.labels.get(GROUP_LABEL))

    # an EC2 session names only the id: the name the plan gave it is its Name tag
    claim = InstanceClaim(instance_id=instance_id,
                          instance_name=found.labels.get("Name", "") if found else "",
                          location=spec.region or "", account=account)
    return group_of(claim, Roster.of_plan(spec.name, account, config.sweep.groups), lookup)


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
    group = instance_group(config, caller.name, account)
    granted = current_grant(config, group, now)  # the open run, the launch, the deadline
    window = aws_grants.GrantWindow.until(granted.expires, now)
    if window is None:  # the deadline passed since (the window is None once it did)
        raise past_deadline(granted, granted.run)
    bucket, prefix = _bucket_prefix(config)
    policy = aws_grants.session_policy(bucket, prefix, group, records=granted.records,
                                       checkpoints=granted.checkpoints is not None,
                                       until=granted.expires)
    region = config.spec.region or ""
    role = f"arn:aws:iam::{account}:role/{grant_role_name(config.spec.name, region)}"
    creds = aws_grants.assume_grant(role, policy, session_name=caller.name,
                                    duration_s=window.duration_s)
    until = window.expires(now)
    records = aws_grants.under(prefix, granted.records)
    post = aws_grants.presigned_post(bucket, records, until, granted.max_bytes)
    log.info("grant for %s: group %s, run %s, until %s", caller.name, group, granted.run,
             until.isoformat())
    return {**granted.to_json(), "bucket": bucket, "root": prefix,
            "credentials": {**creds, "Expiration": until.isoformat()}, "post": post}


def keys(config: FunctionConfig, caller: Caller, account: str) -> dict[str, Any]:
    """The caller's group's entries (base64): its keys derived from the seed, others as stored."""
    group = instance_group(config, caller.name, account)
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
        return 200, keys(config, caller, account)
    except Forbidden as exc:
        log.warning("%s refused for %s: %s", path, caller.name, exc)
        return 403, {"error": str(exc)}
    except Exception:  # noqa: BLE001 - the caller gets JSON, the log gets the trace
        log.exception("%s failed for %s", path, caller.name)
        return 500, {"error": f"internal error in {path}; see the function's log"}
