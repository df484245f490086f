"""A sweep `pulumi up` would deploy, recreated in the enforcing account from the program itself.

`declare(spec)` runs `infra.aws.AwsSweep` under the Pulumi mocks and keeps what the account
needs from the declared resources' inputs: the roles with their trust and inline policy
documents, the instance profiles, the SSM parameters (the groups' ssh keys), the instances
(type, tags, spot options, user data), the functions (name,
role, environment, function URL), the log groups and the schedules. Nothing here restates a
policy: a test that drops a statement edits `Declared.policies` before `deploy()`.

`deploy(account, declared)` creates them in moto (enforcement off), stops the instances as
the program's `InstanceState` does, and registers the functions with the account's Lambda
front. The member's context comes from its user data, with the done URL the deployed
function URL (what the `FunctionUrl` output is on AWS).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from spotbench.member import MemberContext
from infra.preview import RecordingMocks, _computed, install, run_declarations
from spotbench.spec import SweepSpec
from tests.iam.account import ACCOUNT, EnforcedAccount, LambdaFunction, Principal
from tests.moto_server import MotoServer

INSTANCE = "aws:ec2/instance:Instance"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
PROFILE = "aws:iam/instanceProfile:InstanceProfile"
PARAMETER = "aws:ssm/parameter:Parameter"
FUNCTION = "aws:lambda/function:Function"
FUNCTION_URL = "aws:lambda/functionUrl:FunctionUrl"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
SCHEDULE = "aws:scheduler/schedule:Schedule"


@dataclass
class Declared:
    spec: SweepSpec
    roles: dict[str, dict[str, Any]]  # role name → {"trust": json, "service": principal}
    policies: dict[str, list[dict]]  # role name → its inline policy documents
    instances: list[dict[str, Any]]  # declared inputs (+ "kind": spot|instance, "itags")
    profiles: dict[str, str]  # instance profile name → its role's name
    parameters: dict[str, dict[str, Any]]  # SSM parameter name → declared inputs
    functions: dict[str, dict[str, Any]]  # function name → inputs + "arn"
    url_functions: list[str]  # names of functions with an AWS_IAM function URL
    log_groups: list[str]
    schedules: dict[str, dict[str, Any]]  # schedule name → target

    def role_for(self, service: str) -> str:
        return next(n for n, r in self.roles.items() if r["service"] == service)

    def member_role(self, name: str) -> str:
        """The role EC2 gives member `name`: its instance profile's."""
        inst = next(i for i in self.instances if i["tags"]["Name"] == name)
        return self.profiles[inst["iamInstanceProfile"]]

    def without(self, role: str, sid: str) -> Declared:
        """A copy whose `role` lacks the statement `sid` (a document left empty is dropped)."""
        out = copy.deepcopy(self)
        docs = []
        for doc in out.policies[role]:
            doc["Statement"] = [s for s in doc["Statement"] if s.get("Sid") != sid]
            if doc["Statement"]:
                docs.append(doc)
        out.policies[role] = docs
        return out

    def statements(self) -> list[tuple[str, str]]:
        return [(role, s["Sid"]) for role, docs in self.policies.items()
                for doc in docs for s in doc["Statement"]]


