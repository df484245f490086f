"""The start/stop pair on EventBridge Scheduler: `start` on the spec's cron, `stop` at
cron + deadline (`spotbench.cron.shift_cron`), in the spec's time zone, with a retry policy
(the Lambdas are idempotent; a 5xx outcome fails the invocation so it is retried). The
scheduler invokes asynchronously: its retry policy and dead-letter queue cover delivering
the event to Lambda; retries of a failing function are Lambda's (infra/aws/failures.py).

EventBridge cron has six fields (`min hour day-of-month month day-of-week year`), needs `?`
in one of the two day fields and numbers weekdays 1-7 from Sunday; `aws_cron()` converts.
The target input is `{"schedule": <schedule ARN>, "body": …}` (see
`functions/lambda_handler.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from spotbench.cron import CronShiftError, aws_cron, shift_cron
from spotbench.spec import SweepSpec

RETRY = {"maximum_retry_attempts": 3, "maximum_event_age_in_seconds": 600}
def schedule_pair(spec: SweepSpec) -> tuple[str, str, str, str]:
    """(start cron, stop cron, start expression, stop expression) or a RunError."""
    if spec.schedule is None:
        raise pulumi.RunError(
            f"spec {spec.name!r} has no schedule: a cloud sweep is started by EventBridge "
            "Scheduler; add e.g. `schedule: {cron: '0 3 * * *', timezone: UTC}`"
        )
    try:
        start = spec.schedule.cron
        stop = shift_cron(start, spec.deadline)
        return start, stop, aws_cron(start), aws_cron(stop)
    except CronShiftError as exc:
        raise pulumi.RunError(f"spec {spec.name!r}: schedule/deadline: {exc}") from None


def target_input(action: str) -> str:
    """The JSON the scheduler sends; `<aws.scheduler.*>` are filled in at each run."""
    body = ({"tick": "<aws.scheduler.scheduled-time>"} if action == "start"
            else {"reason": "deadline"})
    return json.dumps({"schedule": "<aws.scheduler.schedule-arn>", "body": body})


@dataclass
class AwsSchedulerArgs:
    spec: SweepSpec
    role_arn: pulumi.Input[str]
    start_arn: pulumi.Input[str]
    stop_arn: pulumi.Input[str]
    dead_letter_arn: pulumi.Input[str] | None = None  # the sweep's failed-invocations queue


class AwsScheduler(pulumi.ComponentResource):
    def __init__(self, name: str, args: AwsSchedulerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Scheduler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        self.start_cron, self.stop_cron, start_expr, stop_expr = schedule_pair(spec)
        assert spec.schedule is not None
        self.schedules: dict[str, aws.scheduler.Schedule] = {}
        for action, expr, arn in (("start", start_expr, args.start_arn),
                                  ("stop", stop_expr, args.stop_arn)):
            self.schedules[action] = aws.scheduler.Schedule(
                f"{name}-{action}",
                name=f"{spec.name}-{action}",
                description=f"spotbench {spec.name}: {action}",
                schedule_expression=expr,
                schedule_expression_timezone=spec.schedule.timezone,
                flexible_time_window={"mode": "OFF"},
                state="ENABLED",
                target={"arn": arn, "role_arn": args.role_arn, "input": target_input(action),
                        "retry_policy": RETRY,
                        **({"dead_letter_config": {"arn": args.dead_letter_arn}}
                           if args.dead_letter_arn is not None else {})},
                opts=child,
            )
        self.register_outputs({"start": self.start_cron, "stop": self.stop_cron})
