"""The AWS API calls `pulumi up` / `pulumi destroy` make for each resource type the program
declares, as boto3 calls a test runs against moto with the deployer's credentials.

Per type: what the Terraform-based provider does with it (create, read back with its
tags, update in place, delete), in the order a stack creates them, and the reverse order
on destroy. `RESOURCE_CALLS` is keyed like `infra.aws.deployer.ACTIONS`; a test fails when
the program declares a type with no calls here. The IAM action of each call is botocore's
`<signing name>:<operation>`, except where AWS names it otherwise (`IAM_NAMES`), and a call
that hands a role to a service also needs `iam:PassRole` on that role (`pass_role`).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.parsers import ResponseParserError

from spotbench.clouds.aws.identity import member_role_name
from spotbench.labels import name_prefix
from tests.iam.policy import Authorization
from tests.iam.requests import IAM_NAMES

ACCOUNT = "123456789012"
MOTO_SIGNATURE = "SignatureDoesNotMatch"  # moto cannot check a REST-JSON GET's signature
NO_PERMISSION = {("sts", "GetCallerIdentity")}
# which service each role-passing operation hands its role to
PASSED_TO = {
    "CreateFunction": "lambda.amazonaws.com", "UpdateFunctionConfiguration": "lambda.amazonaws.com",
    "CreateSchedule": "scheduler.amazonaws.com", "UpdateSchedule": "scheduler.amazonaws.com",
    "RunInstances": "ec2.amazonaws.com", "RequestSpotInstances": "ec2.amazonaws.com",
}


def authorizations(service: str, operation: str, params: dict[str, Any], region: str,
                   profiles: dict[str, str]) -> list[Authorization]:
    """What AWS authorizes for one call (the resource ARN where a policy names one)."""
    if (service, operation) in NO_PERMISSION:
        return []
    action = IAM_NAMES.get((service, operation), f"{service}:{operation}")
    resource = "*"
    if service == "lambda" and "FunctionName" in params:
        name = params["FunctionName"]
        resource = name if name.startswith("arn:") else \
            f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name}"
    elif service == "s3" and "Key" in params:
        resource = f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"
    elif service == "s3" and "Bucket" in params:
        resource = f"arn:aws:s3:::{params['Bucket']}"
    out = [Authorization(action, resource)]
    role = pass_role(operation, params, profiles)
    if role:
        out.append(Authorization("iam:PassRole", role,
                                 {"iam:PassedToService": PASSED_TO[operation]}))
    return out


def pass_role(operation: str, params: dict[str, Any], profiles: dict[str, str]) -> str | None:
    """The role ARN an operation hands to a service, if any."""
    if operation in ("CreateFunction", "UpdateFunctionConfiguration"):
        return params.get("Role")
    if operation in ("CreateSchedule", "UpdateSchedule"):
        return params.get("Target", {}).get("RoleArn")
    if operation == "RunInstances":
        profile = params.get("IamInstanceProfile", {}).get("Name")
        return profiles.get(profile) if profile else None
    if operation == "RequestSpotInstances":
        profile = params.get("LaunchSpecification", {}).get("IamInstanceProfile", {}).get("Name")
        return profiles.get(profile) if profile else None
    return None


@dataclass
class Stack:
    """What a test stack created so far (ids by kind), and its clients."""

    client: Callable[[str], Any]
    sweep: str
    region: str
    ids: dict[str, Any] = field(default_factory=dict)

    def role_arn(self, suffix: str) -> str:
        return f"arn:aws:iam::{ACCOUNT}:role/{self.role_name(suffix)}"

    def role_name(self, suffix: str) -> str:
        """`lambda`, `scheduler`, or `member`: the role of the sweep's members (one per sweep)."""
        return member_role_name(self.sweep, self.region) if suffix == "member" else f"{self.sweep}-{suffix}"

    @property
    def group(self) -> str:
        return f"{name_prefix(self.sweep)}a1b2c3-t1"


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("functions/lambda_handler.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


def _tags(s: Stack) -> list[dict[str, str]]:
    return [{"Key": "managed-by", "Value": "spotbench"}, {"Key": "spotbench-sweep", "Value": s.sweep}]


# ---- per resource type: (create + read + update, delete) --------------------------------
def vpc(s: Stack) -> None:
    ec2 = s.client("ec2")
    s.ids["vpc"] = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=s.ids["vpc"], EnableDnsHostnames={"Value": True})
    ec2.describe_vpcs(VpcIds=[s.ids["vpc"]])


