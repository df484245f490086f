"""The `aws` provider: EC2 instances, EventBridge Scheduler, Lambda (function URLs).

Nothing here imports boto3 at module level; each part loads its SDK when built: the
driver (`ec2`), the schedule control (`scheduler`), the orphan finder (`orphans`)
and the member's signed `done` call (`spotbench.clouds.aws.identity`, botocore). Callers of the
functions are authenticated by the Lambda adapter (`functions/lambda_handler.py`).

Environment: `AWS_ENDPOINT_URL` (moto in tests) and the usual AWS credentials chain.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotbench.clouds.provider import (
    FunctionSettings, GroupStorage, Provider, SettingMissing, env_of,
)
from spotbench.facts.aws import FACTS
from spotbench.interfaces import Problem

if TYPE_CHECKING:
    import requests

    from spotbench.auth import Caller
    from spotbench.clouds.aws.function_grants import AwsGrants
    from spotbench.clouds.aws.scheduler import AwsSchedule
    from spotbench.clouds.aws.ssh import SsmSession
    from spotbench.clouds.base import Sweeper
    from spotbench.clouds.aws.ec2 import AwsCloud
    from spotbench.clouds.aws.lease_objects import S3Objects
    from spotbench.member import MemberContext
    from spotbench.spec import SweepSpec


class AwsProvider(Provider):
    prices_module = "spotbench.clouds.aws.prices"
    catalog_module = "spotbench.clouds.aws.catalog"

    ssh_vias = ("ssm",)

    def ssh_proxy(self, spec: SweepSpec, via: str) -> SsmSession | None:
        """`aws ssm start-session` must look for the instance in its own region (a created
        group may run in any candidate region): its zone's, else the sweep's."""
        from spotbench.clouds.aws.ssh import VIA, SsmSession

        if via != VIA:
            return None
        return SsmSession(region=spec.region, region_of_zone=FACTS.region_of_zone)

    def results_url(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> str:
        if spec.results:
            return spec.results_url()
        raise SettingMissing(
            f"aws sweep {spec.name} has no `results:`: its bucket's name is chosen when the "
            f"stack is created; pass --results s3://BUCKET/{spec.name} (`pulumi stack output "
            "bucket_url` prints it) or set SPOTBENCH_RESULTS_URL"
        )

    def driver(self, **options: Any) -> AwsCloud:
        from spotbench.clouds.aws.ec2 import AwsCloud

        return AwsCloud(**options)

    def cloud(self, spec: SweepSpec, env: Mapping[str, str] | None = None, *,
              root: Path | str | None = None, state_dir: Path | None = None) -> AwsCloud:
        endpoint = env_of(env).get("AWS_ENDPOINT_URL") or None
        if spec.lifecycle == "created" and spec.candidate_regions not in ([], [spec.region]):
            from spotbench.clouds.aws.regions import AwsRegions  # candidates in other regions

            return AwsRegions(spec.region or "", spec.candidate_regions, endpoint_url=endpoint)
        return self.driver(region=spec.region, endpoint_url=endpoint, lifecycle=spec.lifecycle)

    def function_account(self, settings: FunctionSettings, context: Any = None) -> str:
        """The Lambda's own account, from the ARN its runtime context names
        (`invoked_function_arn`); ValueError when that is not a Lambda ARN."""
        from spotbench.clouds.aws.identity import function_account

        if context is None:
            raise SettingMissing("on aws the function's account is its Lambda ARN's: pass the "
                                 "invocation's context (function_account(settings, context))")
        return function_account(getattr(context, "invoked_function_arn", ""))

    def authenticate_event(self, event: Mapping[str, Any], settings: FunctionSettings,
                           account: str | None = None) -> Caller:
        """A function-URL request (`AWS_IAM`): an instance session of the sweep's one member
        role in the function's own `account`; a direct invocation: the scheduler (or an
        operator), which IAM already allowed (`spotbench.clouds.aws.identity`)."""
        from spotbench.clouds.aws.identity import (
            caller_from_function_url, caller_from_invocation, member_role_name,
        )

        if "http" not in (event.get("requestContext") or {}):
            return caller_from_invocation(event)
        if not account:
            raise SettingMissing("a function-URL caller is checked against the function's "
                                 "account: pass function_account(settings, context)")
        spec = settings.spec
        return caller_from_function_url(event, account=account,
                                        member_role=member_role_name(spec.name, spec.region or ""))

    def grants(self, spec: SweepSpec, env: Mapping[str, str]) -> AwsGrants:
        """What the function URL's `grant` and `keys` paths mint with (issue #29)."""
        from spotbench.clouds.aws.function_grants import AwsGrants

        return AwsGrants(spec, env.get("SPOTBENCH_RESULTS_URL") or spec.results_url())

    def credentials_problem(self, env: Mapping[str, str] | None = None) -> str | None:
        from spotbench.clouds.aws.credentials import aws_problem

        return aws_problem(env_of(env))

    def preflight(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> list[Problem]:
        from spotbench.clouds.aws.preflight import check

        return check(spec, env_of(env).get("AWS_ENDPOINT_URL") or None)

    def lease_objects(self, fs: Any) -> S3Objects:
        """The control lease on S3: conditional PUT/DELETE through the store's s3fs client."""
        from spotbench.clouds.aws.lease_objects import S3Objects

        return S3Objects(fs)

    def schedule(self, spec: SweepSpec, root: Path | str | None = None, **options: Any) -> AwsSchedule:
        from spotbench.clouds.aws.scheduler import AwsSchedule

        return AwsSchedule.for_spec(spec, **options)

    def orphans(self, spec: SweepSpec | None = None, *, root: Path | str | None = None,
                regions: list[str] | None = None, project: str | None = None) -> Sweeper:
        from spotbench.clouds.aws.orphans import AwsSweeper

        return AwsSweeper(regions=regions)

    def stack_config(self, spec: SweepSpec, project: str | None = None,
                     region: str | None = None) -> dict[str, str]:
        return {"aws:region": region or spec.region or "us-east-1"}

    pulumi_package = "aws"

    def preview_properties(self, type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        from spotbench.clouds.aws.preview import properties

        return properties(type_token, inputs)

    def preview_rules(self, type_token: str, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        from spotbench.clouds.aws.preview import rules

        return rules(type_token, inputs)

    def preview_user_data(self, type_token: str, inputs: Mapping[str, Any]) -> str | None:
        from spotbench.clouds.aws.preview import user_data

        return user_data(type_token, inputs)

    def post_done(self, ctx: MemberContext, body: dict, timeout: float) -> requests.Response:
        from spotbench.clouds.aws.identity import signed_post  # botocore: only on AWS VMs

        return signed_post(ctx.done_url, body, timeout=timeout)

    def group_storage(self, ctx: MemberContext) -> GroupStorage:
        """The group's grant from the sweep's function (`/grant`, issue #29): the instance
        role writes nothing; the grant's credentials write the group's records and
        checkpoints only, and renew themselves through `/grant` before they end
        (`member_grant.grant_session`: a group may run past one grant's hour)."""
        if not ctx.done_url:
            return GroupStorage()
        from spotbench.clouds.aws.member_grant import grant_session  # botocore: AWS VMs only

        options = {"session": grant_session(ctx.done_url)}
        return GroupStorage(store_options=options, checkpoint_options=options)


PROVIDER = AwsProvider(FACTS)
