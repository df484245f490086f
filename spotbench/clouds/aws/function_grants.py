"""What the AWS function URL's `grant` and `keys` paths mint for a group the instance rule
settled (`AwsProvider.grants`; the paths themselves are functions/aws_grants.py, which names
no cloud): which group an instance session speaks for (EC2 DescribeInstances by id), the
group's storage grant (STS, the grant role narrowed to the group's objects; a presigned POST
for its records) and its entries (SSM, keys derived from the sweep's seed).

The group: the live instance with the session's id must carry a `Name` that is one of the
plan's member names and the deployer-written `spotbench-group` tag of that member's group
(`spotbench.auth.instance.group_of`, the neutral rule)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from spotbench.auth.instance import InstanceClaim, LiveInstance, Roster, group_of, past_deadline
from spotbench.clouds.aws import grants as aws_grants
from spotbench.clouds.aws.identity import grant_role_name
from spotbench.labels import GROUP_LABEL

if TYPE_CHECKING:
    from spotbench.auth import Caller
    from spotbench.auth.instance import Grant
    from spotbench.clouds.base import Instance
    from spotbench.plan import RunGroup
    from spotbench.spec import SweepSpec


@dataclass(frozen=True)
class AwsGrants:
    spec: SweepSpec
    results_url: str

    def group(self, caller: Caller, account: str, groups: Sequence[RunGroup],
              find: Callable[[str], Instance | None]) -> str:
        """The run group of the calling instance (`caller.name`, its id) by the neutral rule;
        `InstanceRefused` (403) otherwise."""
        found = find(caller.name)

        def lookup(claim: InstanceClaim) -> LiveInstance | None:
            if found is None or found.name != claim.instance_id:
                return None
            return LiveInstance(found.name, found.labels.get("Name", ""), found.labels.get(GROUP_LABEL))

        # an EC2 session names only the id: the name the plan gave it is its Name tag
        claim = InstanceClaim(instance_id=caller.name,
                              instance_name=found.labels.get("Name", "") if found else "",
                              location=self.spec.region or "", account=account)
        return group_of(claim, Roster.of_plan(self.spec.name, account, groups), lookup)

    def _bucket_prefix(self) -> tuple[str, str]:
        url = self.results_url
        if not url.startswith("s3://"):
            raise ValueError(f"results URL {url!r} is not an s3:// URL")
        bucket, _, prefix = url[len("s3://"):].partition("/")
        return bucket, prefix.strip("/")

    def storage(self, granted: Grant, caller: Caller, account: str, now: datetime) -> dict[str, Any]:
        """The neutral `Grant` plus `credentials` (STS; their `Expiration` ≤ the deadline and
        ≤ 1 h: the member asks again) and `post` (a presigned POST for the group's records)."""
        window = aws_grants.GrantWindow.until(granted.expires, now)
        if window is None:  # the deadline passed since (the window is None once it did)
            raise past_deadline(granted, granted.run)
        bucket, prefix = self._bucket_prefix()
        policy = aws_grants.session_policy(bucket, prefix, granted.group, records=granted.records,
                                           checkpoints=granted.checkpoints is not None,
                                           until=granted.expires)
        region = self.spec.region or ""
        role = f"arn:aws:iam::{account}:role/{grant_role_name(self.spec.name, region)}"
        creds = aws_grants.assume_grant(role, policy, session_name=caller.name,
                                        duration_s=window.duration_s)
        until = window.expires(now)
        records = aws_grants.under(prefix, granted.records)
        post = aws_grants.presigned_post(bucket, records, until, granted.max_bytes)
        return {**granted.to_json(), "bucket": bucket, "root": prefix,
                "credentials": {**creds, "Expiration": until.isoformat()}, "post": post}

    def files(self, group: str, files: Iterable[str]) -> dict[str, str]:
        """The group's entries (base64): its keys derived from the seed, others as stored."""
        return aws_grants.read_secrets(self.spec.name, group, [str(f) for f in files])