def vpc_delete(s: Stack) -> None:
    s.client("ec2").delete_vpc(VpcId=s.ids["vpc"])


def subnet(s: Stack) -> None:
    ec2 = s.client("ec2")
    for name, cidr in (("subnet", "10.42.0.0/20"), ("public", "10.42.16.0/28")):
        s.ids[name] = ec2.create_subnet(VpcId=s.ids["vpc"], CidrBlock=cidr)["Subnet"]["SubnetId"]
    ec2.modify_subnet_attribute(SubnetId=s.ids["subnet"], MapPublicIpOnLaunch={"Value": False})


def subnet_delete(s: Stack) -> None:
    for name in ("subnet", "public"):
        s.client("ec2").delete_subnet(SubnetId=s.ids[name])


def internet_gateway(s: Stack) -> None:
    ec2 = s.client("ec2")
    s.ids["igw"] = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=s.ids["igw"], VpcId=s.ids["vpc"])


def internet_gateway_delete(s: Stack) -> None:
    ec2 = s.client("ec2")
    ec2.detach_internet_gateway(InternetGatewayId=s.ids["igw"], VpcId=s.ids["vpc"])
    ec2.delete_internet_gateway(InternetGatewayId=s.ids["igw"])


def eip(s: Stack) -> None:
    s.ids["eip"] = s.client("ec2").allocate_address(Domain="vpc")["AllocationId"]


def eip_delete(s: Stack) -> None:
    s.client("ec2").release_address(AllocationId=s.ids["eip"])


def nat_gateway(s: Stack) -> None:
    s.ids["nat"] = s.client("ec2").create_nat_gateway(
        SubnetId=s.ids["public"], AllocationId=s.ids["eip"])["NatGateway"]["NatGatewayId"]


def nat_gateway_delete(s: Stack) -> None:
    s.client("ec2").delete_nat_gateway(NatGatewayId=s.ids["nat"])


def route_table(s: Stack) -> None:
    ec2 = s.client("ec2")
    s.ids["rt"] = ec2.create_route_table(VpcId=s.ids["vpc"])["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=s.ids["rt"], DestinationCidrBlock="0.0.0.0/0",
                     NatGatewayId=s.ids["nat"])


def route_table_delete(s: Stack) -> None:
    ec2 = s.client("ec2")
    ec2.delete_route(RouteTableId=s.ids["rt"], DestinationCidrBlock="0.0.0.0/0")
    ec2.delete_route_table(RouteTableId=s.ids["rt"])


def route_table_association(s: Stack) -> None:
    s.ids["assoc"] = s.client("ec2").associate_route_table(
        RouteTableId=s.ids["rt"], SubnetId=s.ids["subnet"])["AssociationId"]


def route_table_association_delete(s: Stack) -> None:
    s.client("ec2").disassociate_route_table(AssociationId=s.ids["assoc"])


def vpc_endpoint(s: Stack) -> None:
    ec2 = s.client("ec2")
    s.ids["vpce"] = ec2.create_vpc_endpoint(
        VpcId=s.ids["vpc"], ServiceName=f"com.amazonaws.{s.region}.s3",
        RouteTableIds=[s.ids["rt"]])["VpcEndpoint"]["VpcEndpointId"]
    ec2.modify_vpc_endpoint(VpcEndpointId=s.ids["vpce"], ResetPolicy=True)


def vpc_endpoint_delete(s: Stack) -> None:
    _after_authorization(lambda: s.client("ec2").delete_vpc_endpoints(
        VpcEndpointIds=[s.ids["vpce"]]))


