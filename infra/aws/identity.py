"""Who may do what: a role per run group for its members, and two roles for the functions.

- member roles (one per run group, each with its instance profile, `member_role_name`): put
  objects only under that group's own names (`runs/<run>/<group>.<n>.jsonl` and
  `runs/<run>/<group>.<n>/…`, see `group_objects`), read the run ledger, pull the workload
  image from ECR, invoke the `done` function through its URL only
  (`lambda:InvokedViaFunctionUrl`, `lambda:FunctionUrlAuthType = AWS_IAM`), and register
  with Session Manager — nothing else. A VM of one group cannot write, or overwrite,
  another group's results; `done` checks that the caller's role is its instance's group's.
- scheduler role (EventBridge Scheduler): invoke `start` and `stop` only, and send an
  event it could not deliver to the sweep's failed-invocations queue (its dead-letter queue).
- Lambda role: `ec2:StartInstances`/`StopInstances` only on instances tagged
  `managed-by=spotbench` and this sweep (`aws:ResourceTag/...`), `ec2:DescribeInstances`
  (EC2 does not support resource conditions on Describe*), its functions' log groups (by
  name: the program declares them), read/write under the sweep's results prefix (the run
  ledger), and delete only its control lock (`control.lock`, spotbench.lease) and launch
  markers; and (`spotbench-lambda-failures`) send a failed asynchronous invocation to the
  sweep's failed-invocations queue (Lambda's on-failure destination, infra/aws/failures.py).

Members also read the run ledger (`runs/*/run.json`) and list `runs/`: a workload finds
its run at boot and numbers its attempt from what is stored.

The policy documents are plain functions (`*_policy`) so tests can read them; the grants
that need function ARNs are made by `grant()` once the functions exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.aws.failures import failure_policy
from infra.aws.functions import ACTIONS as FUNCTION_ACTIONS
from infra.aws.functions import log_group_name
from spotbench.auth.aws import member_role_name
from spotbench.plan import MANAGED_BY, SWEEP_LABEL
from spotbench.results import run_id_lengths

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


def group_objects(bucket: str, prefix: str, group: str, checkpoints: bool = False) -> list[str]:
    """ARNs of the objects run group `group` stores: `runs/<run>/<group>.<n>.jsonl` and
    `runs/<run>/<group>.<n>/<name>` (spotbench/results.py), its checkpoints
    (`checkpoints/<group>/…`) when it keeps them, and no other group's.

    In an IAM resource `*` matches any characters, `/` included, so `runs/*/<group>.*`
    would also match `runs/<run>/<other>.1/<group>.x` or `runs/<run>/flags/<group>.1.json`.
    The run segment is matched by its length instead (`?` is exactly one character; a run
    id has one of `run_id_lengths()`), and `<group>.` (group ids hold no `.`) ends the
    group's name: `…-t1.` is not a prefix of `…-t10.`.
    """
    runs = _under(prefix, "runs")
    out = [f"arn:aws:s3:::{bucket}/{runs}/{'?' * n}/{group}.*" for n in run_id_lengths()]
    if checkpoints:
        out.append(f"arn:aws:s3:::{bucket}/{_under(prefix, 'checkpoints')}/{group}/*")
    return out


def member_policy(bucket: str, prefix: str, group: str, done_arn: str, image: str | None,
                  checkpoints: bool = False, keys: str | None = None) -> Doc:
    """What the members of run group `group` may do (its role's only policy).

    `checkpoints`: members keep checkpoints (`checkpoints/<group>/<run>/`): they list, read
    and delete their group's there too (`workloads/tf_mnist/checkpoints.py`).
    `keys`: the ARN pattern of the group's ssh key parameters (infra/aws/secrets.py), which
    its members read at boot — and no other group's."""
    bucket_arn, _ = prefix_arns(bucket, prefix)
    runs = _under(prefix, "runs")
    ckpt = f"{_under(prefix, 'checkpoints')}/{group}"
    kept = [
        {"Sid": "Checkpoints", "Effect": "Allow", "Action": ["s3:GetObject", "s3:DeleteObject"],
         "Resource": f"{bucket_arn}/{ckpt}/*"},
        {"Sid": "ListCheckpoints", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": bucket_arn, "Condition": {"StringLike": {"s3:prefix": f"{ckpt}/*"}}},
    ] if checkpoints else []
    return _doc(
        *kept,
        {"Sid": "PutResults", "Effect": "Allow",
         "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Resource": group_objects(bucket, prefix, group, checkpoints)},
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
        # SecureStrings under the account's AWS-managed aws/ssm key: GetParameter
        # WithDecryption needs no kms:Decrypt grant of the caller
        *([{"Sid": "ReadGroupKeys", "Effect": "Allow", "Action": "ssm:GetParameter",
            "Resource": keys}] if keys else []),
    )


def scheduler_policy(start_arn: str, stop_arn: str, dead_letter_arn: str | None = None) -> Doc:
    """Invoke start/stop; send an event it could not deliver to the sweep's queue (the
    scheduler's dead-letter queue is written with the schedule's execution role)."""
    statements: list[Doc] = [{"Sid": "InvokeStartStop", "Effect": "Allow",
                              "Action": "lambda:InvokeFunction", "Resource": [start_arn, stop_arn]}]
    if dead_letter_arn:
        statements.append({"Sid": "DeadLetters", "Effect": "Allow", "Action": "sqs:SendMessage",
                           "Resource": dead_letter_arn})
    return _doc(*statements)


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


def _json(doc_fn, *args: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.all(*args).apply(lambda v: json.dumps(doc_fn(*v)))


@dataclass
class AwsIdentitiesArgs:
    sweep: str
    results_bucket: pulumi.Input[str]
    prefix: str
    image: pulumi.Input[str]
    tags: dict[str, str]
    checkpoints: bool = False  # members keep checkpoints (member_policy)
    groups: list[str] = field(default_factory=list)  # run group ids: a member role each
    # where each group's ssh key parameters are (`secrets.keys_arn`), when members have keys
    keys: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)


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

        self.lambda_role = role("lambda", "lambda.amazonaws.com", "start/stop/done functions")
        self.scheduler_role = role("scheduler", "scheduler.amazonaws.com", "start/stop schedules")
        # group id → its members' role and instance profile (same name)
        self.member_roles: dict[str, aws.iam.Role] = {}
        self.instance_profiles: dict[str, aws.iam.InstanceProfile] = {}
        for gid in args.groups:
            named = member_role_name(gid)
            self.member_roles[gid] = aws.iam.Role(
                f"{name}-{gid}-member", name=named,
                description=f"spotbench {sweep}: members of group {gid}",
                assume_role_policy=json.dumps(assume_role("ec2.amazonaws.com")),
                tags=tags, opts=child)
            self.instance_profiles[gid] = aws.iam.InstanceProfile(
                f"{name}-{gid}-member", name=named, role=self.member_roles[gid].name,
                tags=tags, opts=child)
        self.lambda_policy = aws.iam.RolePolicy(
            f"{name}-lambda", role=self.lambda_role.id, name="spotbench-lambda",
            policy=_json(lambda b: lambda_policy(sweep, b, args.prefix), args.results_bucket),
            opts=child,
        )

    def grant(self, *, done_arn: pulumi.Input[str], start_arn: pulumi.Input[str],
              stop_arn: pulumi.Input[str], failures_arn: pulumi.Input[str] | None = None) -> None:
        """The grants that name the functions (made once they exist) and the queue their
        failed asynchronous invocations go to (infra/aws/failures.py)."""
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        self.member_policies = {
            gid: aws.iam.RolePolicy(
                f"{self._base}-{gid}-member", role=role.id, name="spotbench-member",
                policy=_json(lambda b, d, i, k, gid=gid: member_policy(
                                 b, args.prefix, gid, d, i, args.checkpoints, k or None),
                             args.results_bucket, done_arn, args.image, args.keys.get(gid, "")),
                opts=child,
            )
            for gid, role in self.member_roles.items()
        }
        self.scheduler_policy = aws.iam.RolePolicy(
            f"{self._base}-scheduler", role=self.scheduler_role.id, name="spotbench-scheduler",
            policy=_json(scheduler_policy, start_arn, stop_arn, *([failures_arn] if failures_arn else [])),
            opts=child,
        )
        self.failure_policy = None
        if failures_arn is not None:
            self.failure_policy = aws.iam.RolePolicy(
                f"{self._base}-lambda-failures", role=self.lambda_role.id,
                name="spotbench-lambda-failures", policy=_json(failure_policy, failures_arn),
                opts=child,
            )
        self.register_outputs({
            "member_roles": {gid: r.arn for gid, r in self.member_roles.items()},
            "lambda_role": self.lambda_role.arn, "scheduler_role": self.scheduler_role.arn,
        })