def declare(spec: SweepSpec) -> Declared:
    from infra.aws import AwsSweep, AwsSweepArgs

    mocks = RecordingMocks()
    install(mocks, stack="iam")
    run_declarations(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)))
    role_ids = {f"{r.name}-id": r for r in mocks.of_type(ROLE)}
    role_arns = {_computed(ROLE, r.name, r.inputs)["arn"]: r for r in mocks.of_type(ROLE)}
    roles, policies = {}, {}
    # the mocks' role ARNs, as IAM writes them (the grant role's trust and the Lambda's
    # `sts:AssumeRole` name roles by ARN)
    real = {arn: f"arn:aws:iam::{ACCOUNT}:role/{r.inputs['name']}" for arn, r in role_arns.items()}

    def iam_arns(text: str) -> str:
        for mock, arn in real.items():
            text = text.replace(mock, arn)
        return text

    for r in mocks.of_type(ROLE):
        trust = iam_arns(r.inputs["assumeRolePolicy"])
        who = json.loads(trust)["Statement"][0]["Principal"]
        service = who.get("Service") or f"aws:{who['AWS']}"  # the grant role: the functions' role
        roles[r.inputs["name"]] = {"trust": trust, "service": service}
        policies[r.inputs["name"]] = []
    for p in mocks.of_type(ROLE_POLICY):
        policies[role_ids[p.inputs["role"]].inputs["name"]].append(
            json.loads(iam_arns(p.inputs["policy"])))
    functions = {}
    for f in mocks.of_type(FUNCTION):
        functions[f.inputs["name"]] = {**f.inputs, "arn": _computed(FUNCTION, f.name, f.inputs)["arn"],
                                       "role_name": role_arns[f.inputs["role"]].inputs["name"]}
    by_resource = {f.name: f.inputs["name"] for f in mocks.of_type(FUNCTION)}
    url_functions = []
    for u in mocks.of_type(FUNCTION_URL):
        assert u.inputs["authorizationType"] == "AWS_IAM"
        url_functions.append(next(n for n in functions if n == u.inputs["functionName"]
                                  or by_resource.get(u.inputs["functionName"]) == n))
    schedules = {s.inputs["name"]: s.inputs["target"] for s in mocks.of_type(SCHEDULE)}
    instances = [{**copy.deepcopy(i.inputs), "kind": "instance", "itags": i.inputs["tags"]}
                 for i in mocks.of_type(INSTANCE)]
    profiles = {p.inputs["name"]: p.inputs["role"] for p in mocks.of_type(PROFILE)}
    parameters = {p.inputs["name"]: dict(p.inputs) for p in mocks.of_type(PARAMETER)}
    return Declared(
        spec=spec, roles=roles, policies=policies,
        instances=instances, profiles=profiles, parameters=parameters,
        functions=functions, url_functions=url_functions,
        log_groups=[g.inputs["name"] for g in mocks.of_type(LOG_GROUP)], schedules=schedules,
    )


@dataclass
class Deployed:
    declared: Declared
    account: EnforcedAccount
    bucket: str
    instance_ids: dict[str, str] = field(default_factory=dict)  # member name → instance id
    contexts: dict[str, MemberContext] = field(default_factory=dict)  # by member name
    functions: dict[str, LambdaFunction] = field(default_factory=dict)  # by name
    other_instance: str = ""  # an instance of another sweep in the same account
    done_url: str = ""  # the deployed function URL of `done`

    def group_ids(self, group: str) -> list[str]:
        return sorted(i for n, i in self.instance_ids.items() if self.contexts[n].group == group)

    def states(self) -> dict[str, str]:
        ec2 = self.account.admin("ec2")
        return {i["InstanceId"]: i["State"]["Name"]
                for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}

    def member(self, name: str) -> Principal:
        """The session EC2 gives a member: its instance profile's role (the sweep's one
        member role), named after the instance."""
        return self.account.session(self.declared.member_role(name), self.instance_ids[name])

    def scheduler(self) -> Principal:
        return self.account.session(self.declared.role_for("scheduler.amazonaws.com"), "tick")

    def tick(self, action: str, time: str = "2026-01-05T03:00:00Z") -> dict:
        """EventBridge Scheduler firing `action`: invoke its target with the scheduler role."""
        name = f"{self.declared.spec.name}-{action}"
        target = self.declared.schedules[name]
        payload = (target["input"]
                   .replace("<aws.scheduler.schedule-arn>",
                            f"arn:aws:scheduler:{self.account.region}:123456789012:schedule/default/{name}")
                   .replace("<aws.scheduler.scheduled-time>", time))
        answer = self.account.client("lambda", self.scheduler()).invoke(
            FunctionName=target["arn"], Payload=payload.encode())
        body = json.loads(answer["Payload"].read() or b"null")
        if answer.get("FunctionError"):
            raise RuntimeError(f"{action} failed: {body}")
        return body


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _launch(ec2: Any, image: str, inst: dict[str, Any]) -> str:
    """What EC2 does for a declared member: an instance, tagged as declared, with its spot
    market options (the front keeps its persistent spot request)."""
    extra: dict[str, Any] = {}
    market = inst.get("instanceMarketOptions")
    if market:
        spot = market["spotOptions"]
        extra["InstanceMarketOptions"] = {"MarketType": market["marketType"], "SpotOptions": {
            "SpotInstanceType": spot["spotInstanceType"],
            "InstanceInterruptionBehavior": spot["instanceInterruptionBehavior"]}}
    answer = ec2.run_instances(
        ImageId=image, InstanceType=inst["instanceType"], MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": _tag_list(inst["tags"])}], **extra)
    return answer["Instances"][0]["InstanceId"]


def _env_of(user_data: str) -> dict[str, str]:
    doc = yaml.safe_load(user_data.removeprefix("#cloud-config\n"))
    text = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/env"))
    return dict(line.split("=", 1) for line in text.splitlines())


def deploy(account: EnforcedAccount, declared: Declared, bucket: str) -> Deployed:
    """A fresh account holding the deployed sweep (moto reset first)."""
    account.reset()
    out = Deployed(declared=declared, account=account, bucket=bucket)
    with account.setup():
        account.admin("s3").create_bucket(Bucket=bucket)
        for name, role in declared.roles.items():
            account.create_role(name, role["trust"], declared.policies[name])
        logs = account.admin("logs")
        for group in declared.log_groups:
            logs.create_log_group(logGroupName=group)
        ssm = account.admin("ssm")
        for name, param in declared.parameters.items():
            ssm.put_parameter(Name=name, Value=param["value"], Type=param["type"])
        ec2 = account.admin("ec2")
        image = MotoServer.any_image(ec2)
        other = ec2.run_instances(ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1,
                                  TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                      {"Key": "managed-by", "Value": "spotbench"},
                                      {"Key": "spotbench-sweep", "Value": "other"},
                                      {"Key": "spotbench-group", "Value": "other-g1"}]}])
        out.other_instance = other["Instances"][0]["InstanceId"]
        if declared.spec.image and ".dkr.ecr." in declared.spec.image:
            repo = declared.spec.image.split("/", 1)[1].split(":")[0]
            account.admin("ecr").create_repository(repositoryName=repo)
        for name, f in declared.functions.items():
            fn = LambdaFunction(name=name, arn=f["arn"], role=f["role_name"],
                                env=dict(f["environment"]["variables"]))
            account.add_function(fn)
            out.functions[name] = fn
    for name in declared.url_functions:
        out.done_url = account.function_url(out.functions[name])
    return redeploy(out, declared)