def security_group(s: Stack) -> None:
    ec2 = s.client("ec2")
    s.ids["sg"] = ec2.create_security_group(GroupName=f"{s.sweep}-g1", Description="group",
                                            VpcId=s.ids["vpc"])["GroupId"]
    ec2.revoke_security_group_egress(GroupId=s.ids["sg"], IpPermissions=[
        {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])  # AWS's default rule


def security_group_delete(s: Stack) -> None:
    s.client("ec2").delete_security_group(GroupId=s.ids["sg"])


def _rule(direction: str) -> tuple[Callable[[Stack], None], Callable[[Stack], None]]:
    """A security-group rule resource (`ingress`: every TCP port from the group itself;
    `egress`: anywhere): authorized on create, revoked on delete."""
    def permission(s: Stack) -> dict[str, Any]:
        if direction == "ingress":
            return {"IpProtocol": "tcp", "FromPort": 0, "ToPort": 65535,
                    "UserIdGroupPairs": [{"GroupId": s.ids["sg"]}]}
        return {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}

    def call(verb: str) -> Callable[[Stack], None]:
        return lambda s: getattr(s.client("ec2"), f"{verb}_security_group_{direction}")(
            GroupId=s.ids["sg"], IpPermissions=[permission(s)])

    return call("authorize"), call("revoke")


def _after_authorization(call: Callable[[], Any]) -> None:
    """A call moto authorizes and then fails with a 500 of its own (placement groups, VPC
    endpoint deletion): the
    authorization is what is tested (a refusal would be a 403 answer)."""
    try:
        call()
    except ResponseParserError as exc:
        assert "500 Internal Server Error" in str(exc), exc


def placement_group(s: Stack) -> None:
    _after_authorization(lambda: s.client("ec2").create_placement_group(
        GroupName=f"{s.sweep}-g1", Strategy="cluster"))


def placement_group_delete(s: Stack) -> None:
    _after_authorization(lambda: s.client("ec2").delete_placement_group(GroupName=f"{s.sweep}-g1"))


def _ami(s: Stack) -> str:
    return s.client("ssm").get_parameter(
        Name="/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id"
    )["Parameter"]["Value"]


def instance(s: Stack) -> None:
    """A spot member as the provider creates it: RunInstances with persistent spot market
    options, the instance's and its volumes' tags (tests/infra/aws_provider_api.py), then
    the read-back."""
    ec2 = s.client("ec2")
    s.ids["instance"] = ec2.run_instances(
        ImageId=s.ids["ami"], InstanceType="c5n.large", MinCount=1, MaxCount=1,
        SubnetId=s.ids["subnet"], SecurityGroupIds=[s.ids["sg"]],
        IamInstanceProfile={"Name": s.role_name("member")},
        MetadataOptions={"HttpTokens": "required", "HttpEndpoint": "enabled",
                         "HttpPutResponseHopLimit": 2},
        InstanceInitiatedShutdownBehavior="stop",
        InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {
            "SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"}},
        TagSpecifications=[{"ResourceType": "instance", "Tags": _tags(s)},
                           {"ResourceType": "volume", "Tags": _tags(s)}],
    )["Instances"][0]["InstanceId"]
    ec2.describe_instances(InstanceIds=[s.ids["instance"]])
    # a tag change on a later `pulumi up` (the spec's labels)
    ec2.create_tags(Resources=[s.ids["instance"]], Tags=[{"Key": "team", "Value": "x"}])
    ec2.delete_tags(Resources=[s.ids["instance"]], Tags=[{"Key": "team"}])
    ec2.modify_instance_attribute(InstanceId=s.ids["instance"],
                                  InstanceInitiatedShutdownBehavior={"Value": "stop"})


def launch_template(s: Stack) -> None:
    """A member's template of `lifecycle: created` (infra/aws/templates.py), tagged at
    creation, then a new default version (a later `pulumi up` with a new AMI)."""
    ec2 = s.client("ec2")
    data = {"ImageId": s.ids["ami"], "InstanceType": "g4dn.xlarge",
            "IamInstanceProfile": {"Name": s.role_name("member")},
            "MetadataOptions": {"HttpTokens": "required"},
            "TagSpecifications": [{"ResourceType": "instance", "Tags": _tags(s)}]}
    s.ids["template"] = ec2.create_launch_template(
        LaunchTemplateName=f"{s.group}-l0-{s.region}a", LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": _tags(s)}],
    )["LaunchTemplate"]["LaunchTemplateId"]
    version = ec2.create_launch_template_version(
        LaunchTemplateId=s.ids["template"], LaunchTemplateData=data)["LaunchTemplateVersion"]
    ec2.modify_launch_template(LaunchTemplateId=s.ids["template"],
                               DefaultVersion=str(version["VersionNumber"]))
    ec2.describe_launch_templates(LaunchTemplateIds=[s.ids["template"]])


def launch_template_delete(s: Stack) -> None:
    s.client("ec2").delete_launch_template(LaunchTemplateId=s.ids["template"])


def instance_delete(s: Stack) -> None:
    s.client("ec2").terminate_instances(InstanceIds=[s.ids["instance"]])


