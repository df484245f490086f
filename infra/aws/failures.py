"""Where a lost `start`/`stop` goes: one SQS queue per sweep that someone can read.

EventBridge Scheduler invokes the Lambdas *asynchronously*: the schedule's retry policy
covers only getting the event to Lambda (throttling, a missing permission); once Lambda
has accepted it, a function error is retried by Lambda itself (twice by default) and then
dropped unless the function has an on-failure destination. So both paths end here:

- `aws.lambda_.FunctionEventInvokeConfig` for `start` and `stop`: 2 retries, then the event
  and the error go to the queue (the functions' role sends: `failure_policy`);
- the schedules' `dead_letter_config`: an event the scheduler could not deliver after its
  retries (the scheduler role sends: `scheduler_policy`, infra/aws/identity.py).

Messages stay 14 days (SQS's longest). A stop that never ran leaves on-demand members
running: their dead-man switch (infra/aws/user_data.py) powers them off at the deadline +
grace regardless; the queue says why. Read it with
`aws sqs receive-message --queue-url $(pulumi stack output failed_invocations)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from spotbench.spec import SweepSpec

RETENTION_S = 14 * 24 * 3600  # SQS's maximum
LAMBDA_RETRIES = 2  # Lambda's default for asynchronous invocations, stated
# how long Lambda keeps retrying an event: a start much later than its tick is pointless
# (a later tick comes), a stop is idempotent and worth delivering late (6 h: Lambda's max)
MAX_EVENT_AGE_S = {"start": 900, "stop": 21600}


def queue_name(sweep: str) -> str:
    return f"{sweep}-failed-invocations"


def failure_policy(queue_arn: str) -> dict:
    """The functions' role: send the failed event to the queue (Lambda's on-failure
    destination uses the function's execution role)."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "FailedInvocations", "Effect": "Allow", "Action": "sqs:SendMessage",
         "Resource": queue_arn}]}


@dataclass
class AwsFailuresArgs:
    spec: SweepSpec
    tags: dict[str, str]


class AwsFailures(pulumi.ComponentResource):
    def __init__(self, name: str, args: AwsFailuresArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Failures", name, None, opts)
        self.queue = aws.sqs.Queue(
            f"{name}-queue", name=queue_name(args.spec.name),
            message_retention_seconds=RETENTION_S, sqs_managed_sse_enabled=True,
            tags=args.tags, opts=pulumi.ResourceOptions(parent=self))
        self.arn, self.url = self.queue.arn, self.queue.url
        self.register_outputs({"arn": self.arn, "url": self.url})

    def route(self, functions: dict[str, pulumi.Input[str]], depends_on: list) -> None:
        """Each function (action → name) sends its failed asynchronous events here, once
        its role may (`depends_on`: the role's `failure_policy`)."""
        for action, function in functions.items():
            aws.lambda_.FunctionEventInvokeConfig(
                f"{self._name}-{action}", function_name=function,
                maximum_retry_attempts=LAMBDA_RETRIES,
                maximum_event_age_in_seconds=MAX_EVENT_AGE_S[action],
                destination_config={"on_failure": {"destination": self.arn}},
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on))
