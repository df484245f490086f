"""The deployer's policy (`infra.aws.deployer.deployer_policy`) under IAM enforcement.

With no Pulumi engine here, what the person who deploys does is run as boto3 calls with a
role holding exactly that policy, against moto with IAM enforcement on:

- `pulumi up`, then `pulumi destroy`: the calls the provider makes per resource type
  (`tests/iam/deployer_calls.py`), for every type `ACTIONS` covers;
- between them, the spotbench commands the deployer runs: `preflight`, `schedule
  pause|resume|run-now`, `status` (the CLI, in this process), and the orphan sweep of
  `spotbench teardown`.

Every call is recorded with botocore's operation name; moto refuses what the policy does
not allow, and each recorded call's authorization (with the role a call passes and the
function it invokes) is evaluated against the policy as AWS does. Least privilege: every
action the policy lists is called, so removing any one of them fails the path.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import boto3
import botocore.client
import pytest
import yaml
from aiobotocore.client import AioBaseClient
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from infra.aws.deployer import ACTIONS, deployer_policy
from spotbench.clouds.aws.orphans import AwsSweeper
from spotbench.ops.teardown import teardown
from spotbench.results import ResultStore
from spotbench.spec import load_spec
from tests.iam import deployer_calls as calls
from tests.iam.account import EnforcedAccount, Principal, environment
from spotbench.clouds.aws.identity import grant_role_name, member_role_name
from tests.iam.policy import Authorization, as_list, evaluate
from tests.ec2_spot_front import SpotFront
from tests.moto_server import MotoServer

pytestmark = pytest.mark.fidelity

REGION = "us-east-1"
SWEEP = "ax"
DEPLOYER = "spotbench-deployer"


@dataclass
class Call:
    service: str
    operation: str
    params: dict
    error: str | None = None  # the error code AWS (moto) answered


class Recorder:
    """Every API call made with the deployer's key, by any botocore client in this process.

    moto cannot verify the signature of a GET on its REST-JSON services (Lambda, Scheduler:
    it signs the parsed query instead of the empty body), so it never judges those calls:
    for them the deployer's policy is evaluated here (AWS's semantics, tests/iam/policy.py)
    and, when it allows the call, moto answers it with its check off."""

    def __init__(self, principal: Principal, policy: dict, account: EnforcedAccount,
                 profiles: dict[str, str]):
        self.principal, self.policy, self.account, self.profiles = principal, policy, account, profiles
        self.calls: list[Call] = []

    def __enter__(self) -> Recorder:
        original = self._original = botocore.client.BaseClient._make_api_call
        recorder = self

        def recorded(client, operation_name, api_params):
            creds = client._request_signer._credentials
            if creds is None or creds.access_key != recorder.principal.access_key:
                return original(client, operation_name, api_params)
            call = Call(client.meta.service_model.signing_name, operation_name, dict(api_params))
            recorder.calls.append(call)
            try:
                return original(client, operation_name, api_params)
            except ClientError as exc:
                call.error = exc.response["Error"]["Code"]
                if calls.MOTO_SIGNATURE not in str(exc):
                    raise
                return recorder._judged_here(client, call, original)

        async def recorded_async(client, operation_name, api_params):  # s3fs's aiobotocore
            creds = await client._request_signer._credentials.get_frozen_credentials() \
                if client._request_signer._credentials else None
            if creds is None or creds.access_key != recorder.principal.access_key:
                return await original_async(client, operation_name, api_params)
            call = Call(client.meta.service_model.signing_name, operation_name, dict(api_params))
            recorder.calls.append(call)
            try:
                return await original_async(client, operation_name, api_params)
            except ClientError as exc:
                call.error = exc.response["Error"]["Code"]
                raise

        original_async = self._original_async = AioBaseClient._make_api_call
        botocore.client.BaseClient._make_api_call = recorded
        AioBaseClient._make_api_call = recorded_async
        return self

    def _judged_here(self, client, call: Call, original):
        auths = calls.authorizations(call.service, call.operation, call.params, REGION,
                                     self.profiles)
        refused = [a for a in auths if not evaluate([self.policy], a)]
        if refused:
            call.error = "AccessDenied"
            raise ClientError({"Error": {"Code": "AccessDeniedException",
                                         "Message": f"not authorized: {refused[0].describe()}"}},
                              call.operation)
        call.error = None
        with self.account.setup():  # moto's check is what fails: answer with it off
            admin = self.account.admin(client.meta.service_model.service_name)
            return original(admin, call.operation, call.params)

    def __exit__(self, *exc: object) -> None:
        botocore.client.BaseClient._make_api_call = self._original
        AioBaseClient._make_api_call = self._original_async


def _denied(code: str | None) -> bool:
    return bool(code) and ("AccessDenied" in code or code in ("UnauthorizedOperation", "403"))


@dataclass
class Run:
    calls: list[Call]
    auths: list[Authorization]
    outputs: dict[str, str]


def _spec_file(tmp_path, bucket: str, created: bool = False):
    """The sweep's spec; `created`: as `lifecycle: created` over two zones (its preflight
    also looks for the account's Spot service-linked role)."""
    where = ({"lifecycle": "created", "zones": [f"{REGION}a", f"{REGION}b"]} if created
             else {"zone": f"{REGION}a"})
    spec = {"name": SWEEP, "cloud": "aws", "region": REGION, **where,
            "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}, "trials": 1,
            "results": f"s3://{bucket}/{SWEEP}", "deadline": "45m",
            "schedule": {"cron": "0 3 * * *", "timezone": "UTC"}}
    path = tmp_path / f"{SWEEP}{'-created' if created else ''}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    """`pulumi up`, the deployer's spotbench commands, the orphan sweep, `pulumi destroy`."""
    from spotbench.cli import app

    tmp = tmp_path_factory.mktemp("deployer")
    # EC2's spot request state machine in front of moto: a spot member's request exists
    with MotoServer() as moto, SpotFront(moto, region=REGION) as url, \
            EnforcedAccount(url, REGION) as account:
        with account.setup():
            account.create_role(DEPLOYER, "{}", [deployer_policy(SWEEP)])
        deployer: Principal = account.session(DEPLOYER, "deployer")
        session = boto3.Session(region_name=REGION, aws_access_key_id=deployer.access_key,
                                aws_secret_access_key=deployer.secret_key,
                                aws_session_token=deployer.token)
        stack = calls.Stack(client=lambda service: session.client(service, endpoint_url=url),
                            sweep=SWEEP, region=REGION)
        profiles = {stack.role_name("member"): stack.role_arn("member")}
        outputs: dict[str, str] = {}
        env = {**deployer.env(), "AWS_ENDPOINT_URL": url, "AWS_REGION": REGION,
               "AWS_DEFAULT_REGION": REGION}
        with Recorder(deployer, deployer_policy(SWEEP), account, profiles) as recorder:
            for create, _ in calls.RESOURCE_CALLS.values():
                create(stack)
            spec_path = _spec_file(tmp, stack.ids["bucket"])
            setup_env = {"AWS_ACCESS_KEY_ID": "setup", "AWS_SECRET_ACCESS_KEY": "setup",
                         "AWS_ENDPOINT_URL": url, "AWS_DEFAULT_REGION": REGION}
            with account.setup(), environment(setup_env):  # a run the start tick opened
                ResultStore(f"s3://{stack.ids['bucket']}/{SWEEP}").open_run()
            with environment(env):
                cli = CliRunner()
                created_path = _spec_file(tmp, stack.ids["bucket"], created=True)
                for args in (["preflight", str(spec_path)], ["preflight", str(created_path)],
                             ["schedule", "pause", str(spec_path)],
                             ["schedule", "resume", str(spec_path)],
                             ["schedule", "run-now", str(spec_path)],
                             ["status", str(spec_path), "--json"]):
                    result = cli.invoke(app, args, catch_exceptions=False)
                    # stdout alone: `status --json` is parsed (stderr carries warnings)
                    outputs[" ".join(a for a in args[:2] if not a.endswith(".yaml"))] = result.stdout
                    # moto knows no EC2 quotas (NoSuchResource after authorizing): preflight
                    # says so; a refusal shows as a denied call
                    assert result.exit_code == 0 or args[0] == "preflight", (args, result.output)
                sweeper = AwsSweeper(regions=[REGION], endpoint_url=url, session=session)
                report = teardown(SWEEP, sweeper, yes=True, echo=lambda _: None)
                assert not report.failed, report.failed
            with account.setup():  # `pulumi destroy` leaves the results (force_destroy off)
                s3 = account.admin("s3")
                found = s3.list_object_versions(Bucket=stack.ids["bucket"])  # versioned
                for v in found.get("Versions", []) + found.get("DeleteMarkers", []):
                    s3.delete_object(Bucket=stack.ids["bucket"], Key=v["Key"],
                                     VersionId=v["VersionId"])
            for _, delete in reversed(list(calls.RESOURCE_CALLS.values())):
                delete(stack)
        auths = [a for c in recorder.calls if not _denied(c.error)
                 for a in calls.authorizations(c.service, c.operation, c.params, REGION, profiles)]
        return Run(recorder.calls, auths, outputs)


