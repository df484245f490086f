"""The grant's STS session policy measured at deploy: `spotbench plan`, `preview` and
`pulumi up` refuse a sweep whose members' grants STS would refuse (spotbench.limits)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from spotbench import limits
from spotbench.clouds.aws.grants import session_policy
from spotbench.plan import RunGroup
from spotbench.results import run_id_lengths
from spotbench.spec import SweepSpec

BUCKET_NAME_MAX = 63  # S3: a bucket name holds 3-63 characters (bucket_prefix + a unique suffix)


def check_grant_policy(spec: SweepSpec, groups: list[RunGroup], prefix: str) -> None:
    """The longest session policy a group's grant will pass STS (`spotbench.clouds.aws.grants.
    session_policy`, what functions/aws_grants.py sends) within its 2,048 characters: the
    sweep's longest group id, at the longest bucket name the stack may get (unless `results`
    names one). The packed size STS checks apart only STS can tell (docs/platform.md)."""
    if not groups:
        return
    named = (spec.results or "").startswith("s3://")
    bucket = spec.results[len("s3://"):].partition("/")[0] if named else "b" * BUCKET_NAME_MAX
    group = max(groups, key=lambda g: len(g.id))
    run = "9" * max(run_id_lengths())  # the longest open run's id
    policy = session_policy(bucket, prefix, group.id, records=f"runs/{run}/{group.id}.",
                            checkpoints=spec.keeps_checkpoints(),
                            until=datetime(2100, 1, 1, tzinfo=UTC))
    limits.require("sts.session_policy", f"group {group.id}: its grant's session policy",
                   len(json.dumps(policy, separators=(",", ":"))))