def redeploy(d: Deployed, declared: Declared) -> Deployed:
    """The same account with `declared`'s policies, the sweep's instances launched anew (the
    old ones terminated) and no results: a new `pulumi up` after a destroy, kept cheap (the
    roles, their sessions and the warm functions stay)."""
    account = d.account
    out = Deployed(declared=declared, account=account, bucket=d.bucket, functions=d.functions,
                   other_instance=d.other_instance, done_url=d.done_url)
    with account.setup():
        for name in declared.roles:
            account.roles[name] = copy.deepcopy(declared.policies[name])
            account.sync_role(name)
        s3 = account.admin("s3")
        for obj in s3.list_objects_v2(Bucket=d.bucket).get("Contents", []):
            s3.delete_object(Bucket=d.bucket, Key=obj["Key"])
        ec2 = account.admin("ec2")
        found = [i for r in ec2.describe_instances(Filters=[
                     {"Name": "tag:spotbench-sweep", "Values": [declared.spec.name]},
                     {"Name": "instance-state-name", "Values": ["pending", "running", "stopping",
                                                                "stopped"]}])["Reservations"]
                 for i in r["Instances"]]
        requests = sorted({i["SpotInstanceRequestId"] for i in found if i.get("SpotInstanceRequestId")})
        if requests:  # as teardown does: a persistent request would relaunch its instance
            ec2.cancel_spot_instance_requests(SpotInstanceRequestIds=requests)
        old = [i["InstanceId"] for i in found]
        if old:  # every earlier deployment's (a test may have redeployed from `d` before)
            ec2.terminate_instances(InstanceIds=old)
        image = MotoServer.any_image(ec2)
        for inst in declared.instances:
            out.instance_ids[inst["tags"]["Name"]] = _launch(ec2, image, inst)
        ec2.stop_instances(InstanceIds=list(out.instance_ids.values()))
    account.decisions.clear()
    account.errors.clear()
    for inst in declared.instances:
        ctx = MemberContext.model_validate_json(_env_of(inst["userData"])["SPOTBENCH_CONTEXT"])
        out.contexts[inst["tags"]["Name"]] = ctx.model_copy(update={"done_url": d.done_url})
    return out
