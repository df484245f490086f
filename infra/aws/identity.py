"""Who may do what: one member role for the sweep, a grant role, and the functions' roles.

Identities per sweep, isolation by instance, authorization by the functions (issue #29,
docs/identity.md): the IAM objects are the same five whatever the group count.

- member role (one per sweep, with its instance profile, `member_role_name`: the region is
  in the name, IAM names being account-wide): read the run ledger and list `runs/`, pull the
  workload image from ECR, call the `done` function through its URL only
  (`lambda:InvokedViaFunctionUrl`, `lambda:FunctionUrlAuthType = AWS_IAM`) — `done`, `grant`
  and `keys` are paths of that URL — and register with Session Manager. It writes nothing:
  a member writes its group's results with the grant the function mints for it.
- grant role (one per sweep, `grant_role_name`): assumed by the functions only, with a
  session policy naming one group's objects (`spotbench.clouds.aws.grants.session_policy`);
  its own policy is the ceiling (put under `runs/`, the group's checkpoints, read the
  ledger), the session policy the group's share of it (AWS intersects the two).
- scheduler role (EventBridge Scheduler): invoke `start` and `stop` only, and send an
  event it could not deliver to the sweep's failed-invocations queue (its dead-letter queue).
- Lambda role: `ec2:StartInstances`/`StopInstances` only on instances tagged
  `managed-by=spotbench` and this sweep (`aws:ResourceTag/...`), `ec2:DescribeInstances`
  (EC2 does not support resource conditions on Describe*; it maps a caller's instance to its
  group), its functions' log groups (by name: the program declares them), read/write under
  the sweep's results prefix (the run ledger), delete only its control lock
  (`control.lock`, spotbench.lease) and launch markers, assume the grant role, read the
  sweep's parameter path (the one seed every group's ssh keys derive from, a container's env:
  derived or read for a group's own instances only); and
  (`spotbench-lambda-failures`) send a failed asynchronous invocation to the sweep's
  failed-invocations queue (Lambda's on-failure destination, infra/aws/failures.py).

With `lifecycle: created` the Lambda role also gets `fleet_policy` (`spotbench-lambda-fleet`):
make the group's instances with an instant EC2 Fleet from the sweep's own launch templates
(tagged `spotbench-sweep`), in the sweep's subnets and security groups, tagging what it
makes with the sweep's tag (and only at creation: `ec2:CreateAction`), passing the member
role only, and terminate the sweep's instances (docs/aws.md, "Instances made at start").

The policy documents are plain functions (`*_policy`) so tests can read them; the grants
that need function ARNs are made by `grant()` once the functions exist.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.aws.failures import failure_policy
from infra.aws.functions import ACTIONS as FUNCTION_ACTIONS
from infra.aws.functions import log_group_name
from spotbench.clouds.aws.identity import grant_role_name, member_role_name
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


def member_policy(bucket: str, prefix: str, done_arn: str, image: str | None) -> Doc:
    """What every member of the sweep may do with its instance role (the role's only policy):
    nothing that tells one group from another. Writes go through the group's grant."""
    bucket_arn, _ = prefix_arns(bucket, prefix)
    runs = _under(prefix, "runs")
    return _doc(
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


def grant_trust(lambda_role_arn: str) -> Doc:
    """Only the functions' role may assume the grant role."""
    return _doc({"Effect": "Allow", "Principal": {"AWS": lambda_role_arn},
                 "Action": "sts:AssumeRole"})


def grant_policy(bucket: str, prefix: str, checkpoints: bool = False) -> Doc:
    """The ceiling of every group's grant: put under the sweep's `runs/`, list it (the store
    numbers its attempt from the listing) and read the ledger's `run.json`, and, when the sweep keeps checkpoints,
    read, write, delete and list under `checkpoints/`. Each grant's session policy
    (`spotbench.clouds.aws.grants.session_policy`) narrows it to one group's objects."""
    bucket_arn, _ = prefix_arns(bucket, prefix)
    runs = _under(prefix, "runs")
    ckpt = _under(prefix, "checkpoints")
    kept = [
        {"Sid": "Checkpoints", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
         "Resource": f"{bucket_arn}/{ckpt}/*"},
        {"Sid": "ListCheckpoints", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": bucket_arn, "Condition": {"StringLike": {"s3:prefix": f"{ckpt}/*"}}},
    ] if checkpoints else []
    return _doc(
        *kept,
        {"Sid": "PutResults", "Effect": "Allow",
         "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Resource": f"{bucket_arn}/{runs}/*"},
        # the group's store finds its run in the ledger (`current_run` reads `run.json`)
        {"Sid": "ReadLedger", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{bucket_arn}/{runs}/*/run.json"},
        {"Sid": "ListRuns", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [f"{runs}/", f"{runs}/*"]}}},
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


def lambda_policy(sweep: str, bucket: str, prefix: str, grant_role: str | None = None,
                  keys: str | None = None) -> Doc:
    """`grant_role`: the grant role's ARN (mint a group's storage grant); `keys`: the ARN
    pattern of the sweep's parameter path (`secrets.keys_arn`), when its groups have keys."""
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
        *([{"Sid": "MintGrants", "Effect": "Allow", "Action": "sts:AssumeRole",
            "Resource": grant_role}] if grant_role else []),
        # SecureStrings under the account's AWS-managed aws/ssm key: GetParameter
        # WithDecryption needs no kms:Decrypt grant of the caller
        *([{"Sid": "ReadGroupKeys", "Effect": "Allow", "Action": "ssm:GetParameter",
            "Resource": keys}] if keys else []),
    )


def fleet_policy(sweep: str, regions: str | Sequence[str], member_role_arn: str) -> Doc:
    """What the start/stop functions need to make and delete a group's instances in the
    created lifecycle, scoped to the sweep: an instant EC2 Fleet is one synchronous request
    that launches with the *caller's* permissions (no service-linked role: EC2 Fleet
    prerequisites), and both `ec2:CreateFleet` and `ec2:RunInstances` are evaluated on every
    resource the launch names (a denied instant fleet's CloudTrail names `ec2:CreateFleet`
    on `launch-template/*`; AWS's Karpenter policy grants the two together on each launch
    resource: docs/platform.md, "Instant fleet authorization"). `regions`: the candidate
    regions (`SweepSpec.candidate_regions`): each ARN names one of them, no other region's
    resources are covered (IAM is global, EC2's ARNs are regional).

    The Spot service-linked role (AWSServiceRoleForEC2Spot) is not the function's to make:
    `spotbench preflight` names it when the account lacks it, with the command that creates
    it once (`spotbench.clouds.aws.preflight.spot_role`); the role gets no IAM write."""
    names = [regions] if isinstance(regions, str) else list(dict.fromkeys(regions))

    def arns(*kinds: str) -> list[str] | str:
        out = [f"arn:aws:ec2:{r}:*:{kind}/*" for kind in kinds for r in names]
        return out[0] if len(out) == 1 else out

    images = [f"arn:aws:ec2:{r}::image/*" for r in names]
    sweep_tag = {f"aws:ResourceTag/{SWEEP_LABEL}": sweep}
    new_tag = {f"aws:RequestTag/{SWEEP_LABEL}": sweep}
    launch = ["ec2:CreateFleet", "ec2:RunInstances"]
    return _doc(
        # the fleet itself (the driver tags it with the group's labels)
        {"Sid": "CreateSweepFleet", "Effect": "Allow", "Action": "ec2:CreateFleet",
         "Resource": arns("fleet"), "Condition": {"StringEquals": new_tag}},
        # from the sweep's launch templates only (another sweep's are tagged otherwise)
        {"Sid": "SweepTemplates", "Effect": "Allow", "Action": launch,
         "Resource": arns("launch-template"), "Condition": {"StringEquals": sweep_tag}},
        # into the sweep's own subnets and security groups (tagged by the stack)
        {"Sid": "SweepNetwork", "Effect": "Allow", "Action": launch,
         "Resource": arns("subnet", "security-group"),
         "Condition": {"StringEquals": sweep_tag}},
        # the instance's own interface and the (public, untaggable) AMI
        {"Sid": "LaunchParts", "Effect": "Allow", "Action": launch,
         "Resource": [*_listed(arns("network-interface")), *images]},
        # the one-time spot request a Spot launch makes: untagged (whether a template's
        # `spot-instances-request` tags reach a fleet's requests is not documented), so
        # scoped by region and account only; it launches nothing without the sweep-scoped
        # template, subnet and tagged instance of the same call
        {"Sid": "SpotRequests", "Effect": "Allow", "Action": launch,
         "Resource": arns("spot-instances-request")},
        # what it makes carries the sweep's tag (the templates' TagSpecifications)
        {"Sid": "SweepInstances", "Effect": "Allow", "Action": launch,
         "Resource": arns("instance", "volume"),
         "Condition": {"StringEquals": new_tag}},
        {"Sid": "TagAtCreation", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": arns("instance", "volume", "fleet"),
         "Condition": {"StringEquals": {"ec2:CreateAction": ["CreateFleet", "RunInstances"],
                                        **new_tag}}},
        {"Sid": "PassMemberRole", "Effect": "Allow", "Action": "iam:PassRole",
         "Resource": member_role_arn,
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
        {"Sid": "TerminateSweepInstances", "Effect": "Allow", "Action": "ec2:TerminateInstances",
         "Resource": arns("instance"), "Condition": {"StringEquals": {
             **{f"aws:ResourceTag/{k}": v for k, v in MANAGED_BY.items()}, **sweep_tag}}},
        # finding the group's templates and subnets (Describe* take no resource ARN)
        {"Sid": "FindTemplates", "Effect": "Allow",
         "Action": ["ec2:DescribeLaunchTemplates", "ec2:DescribeSubnets"], "Resource": "*"},
    )


def _listed(value: list[str] | str) -> list[str]:
    return [value] if isinstance(value, str) else value


def _json(doc_fn, *args: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.all(*args).apply(lambda v: json.dumps(doc_fn(*v)))


@dataclass
class AwsIdentitiesArgs:
    sweep: str
    region: str
    results_bucket: pulumi.Input[str]
    prefix: str
    image: pulumi.Input[str]
    tags: dict[str, str]
    checkpoints: bool = False  # groups keep checkpoints (grant_policy)
    created: bool = False  # lifecycle created: the functions make and delete instances
    # created: the candidate regions the functions make instances in (None: `region` only)
    fleet_regions: list[str] | None = None
    # the ARN pattern of the sweep's parameter path (`secrets.keys_arn`), when groups have keys
    keys: pulumi.Input[str] | None = None


class AwsIdentities(pulumi.ComponentResource):
    """The sweep's five roles (member, grant, Lambda, scheduler) and one instance profile,
    whatever its group count."""

    def __init__(self, name: str, args: AwsIdentitiesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Identities", name, None, opts)
        self._args, self._base = args, name
        child = pulumi.ResourceOptions(parent=self)
        sweep, tags = args.sweep, args.tags

        def role(suffix: str, trust: pulumi.Input[str], what: str,
                 named: str | None = None) -> aws.iam.Role:
            return aws.iam.Role(f"{name}-{suffix}", name=named or f"{sweep}-{suffix}",
                                description=f"spotbench {sweep}: {what}",
                                assume_role_policy=trust, tags=tags, opts=child)

        self.lambda_role = role("lambda", json.dumps(assume_role("lambda.amazonaws.com")),
                                "start/stop/done functions")
        self.scheduler_role = role("scheduler", json.dumps(assume_role("scheduler.amazonaws.com")),
                                   "start/stop schedules")
        member = member_role_name(sweep, args.region)
        self.member_role = role("member", json.dumps(assume_role("ec2.amazonaws.com")),
                                "every member instance", named=member)
        self.instance_profile = aws.iam.InstanceProfile(
            f"{name}-member", name=member, role=self.member_role.name, tags=tags, opts=child)
        self.grant_role = role("grant", self.lambda_role.arn.apply(
                                   lambda arn: json.dumps(grant_trust(arn))),
                               "storage grants the functions mint per group",
                               named=grant_role_name(sweep, args.region))
        self.grant_policy = aws.iam.RolePolicy(
            f"{name}-grant", role=self.grant_role.id, name="spotbench-grant",
            policy=_json(lambda b: grant_policy(b, args.prefix, args.checkpoints),
                         args.results_bucket),
            opts=child,
        )
        self.lambda_policy = aws.iam.RolePolicy(
            f"{name}-lambda", role=self.lambda_role.id, name="spotbench-lambda",
            policy=_json(lambda b, g, k: lambda_policy(sweep, b, args.prefix, g, k or None),
                         args.results_bucket, self.grant_role.arn, args.keys or ""),
            opts=child,
        )
        self.fleet_policy = None
        if args.created:
            self.fleet_policy = aws.iam.RolePolicy(
                f"{name}-lambda-fleet", role=self.lambda_role.id, name="spotbench-lambda-fleet",
                policy=_json(lambda m: fleet_policy(sweep, args.fleet_regions or args.region, m),
                             self.member_role.arn),
                opts=child,
            )

    def grant(self, *, done_arn: pulumi.Input[str], start_arn: pulumi.Input[str],
              stop_arn: pulumi.Input[str], failures_arn: pulumi.Input[str] | None = None) -> None:
        """The grants that name the functions (made once they exist) and the queue their
        failed asynchronous invocations go to (infra/aws/failures.py)."""
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        self.member_policy = aws.iam.RolePolicy(
            f"{self._base}-member", role=self.member_role.id, name="spotbench-member",
            policy=_json(lambda b, d, i: member_policy(b, args.prefix, d, i),
                         args.results_bucket, done_arn, args.image),
            opts=child,
        )
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
            "member_role": self.member_role.arn, "grant_role": self.grant_role.arn,
            "lambda_role": self.lambda_role.arn, "scheduler_role": self.scheduler_role.arn,
        })