def test_aws_deployer_calls_cover_every_resource_type_the_policy_covers():
    assert sorted(calls.RESOURCE_CALLS) == sorted(ACTIONS)


def test_aws_deployer_runs_up_commands_teardown_and_destroy_with_no_denial(run):
    denied = [f"{c.service}:{c.operation} ({c.error})" for c in run.calls if _denied(c.error)]
    assert denied == []
    policy = [deployer_policy(SWEEP)]
    refused = [a.describe() for a in run.auths if not evaluate(policy, a)]
    assert refused == [], f"the deployer policy does not allow: {refused}"
    quota = [c for c in run.calls if c.operation == "GetServiceQuota"]
    assert quota and {c.error for c in quota} <= {None, "NoSuchResourceException"}, run.outputs["preflight"]
    ops = {(c.service, c.operation) for c in run.calls}
    assert {("servicequotas", "GetServiceQuota"), ("scheduler", "UpdateSchedule"),
            ("lambda", "Invoke"), ("s3", "GetObject"), ("ec2", "CancelSpotInstanceRequests"),
            ("lambda", "CreateFunction"), ("ec2", "RunInstances")} <= ops
    quota = [c for c in run.calls if c.operation == "GetServiceQuota"]
    assert quota and {c.error for c in quota} <= {None, "NoSuchResourceException"}, run.outputs["preflight"]
    status = json.loads(run.outputs["status"])
    assert not any("could not" in n for n in status.get("notes", [])), status.get("notes")