TRUST = {"member": "ec2.amazonaws.com", "lambda": "lambda.amazonaws.com",
         "scheduler": "scheduler.amazonaws.com"}


def role(s: Stack) -> None:
    iam = s.client("iam")
    for suffix, service in TRUST.items():
        name = s.role_name(suffix)
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                    "Principal": {"Service": service}}]}))
        iam.tag_role(RoleName=name, Tags=_tags(s))
        iam.get_role(RoleName=name)
        iam.list_role_policies(RoleName=name)
        iam.list_attached_role_policies(RoleName=name)


def role_delete(s: Stack) -> None:
    iam = s.client("iam")
    for suffix in TRUST:
        iam.list_instance_profiles_for_role(RoleName=s.role_name(suffix))
        iam.delete_role(RoleName=s.role_name(suffix))


def role_policy(s: Stack) -> None:
    iam = s.client("iam")
    for suffix in TRUST:
        iam.put_role_policy(RoleName=s.role_name(suffix), PolicyName="spotbench",
                            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}))
        iam.get_role_policy(RoleName=s.role_name(suffix), PolicyName="spotbench")


def role_policy_delete(s: Stack) -> None:
    for suffix in TRUST:
        s.client("iam").delete_role_policy(RoleName=s.role_name(suffix), PolicyName="spotbench")


def instance_profile(s: Stack) -> None:
    iam = s.client("iam")
    name = s.role_name("member")  # the profile is named like its role
    iam.create_instance_profile(InstanceProfileName=name)
    iam.tag_instance_profile(InstanceProfileName=name, Tags=_tags(s))
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    iam.get_instance_profile(InstanceProfileName=name)
    s.ids["ami"] = _ami(s)


def instance_profile_delete(s: Stack) -> None:
    iam = s.client("iam")
    name = s.role_name("member")
    iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=name)
    iam.delete_instance_profile(InstanceProfileName=name)


def bucket(s: Stack) -> None:
    s3 = s.client("s3")
    name = s.ids["bucket"] = f"{s.sweep}-results-20260105030000000000000001"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": _tags(s)})
    s3.head_bucket(Bucket=name)
    for read in (s3.get_bucket_tagging, s3.get_bucket_versioning, s3.get_bucket_accelerate_configuration,
                 s3.get_bucket_acl, s3.get_bucket_policy, s3.get_bucket_encryption,
                 s3.get_bucket_lifecycle_configuration, s3.get_bucket_replication):
        try:
            read(Bucket=name)
        except s3.exceptions.ClientError as exc:  # "no such configuration" answers
            if exc.response["Error"]["Code"] in ("AccessDenied", "AccessDeniedException"):
                raise


def bucket_delete(s: Stack) -> None:
    s.client("s3").delete_bucket(Bucket=s.ids["bucket"])


def public_access_block(s: Stack) -> None:
    s3 = s.client("s3")
    s3.put_public_access_block(Bucket=s.ids["bucket"], PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True})
    s3.get_public_access_block(Bucket=s.ids["bucket"])


def encryption(s: Stack) -> None:
    s.client("s3").put_bucket_encryption(Bucket=s.ids["bucket"], ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})


def versioning(s: Stack) -> None:
    s.client("s3").put_bucket_versioning(Bucket=s.ids["bucket"],
                                         VersioningConfiguration={"Status": "Enabled"})


def log_group(s: Stack) -> None:
    logs = s.client("logs")
    for action in ("start", "stop", "done"):
        name = f"/aws/lambda/{s.sweep}-{action}"
        logs.create_log_group(logGroupName=name)
        logs.put_retention_policy(logGroupName=name, retentionInDays=14)
        arn = logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"][0]["arn"].removesuffix(":*")
        logs.tag_resource(resourceArn=arn, tags={"managed-by": "spotbench"})
        logs.list_tags_for_resource(resourceArn=arn)


def log_group_delete(s: Stack) -> None:
    for action in ("start", "stop", "done"):
        s.client("logs").delete_log_group(logGroupName=f"/aws/lambda/{s.sweep}-{action}")


def layer(s: Stack) -> None:
    answer = s.client("lambda").publish_layer_version(
        LayerName=f"{s.sweep}-deps", Content={"ZipFile": _zip()}, CompatibleRuntimes=["python3.12"])
    s.ids["layer"] = answer["Version"]
    s.client("lambda").get_layer_version(LayerName=f"{s.sweep}-deps", VersionNumber=s.ids["layer"])


