"""Every AWS code path a deployment takes, run under IAM enforcement with the policies the
Pulumi program declares (`tests/iam/account.py` says how the account enforces them).

- the member's path: boot (ECR login and pull, its group's keys from the function's `/keys`),
  the ledger read, its group's grant from `/grant`, the result write with it (s3fs), `done`
  through the function URL;
- the Lambdas' path: the scheduler's `start` tick opening a run and starting the groups,
  `done` stopping the caller's group, the `stop` tick at the deadline closing the run;
- teardown's orphan sweep with the operator's teardown policy.

Any denied call fails these tests; each condition is proved by a call that must be denied;
and dropping any one declared statement makes the whole path fail.
"""

from __future__ import annotations

import base64
import json

import boto3
import pytest
import requests
import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError

from spotbench.auth.group_keys import KEY_FILES, public_openssh
from spotbench.clouds.aws.grants import seed_parameter_name
from spotbench.clouds.aws.identity import grant_role_name, member_role_name, signed_post
from spotbench.clouds.aws.orphans import AwsSweeper, teardown_policy
from spotbench.ops.teardown import teardown
from spotbench.spec import load_spec
from tests.iam.account import MISSING_KEY, EnforcedAccount, Principal, Record, environment
from tests.iam.policy import evaluate, post_policy_allows
from tests.iam.deployment import Declared, Deployed, declare, deploy, redeploy
from tests.ec2_spot_front import SpotFront
from tests.moto_server import MotoServer
from workloads.common import WorkloadRun, exit_if_outside_run

pytestmark = pytest.mark.fidelity

REGION = "us-east-1"
BUCKET = "spotbench-iam-results"
OPERATOR_ROLE = "spotbench-operator"
SPEC = {
    "name": "ax", "cloud": "aws", "region": REGION, "zone": f"{REGION}a",
    "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}, "trials": 2,
    "results": f"s3://{BUCKET}/ax", "schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
    "deadline": "45m", "image": f"123456789012.dkr.ecr.{REGION}.amazonaws.com/spotbench/osu:1",
}
MEMBER = member_role_name("ax", REGION)  # every member's role (one per sweep)
GRANT = grant_role_name("ax", REGION)  # what a group writes with: the function's grant


@pytest.fixture(scope="module")
def account():
    with MotoServer() as moto, SpotFront(moto, region=REGION) as url, \
            EnforcedAccount(url, REGION) as acct:
        yield acct


@pytest.fixture(scope="module")
def declared() -> Declared:
    """The program's declarations, plus the operator's teardown policy (spotbench's own)."""
    d = declare(load_spec(SPEC))
    d.roles[OPERATOR_ROLE] = {"trust": "{}", "service": "operator"}
    d.policies[OPERATOR_ROLE] = [teardown_policy()]
    return d


@pytest.fixture(scope="module")
def first(account, declared) -> Deployed:
    return deploy(account, declared, BUCKET)


@pytest.fixture
def deployed(first, declared) -> Deployed:
    return redeploy(first, declared)