def test_aws_every_deployer_action_is_called(run):
    """Removing any one action from the deployer policy refuses a call of this path (the
    calls do not depend on answers until one is refused, so replaying the recorded
    authorizations against the smaller policy tells whether that path would fail)."""
    policy = deployer_policy(SWEEP)
    survivors = []
    for i, statement in enumerate(policy["Statement"]):
        for action in as_list(statement["Action"]):
            smaller = copy.deepcopy(policy)
            rest = [a for a in as_list(statement["Action"]) if a != action]
            if rest:
                smaller["Statement"][i]["Action"] = rest
            else:
                del smaller["Statement"][i]
            if all(evaluate([smaller], a) for a in run.auths):
                survivors.append(f"{statement['Sid']}/{action}")
    assert survivors == [], f"deployer actions no call needs: {survivors}"


def test_aws_deployer_may_pass_only_its_own_sweeps_roles():
    """`ax`'s deployer passes `ax-lambda` to Lambda, not sweep `ax-gpu`'s roles (a pattern
    `role/ax-*` would), nor its own roles to another service."""
    policy = [deployer_policy(SWEEP)]

    def passing(role: str, service: str) -> bool:
        return evaluate(policy, Authorization(
            "iam:PassRole", f"arn:aws:iam::{calls.ACCOUNT}:role/{role}",
            {"iam:PassedToService": service})).allowed

    assert passing("ax-lambda", "lambda.amazonaws.com")
    assert passing(member_role_name("ax", REGION), "ec2.amazonaws.com")
    assert not passing("ax-gpu-lambda", "lambda.amazonaws.com")
    assert not passing(member_role_name("ax-gpu", REGION), "ec2.amazonaws.com")
    assert not passing(grant_role_name("ax", REGION), "ec2.amazonaws.com")
    assert not passing("ax-admin", "lambda.amazonaws.com")
    assert not passing("ax-lambda", "glue.amazonaws.com")
    invoke = Authorization("lambda:InvokeFunction",
                           f"arn:aws:lambda:{REGION}:{calls.ACCOUNT}:function:ax-gpu-start")
    assert not evaluate(policy, invoke).allowed