def layer_delete(s: Stack) -> None:
    s.client("lambda").delete_layer_version(LayerName=f"{s.sweep}-deps",
                                            VersionNumber=s.ids["layer"])


def function(s: Stack) -> None:
    lam = s.client("lambda")
    for action in ("start", "stop", "done"):
        name = f"{s.sweep}-{action}"
        arn = lam.create_function(
            FunctionName=name, Runtime="python3.12", Role=s.role_arn("lambda"),
            Handler="functions.lambda_handler.handler", Code={"ZipFile": _zip()},
            Timeout=300, MemorySize=512, Tags={"managed-by": "spotbench"},
            Environment={"Variables": {"SPOTBENCH_ACTION": action}})["FunctionArn"]
        s.ids[f"fn-{action}"] = arn
        lam.get_function(FunctionName=name)
        lam.get_function_configuration(FunctionName=name)
        lam.get_function_code_signing_config(FunctionName=name)
        lam.list_versions_by_function(FunctionName=name)
        lam.list_tags(Resource=arn)
        lam.tag_resource(Resource=arn, Tags={"spotbench-sweep": s.sweep})
        lam.update_function_code(FunctionName=name, ZipFile=_zip())
        lam.update_function_configuration(FunctionName=name, Role=s.role_arn("lambda"), Timeout=300)


def function_delete(s: Stack) -> None:
    for action in ("start", "stop", "done"):
        s.client("lambda").delete_function(FunctionName=f"{s.sweep}-{action}")


def function_url(s: Stack) -> None:
    lam = s.client("lambda")
    name = f"{s.sweep}-done"
    lam.create_function_url_config(FunctionName=name, AuthType="AWS_IAM")
    lam.get_function_url_config(FunctionName=name)
    lam.update_function_url_config(FunctionName=name, AuthType="AWS_IAM")


def function_url_delete(s: Stack) -> None:
    s.client("lambda").delete_function_url_config(FunctionName=f"{s.sweep}-done")


def queue(s: Stack) -> None:
    """The sweep's failed-invocations queue (infra/aws/failures.py): created with its
    attributes and tags, read back, its attributes and tags updated in place."""
    sqs = s.client("sqs")
    url = sqs.create_queue(QueueName=f"{s.sweep}-failed-invocations",
                           Attributes={"MessageRetentionPeriod": "1209600",
                                       "SqsManagedSseEnabled": "true"},
                           tags={"managed-by": "spotbench"})["QueueUrl"]
    s.ids["queue"] = url
    s.ids["queue-arn"] = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["All"])["Attributes"]["QueueArn"]
    sqs.list_queue_tags(QueueUrl=url)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "1209600"})
    sqs.tag_queue(QueueUrl=url, Tags={"team": "x"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["team"])


def queue_delete(s: Stack) -> None:
    s.client("sqs").delete_queue(QueueUrl=s.ids["queue"])


def invoke_config(s: Stack) -> None:
    """start/stop: Lambda's retries of an asynchronous invocation, then the queue."""
    lam = s.client("lambda")
    for action in ("start", "stop"):
        kw = dict(FunctionName=f"{s.sweep}-{action}", MaximumRetryAttempts=2,
                  MaximumEventAgeInSeconds=900,
                  DestinationConfig={"OnFailure": {"Destination": s.ids["queue-arn"]}})
        lam.put_function_event_invoke_config(**kw)
        lam.get_function_event_invoke_config(FunctionName=f"{s.sweep}-{action}")
        lam.update_function_event_invoke_config(**kw)


def invoke_config_delete(s: Stack) -> None:
    for action in ("start", "stop"):
        s.client("lambda").delete_function_event_invoke_config(FunctionName=f"{s.sweep}-{action}")


def schedule(s: Stack) -> None:
    sched = s.client("scheduler")
    for action in ("start", "stop"):
        target = {"Arn": s.ids[f"fn-{action}"], "RoleArn": s.role_arn("scheduler"),
                  "Input": json.dumps({"action": action}),
                  "RetryPolicy": {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 600},
                  "DeadLetterConfig": {"Arn": s.ids["queue-arn"]}}
        kw = dict(Name=f"{s.sweep}-{action}", ScheduleExpression="cron(0 3 * * ? *)",
                  FlexibleTimeWindow={"Mode": "OFF"}, Target=target)
        sched.create_schedule(**kw)
        sched.get_schedule(Name=f"{s.sweep}-{action}")
        sched.update_schedule(**kw)


def schedule_delete(s: Stack) -> None:
    for action in ("start", "stop"):
        s.client("scheduler").delete_schedule(Name=f"{s.sweep}-{action}")


def repository(s: Stack) -> None:
    ecr = s.client("ecr")
    arn = ecr.create_repository(repositoryName=f"spotbench-{s.sweep}/mpi")["repository"]["repositoryArn"]
    ecr.describe_repositories(repositoryNames=[f"spotbench-{s.sweep}/mpi"])
    ecr.tag_resource(resourceArn=arn, tags=[{"Key": "managed-by", "Value": "spotbench"}])
    ecr.list_tags_for_resource(resourceArn=arn)


def repository_delete(s: Stack) -> None:
    s.client("ecr").delete_repository(repositoryName=f"spotbench-{s.sweep}/mpi")


def key_parameter(s: Stack) -> None:
    """A group's ssh key SecureString (aws/ssm key): created, read back with its tags, and
    retagged as a later `pulumi up` that changes the sweep's labels does."""
    ssm, name = s.client("ssm"), f"/spotbench/{s.sweep}/{s.group}/id_ed25519"
    ssm.put_parameter(Name=name, Value="a2V5", Type="SecureString", Tier="Standard",
                      Tags=[{"Key": "managed-by", "Value": "spotbench"}])
    ssm.get_parameter(Name=name, WithDecryption=True)
    ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Option": "Equals",
                                               "Values": [name]}])
    ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)
    ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId=name,
                             Tags=[{"Key": "team", "Value": "bench"}])
    ssm.remove_tags_from_resource(ResourceType="Parameter", ResourceId=name, TagKeys=["team"])