def member_env(d: Deployed, principal: Principal) -> dict[str, str]:
    return {**principal.env(), "AWS_ENDPOINT_URL": d.account.url, "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION}


def signed(d: Deployed, principal: Principal, service: str, path: str, body: dict,
           target: str | None = None) -> requests.Response:
    """A SigV4-signed POST of an API boto3 has no client for (the SSM agent's own calls)."""
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    if target:
        headers["X-Amz-Target"] = target
    request = AWSRequest(method="POST", url=d.account.url + path, data=json.dumps(body),
                         headers=headers)
    SigV4Auth(principal.credentials(), service, REGION).add_auth(request)
    return requests.post(request.url, data=request.body, headers=dict(request.headers.items()),
                         timeout=30)


def ssm_agent(d: Deployed, name: str, principal: Principal) -> None:
    """What the SSM agent on the AMI does at boot, so operators can open sessions (ops
    access, `--via ssm`): register the instance, open its Session Manager channels."""
    instance = d.instance_ids[name]
    answers = [
        signed(d, principal, "ssm", "/", {"InstanceId": instance, "AgentName": "amazon-ssm-agent",
                                          "AgentVersion": "3.3.0", "PlatformType": "Linux"},
               target="AmazonSSM.UpdateInstanceInformation"),
        signed(d, principal, "ssmmessages", f"/v1/control-channel/{instance}?role=subscribe",
               {"MessageSchemaVersion": "1.0", "RequestId": instance}),
        signed(d, principal, "ssmmessages", f"/v1/data-channel/{instance}-session?role=publish_subscribe",
               {"MessageSchemaVersion": "1.0", "RequestId": instance, "ClientId": "operator"}),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text


def fetched_keys(d: Deployed, name: str) -> list[str]:
    """The entries member `name`'s `fetch-keys` step asks the function for (its `put NAME
    PATH` lines)."""
    inst = next(i for i in d.declared.instances if i["tags"]["Name"] == name)
    doc = yaml.safe_load(inst["userData"].removeprefix("#cloud-config\n"))
    script = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/fetch-keys"))
    return [line.split()[1] for line in script.splitlines() if line.startswith("put ")]


def group_parameters(d: Deployed, group: str) -> list[str]:
    """The SSM parameters `group`'s entries come from (under the sweep's one path): the
    sweep's key seed, which every group's ssh keys derive from, and the group's own."""
    return sorted(n for n in d.declared.parameters
                  if n == seed_parameter_name("ax") or n.startswith(f"/spotbench/ax/{group}/"))


def public_of(b64: str) -> str:
    """The public key of a private key `/keys` answered (base64 of OpenSSH PEM, whose check
    integers are random: keys are compared, not texts)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(base64.b64decode(b64), None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


def keys_of(d: Deployed, principal: Principal) -> requests.Response:
    """What `fetch-keys` does with curl: a signed POST to the function URL's `/keys`."""
    return signed_post(d.done_url + "keys", {}, region=REGION, credentials=principal.credentials())


def boot(d: Deployed, name: str) -> WorkloadRun:
    """A member's boot as the unit runs it: the SSM agent registers, the unit logs in to ECR
    and pulls, fetches the group's ssh keys from the function, then the workload checks it
    is inside a run, starts (asking for its group's grant) and finds its run in the ledger."""
    principal = d.member(name)
    ssm_agent(d, name, principal)
    names = fetched_keys(d, name)
    assert len(names) == 2
    answer = keys_of(d, principal)
    assert answer.status_code == 200, answer.text
    assert answer.json()["group"] == d.contexts[name].group
    for file in names:
        assert "OPENSSH PRIVATE KEY" in base64.b64decode(answer.json()["files"][file]).decode()
    ecr = d.account.client("ecr", principal)
    ecr.get_authorization_token()
    repo = d.declared.spec.image.split("/", 1)[1].split(":")[0]
    for call in (lambda: ecr.batch_get_image(repositoryName=repo, imageIds=[{"imageTag": "1"}]),
                 lambda: ecr.batch_check_layer_availability(repositoryName=repo,
                                                            layerDigests=["sha256:" + "0" * 64])):
        try:
            call()
        except ClientError as exc:  # the image itself is not in moto: only a denial matters
            if exc.response["Error"]["Code"] in ("AccessDeniedException", "AccessDenied"):
                raise
    exit_if_outside_run(d.contexts[name])
    return WorkloadRun(d.contexts[name])


def member_finishes(d: Deployed, group: str) -> dict:
    """The group's launcher boots, stores a result and calls done; its peer only boots."""
    names = sorted(n for n, c in d.contexts.items() if c.group == group)
    launcher = next(n for n in names if d.contexts[n].role == "launcher")
    names.sort(key=lambda n: n == launcher)  # every member boots before the launcher ends
    for name in names:
        with environment(member_env(d, d.member(name))):
            run = boot(d, name)
            if name != launcher:
                continue
            run.record("latency", 1.5, "us", size=8)
            run.finish()
            answer = run.done()
    return answer


def operator(d: Deployed) -> Principal:
    return d.account.session(OPERATOR_ROLE, "operator")


def orphan_sweep(d: Deployed):
    session = boto3.Session(region_name=REGION, **_session_kwargs(operator(d)))
    sweeper = AwsSweeper(regions=[REGION], endpoint_url=d.account.url, session=session)
    return teardown(d.declared.spec.name, sweeper, yes=True, echo=lambda _: None)


def _session_kwargs(p: Principal) -> dict[str, str]:
    return {"aws_access_key_id": p.access_key, "aws_secret_access_key": p.secret_key,
            "aws_session_token": p.token}


def whole_path(d: Deployed) -> None:
    groups = [g.id for g in d.declared.spec.plan()]
    started = d.tick("start")
    assert started["status"] == 200 and sorted(started["started"]) == groups, started
    assert {d.states()[i] for g in groups for i in d.group_ids(g)} == {"running"}

    answer = member_finishes(d, groups[0])
    assert answer["group"] == groups[0] and answer["stopped"] == d.group_ids(groups[0]), answer
    states = d.states()
    assert {states[i] for i in d.group_ids(groups[0])} == {"stopped"}
    assert {states[i] for i in d.group_ids(groups[1])} == {"running"}
    assert answer.get("running") == [groups[1]], answer
    # the other group's members take the whole path too, with their own group's grant
    answer = member_finishes(d, groups[1])
    assert answer["group"] == groups[1] and answer["completed"] == 2, answer
    assert {d.states()[i] for g in groups for i in d.group_ids(g)} == {"stopped"}

    # the next day's run is still going at the deadline: the stop tick stops and closes it
    started = d.tick("start", "2026-01-06T03:00:00Z")
    assert started["status"] == 200 and sorted(started["started"]) == groups, started
    stopped = d.tick("stop")
    assert stopped["status"] == 200 and stopped.get("closed") is True, stopped
    assert {d.states()[i] for g in groups for i in d.group_ids(g)} == {"stopped"}

    report = orphan_sweep(d)
    assert not report.failed, report.failed
    assert {r.id for r in report.removed if r.kind == "instance"} == set(d.instance_ids.values())
    kinds = [r.kind for r in report.removed]
    assert kinds.index("instance") > kinds.index("spot-request")  # requests cancelled first
    left = d.account.admin("ec2").describe_spot_instance_requests(Filters=[
        {"Name": "instance-id", "Values": list(d.instance_ids.values())},
        {"Name": "state", "Values": ["open", "active", "disabled"]}])["SpotInstanceRequests"]
    assert left == []  # each member's request cancelled before its instance went
    assert d.states()[d.other_instance] != "terminated"


@pytest.fixture(scope="module")
def path_run(first, declared) -> list[Record]:
    """The whole path, run once for the module: every decision the account made."""
    d = redeploy(first, declared)
    whole_path(d)
    assert not d.account.errors, d.account.errors
    return list(d.account.decisions)


def test_aws_whole_path_runs_with_the_declared_policies_and_no_denial(path_run, declared):
    # a key read by name that is not there (a launch that stored nothing) is answered 403,
    # as S3 does without an unconditioned ListBucket: control reads it as absent
    assert [r.auth.describe() for r in path_run if not r.decision.allowed and r.source != MISSING_KEY] == []
    used = {(r.role, r.auth.action, r.decision.by) for r in path_run}
    assert ("ax-lambda", "ec2:StartInstances", "StartStopSweepInstances") in used
    assert ("ax-lambda", "sts:AssumeRole", "MintGrants") in used
    assert ("ax-lambda", "ssm:GetParameter", "ReadGroupKeys") in used
    assert (MEMBER, "s3:ListBucket", "ListRuns") in used
    assert (GRANT, "s3:PutObject", "PutResults") in used
    assert (MEMBER, "lambda:InvokeFunction", "CallDoneInvoke") in used
    assert (MEMBER, "ssmmessages:CreateControlChannel", "SsmSessions") in used


def test_aws_conditions_are_proved_by_calls_that_must_be_denied(deployed):
    d = deployed
    acct = d.account
    lam = acct.session(d.declared.role_for("lambda.amazonaws.com"), "probe")
    ec2 = acct.client("ec2", lam)
    # the Lambda role may not start or stop another sweep's instance (tag condition)
    for call in (ec2.start_instances, ec2.stop_instances):
        with pytest.raises(ClientError, match="UnauthorizedOperation"):
            call(InstanceIds=[d.other_instance])
    # nor list or read another sweep's prefix in a shared bucket (s3:prefix, object ARN)
    s3 = acct.client("s3", lam)
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.list_objects_v2(Bucket=d.bucket, Prefix="other/")
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.put_object(Bucket=d.bucket, Key="other/runs/r/run.json", Body=b"{}")
    member = d.member(next(iter(d.instance_ids)))
    s3m = acct.client("s3", member)
    with pytest.raises(ClientError, match="AccessDenied"):
        s3m.put_object(Bucket=d.bucket, Key="other/runs/r/g.1.jsonl", Body=b"{}")
    with pytest.raises(ClientError, match="AccessDenied"):
        s3m.list_objects_v2(Bucket=d.bucket, Prefix="")
    # a member cannot call the EC2 API at all, nor invoke start/stop
    with pytest.raises(ClientError, match="UnauthorizedOperation"):
        acct.client("ec2", member).stop_instances(InstanceIds=[d.other_instance])
    start_arn = d.functions[f"{d.declared.spec.name}-start"].arn
    with pytest.raises(ClientError, match="AccessDenied"):
        acct.client("lambda", member).invoke(FunctionName=start_arn, Payload=b"{}")
    # nor invoke done directly (only through its URL: lambda:InvokedViaFunctionUrl)
    done_arn = d.functions[f"{d.declared.spec.name}-done"].arn
    with pytest.raises(ClientError, match="AccessDenied"):
        acct.client("lambda", member).invoke(FunctionName=done_arn, Payload=b"{}")
    # the operator's teardown policy terminates only spotbench instances
    with acct.setup():
        plain = acct.admin("ec2").run_instances(ImageId=MotoServer.any_image(acct.admin("ec2")),
                                                MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    with pytest.raises(ClientError, match="UnauthorizedOperation"):
        acct.client("ec2", operator(d)).terminate_instances(InstanceIds=[plain])
    assert d.states()[plain] != "terminated" and d.states()[d.other_instance] == "running"
    assert not acct.errors, acct.errors


# statements only AWS services use, with the role, after an invocation failed for good
# (Lambda's on-failure destination, the scheduler's DLQ): no call of this path needs them;
# tests/infra/test_aws_failures.py asserts what they grant, and to which queue only
SERVICE_ONLY = {("ax-lambda", "FailedInvocations"), ("ax-scheduler", "DeadLetters"),
                # the grant's store reads `run.json` when the member runs without a prior
                # `exit_if_outside_run` (tests/faults/test_control_lock.py takes that path)
                (GRANT, "ReadLedger"),
                # a created-lifecycle sweep's fleets (this path's sweep is `stopped`):
                # tests/iam/test_aws_fleet_iam.py::test_capacity_iam_teardown_deletes_only_spotbench_fleets
                ("spotbench-operator", "DeleteSpotbenchFleets")}


def test_aws_every_declared_statement_is_needed(path_run, declared):
    """Least privilege: without any one declared statement, a call of the whole path is denied.

    The path's calls do not depend on answers until one is refused, so the path run with a
    statement dropped makes the same calls as the recorded run up to the first call the
    smaller policy refuses: replaying the recorded authorizations against it tells whether
    that run would fail, without running the path once per statement."""
    decisions = [r for r in path_run if r.source != MISSING_KEY]  # S3's 403 for a missing key
    assert decisions and all(r.decision.allowed for r in decisions)
    survivors = []
    for role, sid in declared.statements():
        if (role, sid) in SERVICE_ONLY:
            continue
        smaller = declared.without(role, sid).policies[role]
        if all(evaluate(smaller, r.auth) for r in decisions if r.role == role):
            survivors.append(f"{role}/{sid}")
    assert survivors == [], f"statements no code path needs: {survivors}"


def test_aws_dropping_a_statement_really_fails_the_path(first, declared):
    """The replay above, checked once for real: without the Lambda's tag-scoped start/stop
    statement the scheduler's start tick is refused and nothing starts."""
    d = redeploy(first, declared.without("ax-lambda", "StartStopSweepInstances"))
    with pytest.raises(RuntimeError, match="start failed"):
        whole_path(d)
    assert [r.auth.action for r in d.account.denials()][:1] == ["ec2:StartInstances"]
    assert set(d.states()[i] for i in d.instance_ids.values()) == {"stopped"}
    redeploy(first, declared)


def test_aws_sweep_lambda_role_cannot_write_the_logs_of_a_sweep_its_name_prefixes(deployed):
    """`ax`'s functions log to `/aws/lambda/ax-start`…; sweep `ax-gpu`'s to
    `/aws/lambda/ax-gpu-start`…: a pattern `ax-*` would let `ax`'s role write (forge) them."""
    d = deployed
    acct = d.account
    theirs = "/aws/lambda/ax-gpu-start"
    with acct.setup():
        acct.admin("logs").create_log_group(logGroupName=theirs)
    lam = acct.session(d.declared.role_for("lambda.amazonaws.com"), "probe")
    logs = acct.client("logs", lam)
    with pytest.raises(ClientError, match="AccessDenied"):
        logs.create_log_stream(logGroupName=theirs, logStreamName="forged")
    with pytest.raises(ClientError, match="AccessDenied"):
        logs.put_log_events(logGroupName=theirs, logStreamName="forged",
                            logEvents=[{"timestamp": 0, "message": "forged"}])
    # nor create a log group (the program declares them, with their retention)
    with pytest.raises(ClientError, match="AccessDenied"):
        logs.create_log_group(logGroupName="/aws/lambda/ax-anything")
    # its own log groups it may write
    logs.create_log_stream(logGroupName="/aws/lambda/ax-start", logStreamName="own")
    assert not acct.errors, acct.errors


# Actions of declared statements that the whole path above does not call, and why they are
# still needed; everything else a statement lists must be called (a superfluous action in a
# needed statement escapes the statement-level check above).
NOT_EXERCISED = {
    (GRANT, "PutResults", "s3:AbortMultipartUpload"): "a failed multipart upload",
    (GRANT, "ReadLedger", "s3:GetObject"): "tests/faults/test_control_lock.py's member path",
    (MEMBER, "PullImage", "ecr:GetDownloadUrlForLayer"): "docker pull's layer downloads",
    (MEMBER, "SsmSessions", "ssmmessages:OpenControlChannel"): "the agent's websocket",
    (MEMBER, "SsmSessions", "ssmmessages:OpenDataChannel"): "the agent's websocket",
    ("spotbench-operator", "FindSweepResources", "ec2:DescribeRegions"): "teardown of all regions",
    ("spotbench-operator", "DeleteSpotbenchFleets", "ec2:DeleteFleets"):
        "a created-lifecycle sweep's fleets (tests/iam/test_aws_fleet_iam.py)",
    # sent by Lambda / EventBridge Scheduler with these roles after an asynchronous start or
    # stop failed for good: no invocation of this path fails (tests/infra/test_aws_failures.py)
    ("ax-lambda", "FailedInvocations", "sqs:SendMessage"): "a start/stop that failed for good",
    ("ax-scheduler", "DeadLetters", "sqs:SendMessage"): "an event the scheduler could not deliver",
}


def test_aws_every_declared_action_is_called(path_run, declared):
    from tests.iam.policy import as_list, wildcard

    unused, declared_actions = [], set()
    for role, docs in declared.policies.items():
        for doc in docs:
            for s in doc["Statement"]:
                for action in as_list(s["Action"]):
                    declared_actions.add((role, s["Sid"], action))
                    if (role, s["Sid"], action) in NOT_EXERCISED:
                        continue
                    if not any(r.role == role and r.decision.by == s["Sid"]
                               and wildcard(action, r.auth.action, ignore_case=True)
                               for r in path_run):
                        unused.append(f"{role}/{s['Sid']}/{action}")
    assert unused == [], f"declared actions no code path calls: {unused}"
    assert set(NOT_EXERCISED) <= declared_actions, "NOT_EXERCISED names an action no longer declared"


def group_grant(d: Deployed, member: Principal) -> Principal:
    """The grant the sweep's function mints for `member`'s group (its `/grant` path)."""
    answer = signed_post(d.done_url + "grant", {}, region=REGION, credentials=member.credentials())
    assert answer.status_code == 200, answer.text
    return d.account.principal_of(answer.json()["credentials"]["AccessKeyId"])


@pytest.mark.security
def test_aws_a_member_cannot_write_another_groups_results(deployed):
    """Attack: a VM of one group writes (or overwrites) another group's records, raw output
    or the run's ledger entries, with what it holds: its instance role (the sweep's one
    member role, which writes nothing) and its group's grant (the function's STS session,
    narrowed by a session policy to `runs/<run>/<its group>.<n>…`; AWS's `*` spans `/`: the
    run segment is matched by length)."""
    d = deployed
    run = d.tick("start")["run"]
    mine, theirs = (g.id for g in d.declared.spec.plan())
    attacker = next(n for n, c in d.contexts.items() if c.group == mine)
    role = d.account.client("s3", d.member(attacker))
    s3 = d.account.client("s3", group_grant(d, d.member(attacker)))
    prefix = "ax/runs"
    for key in (f"{prefix}/{run}/{theirs}.1.jsonl", f"{prefix}/{run}/{theirs}.1/osu.txt",
                f"{prefix}/{run}/{theirs}.1/{mine}.1.jsonl",  # inside their raw folder
                f"{prefix}/{run}/{mine}0.1.jsonl",  # a group `…-t10` when mine is `…-t1`
                f"{prefix}/{run}/flags/{theirs}.1.json", f"{prefix}/{run}/flags/{mine}.1.json",
                f"{prefix}/{run}/starts/{mine}.2.json", f"{prefix}/{run}/launches/{mine}.9",
                f"{prefix}/{run}/run.json", f"{prefix}/{run}-abcd/x/{mine}.1.jsonl",
                f"{prefix}/{run}-abcd/{mine}.1.jsonl",  # another run: the grant names the open one (#38)
                "ax/market/20991231T235959Z.json"):  # the market snapshot control orders zones by
        for client in (s3, role):
            with pytest.raises(ClientError, match="AccessDenied"):
                client.put_object(Bucket=d.bucket, Key=key, Body=b"{}")
    for key in (f"{prefix}/{run}/{mine}.1.jsonl", f"{prefix}/{run}/{mine}.1/osu.txt"):
        s3.put_object(Bucket=d.bucket, Key=key, Body=b"{}")
        with pytest.raises(ClientError, match="AccessDenied"):  # the role itself: nothing
            role.put_object(Bucket=d.bucket, Key=key, Body=b"{}")
    assert not d.account.errors, d.account.errors


@pytest.mark.security
def test_aws_done_refuses_a_caller_that_is_not_the_sweeps_instance_session(deployed):
    """Attack: credentials that are not an instance session of the sweep's member role (the
    grant role's, the functions' or the scheduler's), in a session named after an instance
    of the other group, call `done` for that group through the function URL. The function
    takes the group from the instance the sweep's member role session names, and refuses any
    other role, so the other group keeps running; its genuine instance session is obeyed."""
    d = deployed
    started = d.tick("start")
    mine, theirs = (g.id for g in d.declared.spec.plan())
    assert sorted(started["started"]) == sorted([mine, theirs]), json.dumps(started)
    victim = d.group_ids(theirs)[0]
    assert {d.states()[i] for i in d.group_ids(theirs)} == {"running"}
    # a role the attacker could hold: give it the URL call the member role has
    for role in (GRANT, "ax-lambda", "ax-scheduler"):
        d.account.roles[role] = [*d.account.roles[role], *d.account.roles[MEMBER]]
        forged = d.account.session(role, victim)
        answer = signed_post(d.done_url, {"group": theirs}, region=REGION,
                             credentials=forged.credentials())
        assert answer.status_code == 403, answer.text
        assert f"not this sweep's member role" in answer.json()["error"]
    assert {d.states()[i] for i in d.group_ids(theirs)} == {"running"}
    # a member of one group asking `done` for the other group: refused (its own group only)
    attacker = d.member(next(n for n, c in d.contexts.items() if c.group == mine))
    answer = signed_post(d.done_url, {"group": theirs}, region=REGION,
                         credentials=attacker.credentials())
    assert answer.status_code == 403 and "only its own group" in answer.json()["error"]
    assert {d.states()[i] for i in d.group_ids(theirs)} == {"running"}
    honest = d.account.session(MEMBER, victim)
    answer = signed_post(d.done_url, {"group": theirs}, region=REGION,
                         credentials=honest.credentials())
    assert answer.status_code == 200 and answer.json()["group"] == theirs, answer.text
    assert not d.account.errors, d.account.errors


@pytest.mark.security
def test_aws_a_member_cannot_read_another_groups_ssh_keys(deployed):
    """Attack: a VM of one group reads the other group's ssh private keys (to log in to, or
    pose as, that group's members): from Parameter Store with its own role (refused: only
    the functions' role reads the sweep's path), or from the function (which answers its
    own group's only)."""
    d = deployed
    mine, theirs = (g.id for g in d.declared.spec.plan())
    attacker = next(n for n, c in d.contexts.items() if c.group == mine)
    ssm = d.account.client("ssm", d.member(attacker))
    for parameter in [*group_parameters(d, theirs), *group_parameters(d, mine)]:
        with pytest.raises(ClientError, match="AccessDenied"):
            ssm.get_parameter(Name=parameter, WithDecryption=True)
    answer = keys_of(d, d.member(attacker))
    assert answer.status_code == 200 and answer.json()["group"] == mine
    admin = d.account.admin("ssm")
    with d.account.setup():  # their keys: derived from the sweep's seed for their group
        seed = admin.get_parameter(Name=seed_parameter_name("ax"),
                                   WithDecryption=True)["Parameter"]["Value"]
    theirs_values = {public_openssh(bytes.fromhex(seed), theirs, f) for f in KEY_FILES}
    mine_values = {public_of(v) for v in answer.json()["files"].values()}
    assert mine_values == {public_openssh(bytes.fromhex(seed), mine, f) for f in KEY_FILES}
    assert theirs_values and not theirs_values & mine_values
    # nor may the scheduler's role read any key
    other = d.account.client("ssm", d.account.session(d.declared.role_for("scheduler.amazonaws.com"),
                                                      "probe"))
    with pytest.raises(ClientError, match="AccessDenied"):
        other.get_parameter(Name=group_parameters(d, mine)[0], WithDecryption=True)
    assert not d.account.errors, d.account.errors


# ---- the grants (issue #29): what the function mints, and what it refuses -----------------

def _put(client, d: Deployed, key: str) -> None:
    client.put_object(Bucket=d.bucket, Key=key, Body=b"{}")


@pytest.mark.security
def test_aws_a_grant_replayed_after_the_deadline_is_refused(deployed):
    """Attack: a group keeps (or leaks) its grant and writes with it after the group's
    deadline (a next attempt's results, a forged late record). STS hands out at least 15
    minutes, so the session policy itself says `aws:CurrentTime < deadline`; and once the
    deadline passed the function mints no new grant."""
    from datetime import UTC, datetime, timedelta

    d = deployed
    run = d.tick("start")["run"]
    mine = d.declared.spec.plan()[0].id
    member = d.member(next(n for n, c in d.contexts.items() if c.group == mine))
    answer = signed_post(d.done_url + "grant", {}, region=REGION, credentials=member.credentials())
    assert answer.status_code == 200, answer.text
    grant = answer.json()
    deadline = datetime.fromisoformat(grant["expires"])
    assert timedelta(0) < deadline - datetime.now(UTC) <= timedelta(minutes=45)
    assert datetime.fromisoformat(grant["credentials"]["Expiration"]) <= deadline
    s3 = d.account.client("s3", d.account.principal_of(grant["credentials"]["AccessKeyId"]))
    _put(s3, d, f"ax/runs/{run}/{mine}.1.jsonl")  # before the deadline: its own records
    d.account.now = deadline + timedelta(seconds=1)  # the same credentials, a second too late
    with pytest.raises(ClientError, match="AccessDenied"):
        _put(s3, d, f"ax/runs/{run}/{mine}.2.jsonl")
    assert d.account.denials()[-1].decision.by.startswith("session policy")
    d.account.now = None
    # the function: the group's launch is older than the deadline → no grant
    with d.account.setup():
        d.account.admin("s3").put_object(
            Bucket=d.bucket, Key=f"ax/runs/{run}/launches/{mine}.1",
            Body=(datetime.now(UTC) - timedelta(minutes=46)).isoformat().encode())
    late = signed_post(d.done_url + "grant", {}, region=REGION, credentials=member.credentials())
    assert late.status_code == 403 and "past its deadline" in late.json()["error"], late.text
    assert not d.account.errors, d.account.errors


@pytest.mark.security
def test_aws_a_grant_covers_only_its_own_groups_prefix(deployed):
    """Attack: a group's grant is used for another group's prefix (records, raw output, the
    group `…-t10` beside `…-t1`), the ledger, or another sweep's prefix in the same bucket;
    and the presigned POST's `starts-with` condition names the group's records only."""
    import base64 as b64

    d = deployed
    run = d.tick("start")["run"]
    mine, theirs = (g.id for g in d.declared.spec.plan())
    member = d.member(next(n for n, c in d.contexts.items() if c.group == mine))
    answer = signed_post(d.done_url + "grant", {}, region=REGION, credentials=member.credentials())
    grant = answer.json()
    assert grant["group"] == mine and grant["prefixes"] == [f"runs/{run}/{mine}."]
    s3 = d.account.client("s3", d.account.principal_of(grant["credentials"]["AccessKeyId"]))
    for key in (f"ax/runs/{run}/{theirs}.1.jsonl", f"ax/runs/{run}/{theirs}.1/{mine}.1.jsonl",
                f"ax/runs/{run}/{mine}0.1.jsonl", f"ax/checkpoints/{theirs}/{run}/x",
                f"ax/runs/{run}/launches/{mine}.2", "other/runs/r/x.1.jsonl", "ax/control.lock"):
        with pytest.raises(ClientError, match="AccessDenied"):
            _put(s3, d, key)
    for prefix in (f"ax/runs/{run}/{theirs}.", "ax/checkpoints/", "other/"):
        with pytest.raises(ClientError, match="AccessDenied"):
            s3.list_objects_v2(Bucket=d.bucket, Prefix=prefix) if prefix == "other/" else \
                s3.get_object(Bucket=d.bucket, Key=prefix + "x")
    _put(s3, d, f"ax/runs/{run}/{mine}.1.jsonl")
    # the POST policy (S3 checks its conditions; moto does not: evaluated here)
    post = grant["post"]
    policy = json.loads(b64.b64decode(post["fields"]["policy"]))
    assert post_policy_allows(policy, f"ax/runs/{run}/{mine}.1.jsonl", d.bucket)
    for key in (f"ax/runs/{run}/{theirs}.1.jsonl", f"ax/runs/{run}/{mine}0.1.jsonl",
                f"ax/runs/{run}/flags/{mine}.1.json"):
        assert not post_policy_allows(policy, key, d.bucket), key
    expiry = policy["expiration"].replace("Z", "+00:00")
    from datetime import datetime
    assert datetime.fromisoformat(expiry) <= datetime.fromisoformat(grant["expires"])
    assert not d.account.errors, d.account.errors


@pytest.mark.security
def test_aws_an_instance_of_another_sweep_gets_nothing(deployed):
    """Attack: an instance of another sweep in the same account (tagged for its own sweep and
    group), holding a session of this sweep's member role named after itself, asks for a
    grant, keys or `done`: it is not one of this plan's members."""
    d = deployed
    d.tick("start")
    stranger = d.account.session(MEMBER, d.other_instance)
    for path in ("grant", "keys", ""):
        answer = signed_post(d.done_url + path, {"group": "other-g1"}, region=REGION,
                             credentials=stranger.credentials())
        assert answer.status_code == 403, (path, answer.text)
        assert "not a member of sweep ax" in answer.json()["error"] or \
            "not part of sweep ax" in answer.json()["error"], answer.text
    assert {d.states()[i] for g in d.declared.spec.plan() for i in d.group_ids(g.id)} == {"running"}
    assert not d.account.errors, d.account.errors


@pytest.mark.security
def test_aws_a_forged_instance_identity_is_refused(deployed):
    """Attack: a caller that is not an instance session of this account's member role asks for
    a grant or keys: a session of another role named after a member's instance, and (a
    direct event, as a forged URL event would carry) an assumed-role ARN of another account."""
    from types import SimpleNamespace

    from functions import lambda_handler

    d = deployed
    d.tick("start")
    victim = next(iter(d.instance_ids.values()))
    d.account.roles["ax-scheduler"] = [*d.account.roles["ax-scheduler"], *d.account.roles[MEMBER]]
    forged = d.account.session("ax-scheduler", victim)
    for path in ("grant", "keys"):
        answer = signed_post(d.done_url + path, {}, region=REGION, credentials=forged.credentials())
        assert answer.status_code == 403 and "not this sweep's member role" in answer.json()["error"]
    event = {"rawPath": "/grant", "body": "{}", "requestContext": {
        "http": {"method": "POST"}, "authorizer": {"iam": {
            "accountId": "999999999999",
            "userArn": f"arn:aws:sts::999999999999:assumed-role/{MEMBER}/{victim}"}}}}
    fn = d.functions["ax-done"]
    answer = d.account.run_function(fn, event)
    assert answer["statusCode"] == 403 and "999999999999" in json.loads(answer["body"])["error"]
    assert lambda_handler is not None and SimpleNamespace  # the adapter the account runs
    assert not d.account.errors, d.account.errors
