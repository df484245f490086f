"""Who may do what: three roles, each allowed only its part.

- instance role (members' instance profile): put objects under the sweep's results prefix,
  pull the workload image from ECR, invoke the `done` function through its URL only
  (`lambda:InvokedViaFunctionUrl`, `lambda:FunctionUrlAuthType = AWS_IAM`) — nothing else.
- scheduler role (EventBridge Scheduler): invoke `start` and `stop` only.
- Lambda role: `ec2:StartInstances`/`StopInstances` only on instances tagged
  `managed-by=spotbench` and this sweep (`aws:ResourceTag/...`), `ec2:DescribeInstances`
  (EC2 does not support resource conditions on Describe*), its functions' log groups (by
  name: the program declares them), read/write under the sweep's results prefix (the run
  ledger), and delete only its control lock (`control.lock`, spotbench.lease) and launch
  markers.

Members also read the run ledger (`runs/*/run.json`) and list `runs/`: a workload finds
its run at boot and numbers its attempt from what is stored.

The policy documents are plain functions (`*_policy`) so tests can read them; the grants
that need function ARNs are made by `grant()` once the functions exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.aws.functions import ACTIONS as FUNCTION_ACTIONS
from infra.aws.functions import log_group_name
from spotbench.plan import MANAGED_BY, SWEEP_LABEL

Doc = dict[str, Any]


def _doc(*statements: Doc) -> Doc:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def assume_role(service: str) -> Doc:
    return _doc({"Effect": "Allow", "Principal": {"Service": service},
                 "Action": "sts:AssumeRole"})


def prefix_arns(bucket: str, prefix: str) -> tuple[str, str]:
    """(bucket ARN, ARN of every object under the prefix)."""
    base = f"arn:aws:s3:::{bucket}"
    return base, f"{base}/{prefix}/*" if prefix else f"{base}/*"


def ecr_repository_arn(image: str | None) -> str:
    """The ECR repository of `image` (`ACCT.dkr.ecr.REGION.amazonaws.com/repo:tag`), or
    every repository when the image is elsewhere (public registries need no grant)."""
    if image and ".dkr.ecr." in image.split("/", 1)[0]:
        host, _, rest = image.partition("/")
        account, region = host.split(".")[0], host.split(".")[3]
        path = rest.split("@")[0]
        head, _, last = path.rpartition("/")
        repo = (head + "/" if head else "") + last.split(":")[0]
        return f"arn:aws:ecr:{region}:{account}:repository/{repo}"
    return "arn:aws:ecr:*:*:repository/*"


def _under(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if prefix else path


def instance_policy(bucket: str, prefix: str, done_arn: str, image: str | None,
                    checkpoints: bool = False) -> Doc:
    """`checkpoints`: members keep checkpoints (`checkpoints/<group>/<run>/`): they list,
    read and delete them there too (`workloads/tf_mnist/checkpoints.py`)."""
    bucket_arn, objects = prefix_arns(bucket, prefix)
    runs = _under(prefix, "runs")
    ckpt = _under(prefix, "checkpoints")
    kept = [
        {"Sid": "Checkpoints", "Effect": "Allow", "Action": ["s3:GetObject", "s3:DeleteObject"],
         "Resource": f"{bucket_arn}/{ckpt}/*"},
        {"Sid": "ListCheckpoints", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": bucket_arn, "Condition": {"StringLike": {"s3:prefix": f"{ckpt}/*"}}},
    ] if checkpoints else []
    return _doc(
        *kept,
        {"Sid": "PutResults", "Effect": "Allow",
         "Action": ["s3:PutObject", "s3:AbortMultipartUpload"], "Resource": objects},
        # the workload finds its run in the ledger at boot, and lists its run's attempts
        {"Sid": "ReadLedger", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{bucket_arn}/{runs}/*/run.json"},
        {"Sid": "ListRuns", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{runs}/", f"{runs}/*"]}}},
        {"Sid": "EcrToken", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken",
         "Resource": "*"},
        {"Sid": "PullImage", "Effect": "Allow",
         "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability"],
         "Resource": ecr_repository_arn(image)},
        {"Sid": "CallDone", "Effect": "Allow", "Action": "lambda:InvokeFunctionUrl",
         "Resource": done_arn,
         "Condition": {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}},
        # Since Oct 2025 a function-URL call also needs lambda:InvokeFunction; only through
        # the URL: a direct Invoke could hand `done` a forged function-URL event naming
        # another group's instance (the URL is what verifies the SigV4 signer).
        # Session Manager, for ops access (`spotbench ssh/exec/collect --via ssm`): AWS's
        # minimum for the SSM agent to register and carry sessions (the session part of
        # AmazonSSMManagedInstanceCore); these actions take no resource ARN
        {"Sid": "SsmSessions", "Effect": "Allow",
         "Action": ["ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel",
                    "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
                    "ssmmessages:OpenDataChannel"],
         "Resource": "*"},
        {"Sid": "CallDoneInvoke", "Effect": "Allow", "Action": "lambda:InvokeFunction",
         "Resource": done_arn,
         "Condition": {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}}},
    )


def scheduler_policy(start_arn: str, stop_arn: str) -> Doc:
    return _doc({"Sid": "InvokeStartStop", "Effect": "Allow", "Action": "lambda:InvokeFunction",
                 "Resource": [start_arn, stop_arn]})


def lambda_policy(sweep: str, bucket: str, prefix: str) -> Doc:
    bucket_arn, objects = prefix_arns(bucket, prefix)
    tag_condition = {"StringEquals": {
        **{f"aws:ResourceTag/{k}": v for k, v in MANAGED_BY.items()},
        f"aws:ResourceTag/{SWEEP_LABEL}": sweep,
    }}
    return _doc(
        {"Sid": "StartStopSweepInstances", "Effect": "Allow",
         "Action": ["ec2:StartInstances", "ec2:StopInstances"],
         "Resource": "arn:aws:ec2:*:*:instance/*", "Condition": tag_condition},
        {"Sid": "DescribeInstances", "Effect": "Allow", "Action": "ec2:DescribeInstances",
         "Resource": "*"},
        {"Sid": "RunLedger", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject"], "Resource": objects},
        # the only objects the functions delete: the control lock they release (conditional
        # writes need no other action: If-None-Match / If-Match ride on PutObject) and a
        # launch marker of a start the cloud could not run (`ResultStore.forget_launch`)
        {"Sid": "ControlLock", "Effect": "Allow", "Action": "s3:DeleteObject",
         "Resource": [f"{bucket_arn}/{_under(prefix, 'control.lock')}",
                      f"{bucket_arn}/{_under(prefix, 'runs/*/launches/*')}"]},
        {"Sid": "ListResults", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"] if prefix else ["*"]}}},
        # exactly its functions' log groups (declared with their retention, so no
        # CreateLogGroup): `/aws/lambda/{sweep}-*` would match sweep `{sweep}-gpu`'s too
        {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": [f"arn:aws:logs:*:*:log-group:{log_group_name(sweep, a)}:*"
                      for a in FUNCTION_ACTIONS]},
    )


def instance_role_name(sweep: str) -> str:
    return f"{sweep}-instance"


def _json(doc_fn, *args: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.all(*args).apply(lambda v: json.dumps(doc_fn(*v)))


@dataclass
class AwsIdentitiesArgs:
    sweep: str
    results_bucket: pulumi.Input[str]
    prefix: str
    image: pulumi.Input[str]
    tags: dict[str, str]
    checkpoints: bool = False  # members keep checkpoints (instance_policy)


class AwsIdentities(pulumi.ComponentResource):
    def __init__(self, name: str, args: AwsIdentitiesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Identities", name, None, opts)
        self._args, self._base = args, name
        child = pulumi.ResourceOptions(parent=self)
        sweep, tags = args.sweep, args.tags

        def role(suffix: str, service: str, what: str) -> aws.iam.Role:
            return aws.iam.Role(f"{name}-{suffix}", name=f"{sweep}-{suffix}",
                                description=f"spotbench {sweep}: {what}",
                                assume_role_policy=json.dumps(assume_role(service)),
                                tags=tags, opts=child)

        self.instance_role = role("instance", "ec2.amazonaws.com", "sweep members")
        self.lambda_role = role("lambda", "lambda.amazonaws.com", "start/stop/done functions")
        self.scheduler_role = role("scheduler", "scheduler.amazonaws.com", "start/stop schedules")
        self.instance_profile = aws.iam.InstanceProfile(
            f"{name}-instance", name=f"{sweep}-instance", role=self.instance_role.name,
            tags=tags, opts=child,
        )
        self.lambda_policy = aws.iam.RolePolicy(
            f"{name}-lambda", role=self.lambda_role.id, name="spotbench-lambda",
            policy=_json(lambda b: lambda_policy(sweep, b, args.prefix), args.results_bucket),
            opts=child,
        )

    def grant(self, *, done_arn: pulumi.Input[str], start_arn: pulumi.Input[str],
              stop_arn: pulumi.Input[str]) -> None:
        """The grants that name the functions (made once they exist)."""
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        self.instance_policy = aws.iam.RolePolicy(
            f"{self._base}-instance", role=self.instance_role.id, name="spotbench-instance",
            policy=_json(lambda b, d, i: instance_policy(b, args.prefix, d, i, args.checkpoints),
                         args.results_bucket, done_arn, args.image),
            opts=child,
        )
        self.scheduler_policy = aws.iam.RolePolicy(
            f"{self._base}-scheduler", role=self.scheduler_role.id, name="spotbench-scheduler",
            policy=_json(scheduler_policy, start_arn, stop_arn), opts=child,
        )
        self.register_outputs({
            "instance_role": self.instance_role.arn, "lambda_role": self.lambda_role.arn,
            "scheduler_role": self.scheduler_role.arn,
        })