def key_parameter_delete(s: Stack) -> None:
    s.client("ssm").delete_parameter(Name=f"/spotbench/{s.sweep}/{s.group}/id_ed25519")


def _nothing(s: Stack) -> None:
    pass


# in creation order (destroy runs the second functions in reverse)
RESOURCE_CALLS: dict[str, tuple[Callable[[Stack], None], Callable[[Stack], None]]] = {
    "aws:ec2/vpc:Vpc": (vpc, vpc_delete),
    "aws:ec2/subnet:Subnet": (subnet, subnet_delete),
    "aws:ec2/internetGateway:InternetGateway": (internet_gateway, internet_gateway_delete),
    "aws:ec2/eip:Eip": (eip, eip_delete),
    "aws:ec2/natGateway:NatGateway": (nat_gateway, nat_gateway_delete),
    "aws:ec2/routeTable:RouteTable": (route_table, route_table_delete),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": (route_table_association,
                                                            route_table_association_delete),
    "aws:ec2/vpcEndpoint:VpcEndpoint": (vpc_endpoint, vpc_endpoint_delete),
    "aws:ec2/securityGroup:SecurityGroup": (security_group, security_group_delete),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _rule("ingress"),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": _rule("egress"),
    "aws:ec2/placementGroup:PlacementGroup": (placement_group, placement_group_delete),
    "aws:iam/role:Role": (role, role_delete),
    "aws:iam/rolePolicy:RolePolicy": (role_policy, role_policy_delete),
    "aws:iam/instanceProfile:InstanceProfile": (instance_profile, instance_profile_delete),
    "aws:s3/bucket:Bucket": (bucket, bucket_delete),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": (public_access_block, _nothing),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        encryption, _nothing),
    "aws:s3/bucketVersioning:BucketVersioning": (versioning, _nothing),
    "aws:ecr/repository:Repository": (repository, repository_delete),
    "aws:ssm/parameter:Parameter": (key_parameter, key_parameter_delete),
    "aws:cloudwatch/logGroup:LogGroup": (log_group, log_group_delete),
    "aws:lambda/layerVersion:LayerVersion": (layer, layer_delete),
    "aws:lambda/function:Function": (function, function_delete),
    "aws:lambda/functionUrl:FunctionUrl": (function_url, function_url_delete),
    "aws:sqs/queue:Queue": (queue, queue_delete),
    "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig": (invoke_config,
                                                                      invoke_config_delete),
    "aws:scheduler/schedule:Schedule": (schedule, schedule_delete),
    "aws:ec2/instance:Instance": (instance, instance_delete),
    "aws:ec2/launchTemplate:LaunchTemplate": (launch_template, launch_template_delete),
}
