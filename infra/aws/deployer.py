"""What the person running `pulumi up` / `pulumi destroy` needs on AWS, per resource type.

`ACTIONS` maps each resource type the program declares to the IAM actions the provider calls
to create, read, update and delete it (AWS's Service Authorization Reference, and the calls
the Terraform-based provider makes: it reads back everything it creates and its tags).
`deployer_policy()` is the document docs/aws.md prints, plus what the deployer's own
spotbench commands call (statements ReadQuotas, RunStartNow, ReadResults); `tests/infra/test_aws_deployer.py` fails when the
program declares a type missing here, or when docs/aws.md lacks an action, and
`tests/iam/test_aws_deployer.py` runs every type's calls and those commands with exactly
this policy under IAM enforcement (and fails when any one action goes unused).
Teardown's own needs are `spotbench.clouds.aws.orphans.teardown_policy()`.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from spotbench.clouds.aws.identity import member_role_name

_EC2_READ = ["ec2:Describe*"]
ACTIONS: dict[str, list[str]] = {
    "aws:ec2/vpc:Vpc": ["ec2:CreateVpc", "ec2:DeleteVpc", "ec2:ModifyVpcAttribute"],
    "aws:ec2/subnet:Subnet": ["ec2:CreateSubnet", "ec2:DeleteSubnet",
                              "ec2:ModifySubnetAttribute"],
    "aws:ec2/internetGateway:InternetGateway": [
        "ec2:CreateInternetGateway", "ec2:AttachInternetGateway",
        "ec2:DetachInternetGateway", "ec2:DeleteInternetGateway"],
    "aws:ec2/routeTable:RouteTable": ["ec2:CreateRouteTable", "ec2:DeleteRouteTable",
                                      "ec2:CreateRoute", "ec2:DeleteRoute"],
    "aws:ec2/routeTableAssociation:RouteTableAssociation": [
        "ec2:AssociateRouteTable", "ec2:DisassociateRouteTable"],
    "aws:ec2/eip:Eip": ["ec2:AllocateAddress", "ec2:ReleaseAddress"],
    "aws:ec2/natGateway:NatGateway": ["ec2:CreateNatGateway", "ec2:DeleteNatGateway"],
    "aws:ec2/vpcEndpoint:VpcEndpoint": ["ec2:CreateVpcEndpoint", "ec2:DeleteVpcEndpoints",
                                        "ec2:ModifyVpcEndpoint"],
    "aws:ec2/securityGroup:SecurityGroup": [
        "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup",
        "ec2:RevokeSecurityGroupEgress"],  # the provider drops AWS's default egress rule
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": [
        "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": [
        "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupEgress"],
    "aws:ec2/placementGroup:PlacementGroup": ["ec2:CreatePlacementGroup",
                                              "ec2:DeletePlacementGroup"],
    # spot members too (persistent spot market options): tags on create (instance, volume)
    # and their updates; teardown cancels a member's spot request before it terminates
    "aws:ec2/instance:Instance": ["ec2:RunInstances", "ec2:TerminateInstances",
                                  "ec2:ModifyInstanceAttribute", "ec2:CreateTags",
                                  "ec2:DeleteTags", "ec2:CancelSpotInstanceRequests",
                                  "iam:PassRole"],
    # lifecycle created: per member and zone a launch template (no instances; the functions
    # launch from it: identity.fleet_policy); the provider tags it at creation
    "aws:ec2/launchTemplate:LaunchTemplate": [
        "ec2:CreateLaunchTemplate", "ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate",
        "ec2:DeleteLaunchTemplate", "ec2:CreateTags"],
    "aws:iam/role:Role": ["iam:CreateRole", "iam:DeleteRole", "iam:GetRole", "iam:TagRole",
                          "iam:ListRolePolicies", "iam:ListAttachedRolePolicies",
                          "iam:ListInstanceProfilesForRole"],
    "aws:iam/rolePolicy:RolePolicy": ["iam:PutRolePolicy", "iam:GetRolePolicy",
                                      "iam:DeleteRolePolicy"],
    "aws:iam/instanceProfile:InstanceProfile": [
        "iam:CreateInstanceProfile", "iam:DeleteInstanceProfile", "iam:GetInstanceProfile",
        "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile",
        "iam:TagInstanceProfile"],
    "aws:s3/bucket:Bucket": ["s3:CreateBucket", "s3:DeleteBucket", "s3:ListBucket",
                             "s3:GetBucket*", "s3:PutBucketTagging", "s3:GetAccelerateConfiguration",
                             "s3:GetLifecycleConfiguration", "s3:GetReplicationConfiguration",
                             "s3:GetEncryptionConfiguration"],
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": [
        "s3:PutBucketPublicAccessBlock", "s3:GetBucketPublicAccessBlock"],
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": [
        "s3:PutEncryptionConfiguration"],
    "aws:s3/bucketVersioning:BucketVersioning": ["s3:PutBucketVersioning"],
    "aws:cloudwatch/logGroup:LogGroup": ["logs:CreateLogGroup", "logs:DeleteLogGroup",
                                         "logs:PutRetentionPolicy", "logs:DescribeLogGroups",
                                         "logs:TagResource", "logs:ListTagsForResource"],
    "aws:lambda/function:Function": [
        "lambda:CreateFunction", "lambda:DeleteFunction", "lambda:GetFunction",
        "lambda:GetFunctionConfiguration", "lambda:UpdateFunctionCode",
        "lambda:UpdateFunctionConfiguration", "lambda:ListVersionsByFunction",
        "lambda:GetFunctionCodeSigningConfig", "lambda:TagResource", "lambda:ListTags",
        "iam:PassRole"],
    "aws:lambda/functionUrl:FunctionUrl": [
        "lambda:CreateFunctionUrlConfig", "lambda:GetFunctionUrlConfig",
        "lambda:UpdateFunctionUrlConfig", "lambda:DeleteFunctionUrlConfig"],
    # where failed asynchronous start/stop invocations go (infra/aws/failures.py)
    "aws:sqs/queue:Queue": ["sqs:CreateQueue", "sqs:DeleteQueue", "sqs:GetQueueAttributes",
                            "sqs:SetQueueAttributes", "sqs:ListQueueTags", "sqs:TagQueue",
                            "sqs:UntagQueue"],
    "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig": [
        "lambda:PutFunctionEventInvokeConfig", "lambda:GetFunctionEventInvokeConfig",
        "lambda:UpdateFunctionEventInvokeConfig", "lambda:DeleteFunctionEventInvokeConfig"],
    "aws:lambda/layerVersion:LayerVersion": ["lambda:PublishLayerVersion",
                                             "lambda:GetLayerVersion",
                                             "lambda:DeleteLayerVersion"],
    "aws:scheduler/schedule:Schedule": ["scheduler:CreateSchedule", "scheduler:GetSchedule",
                                        "scheduler:UpdateSchedule", "scheduler:DeleteSchedule",
                                        "iam:PassRole"],
    # the sweep's key seed and container envs as SecureStrings (AWS-managed aws/ssm key: no kms grant)
    "aws:ssm/parameter:Parameter": ["ssm:PutParameter", "ssm:DeleteParameter",
                                    "ssm:GetParameter", "ssm:DescribeParameters",
                                    "ssm:AddTagsToResource", "ssm:ListTagsForResource",
                                    "ssm:RemoveTagsFromResource"],
    "aws:ecr/repository:Repository": ["ecr:CreateRepository", "ecr:DeleteRepository",
                                      "ecr:DescribeRepositories", "ecr:TagResource",
                                      "ecr:ListTagsForResource"],
}
# data sources and the provider itself (sts:GetCallerIdentity needs no permission)
READS = [*_EC2_READ, "ssm:GetParameter"]


def passable_roles(sweep: str, region: str = "*") -> list[str]:
    """ARNs of the roles the stack hands to services: exactly the sweep's own, its functions'
    and schedules' and its member role (`<sweep>-<region>-member`, one per sweep; the grant
    role is assumed by the functions, never passed); a pattern `role/<sweep>-*` also
    matches sweep `<sweep>-gpu`'s roles. Any region: `<sweep>-??-*-?-member` (regions are
    `xx-name-N`), which `<sweep>-gpu-…` does not match."""
    member = member_role_name(sweep, region) if region != "*" else f"{sweep}-??-*-?-member"
    names = [f"{sweep}-lambda", f"{sweep}-scheduler", member]
    return [f"arn:aws:iam::*:role/{n}" for n in names]


def deployer_policy(sweep: str = "*", region: str = "*") -> dict[str, Any]:
    """One policy document for `pulumi up` and `pulumi destroy` of sweep `sweep` (`*`: any)
    and the deployer's spotbench commands (preflight, schedule, status, teardown).
    iam:PassRole is limited to the sweep's roles, handed to their services; invoking to the
    sweep's start function; reading objects to the sweep's results prefix."""
    wanted = {a for acts in [*ACTIONS.values(), READS] for a in acts} - {"iam:PassRole"}
    wildcards = [a for a in wanted if "*" in a]  # an action one of them covers is not repeated
    actions = sorted(a for a in wanted
                     if not any(w != a and fnmatch.fnmatchcase(a, w) for w in wildcards))
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Deploy", "Effect": "Allow", "Action": actions, "Resource": "*"},
        {"Sid": "PassSweepRoles", "Effect": "Allow", "Action": "iam:PassRole",
         "Resource": passable_roles(sweep, region),
         "Condition": {"StringEquals": {"iam:PassedToService": [
             "ec2.amazonaws.com", "lambda.amazonaws.com", "scheduler.amazonaws.com"]}}},
        # the deployer's own spotbench commands: `preflight` reads the EC2 vCPU quotas, the
        # IAM account summary (room for the sweep's roles) and, for a created spot sweep,
        # whether the Spot service-linked role exists (roles under its path),
        # `schedule run-now` invokes the start function, `status`/`report` read results
        {"Sid": "ReadQuotas", "Effect": "Allow",
         "Action": ["servicequotas:GetServiceQuota", "iam:GetAccountSummary", "iam:ListRoles"],
         "Resource": "*"},
        {"Sid": "RunStartNow", "Effect": "Allow", "Action": "lambda:InvokeFunction",
         "Resource": f"arn:aws:lambda:*:*:function:{sweep}-start"},
        {"Sid": "ReadResults", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::*/{sweep}/*"},
    ]}
