"""Schedule control on AWS: the sweep's EventBridge Scheduler schedules, through boto3.

Schedules `{sweep}-start` / `{sweep}-stop` in group `default` (override with `start_name`,
`stop_name`, `group`). Pause/resume set the START schedule's State DISABLED/ENABLED
(update_schedule replaces the whole definition, so the current one is read and sent back
with only the state changed); the stop schedule keeps firing. Run-now invokes the start
schedule's target Lambda with the schedule's own input, asynchronously, as the scheduler
would. `endpoint_url` (env `AWS_ENDPOINT_URL`) points boto3 elsewhere (moto in tests).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spotbench.spec import SweepSpec

# get_schedule answers with fields update_schedule takes, plus some it refuses
UPDATE_FIELDS = (
    "Name", "GroupName", "ScheduleExpression", "ScheduleExpressionTimezone", "StartDate",
    "EndDate", "Description", "FlexibleTimeWindow", "Target", "KmsKeyArn", "ActionAfterCompletion",
)


class AwsSchedule:
    def __init__(
        self,
        sweep: str,
        region: str,
        *,
        endpoint_url: str | None = None,
        group: str = "default",
        start_name: str | None = None,
        stop_name: str | None = None,
        session: Any = None,
    ):
        import boto3

        session = session or boto3.session.Session()
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        self.sweep = sweep
        self.group = group
        self.start_name = start_name or f"{sweep}-start"
        self.stop_name = stop_name or f"{sweep}-stop"
        self.scheduler = session.client("scheduler", region_name=region, endpoint_url=endpoint)
        self.lambda_ = session.client("lambda", region_name=region, endpoint_url=endpoint)

    @classmethod
    def for_spec(cls, spec: SweepSpec, **options: Any) -> AwsSchedule:
        if not spec.region:
            raise ValueError(f"{spec.name}: an aws sweep needs 'region' in the spec")
        return cls(spec.name, options.pop("region", None) or spec.region, **options)

    def _get(self, name: str) -> dict[str, Any]:
        return self.scheduler.get_schedule(Name=name, GroupName=self.group)

    def _set_state(self, state: str) -> str:
        current = self._get(self.start_name)
        update = {k: current[k] for k in UPDATE_FIELDS if current.get(k) not in (None, "")}
        update["GroupName"] = self.group
        self.scheduler.update_schedule(**update, State=state)
        now = self._get(self.start_name)["State"]
        if now != state:
            raise RuntimeError(f"schedule {self.start_name} is {now} after asking for {state}")
        return now

    def pause(self) -> str:
        state = self._set_state("DISABLED")
        return f"{self.sweep}: start schedule {self.start_name} is {state}; the stop schedule still fires"

    def resume(self) -> str:
        state = self._set_state("ENABLED")
        return f"{self.sweep}: start schedule {self.start_name} is {state}"

    def run_now(self) -> str:
        target = self._get(self.start_name)["Target"]
        self.lambda_.get_function(FunctionName=target["Arn"])  # a clear error if it is gone
        answer = self.lambda_.invoke(
            FunctionName=target["Arn"],
            InvocationType="Event",
            Payload=(target.get("Input") or "{}").encode(),
        )
        status = answer["StatusCode"]
        if status not in (200, 202):
            raise RuntimeError(f"invoking {target['Arn']} answered {status}")
        return f"{self.sweep}: start Lambda {target['Arn']} invoked now (HTTP {status})"

    def state(self) -> tuple[bool | None, str, dict[str, str]]:
        schedules = {name: self._get(name) for name in (self.start_name, self.stop_name)}
        start = schedules[self.start_name]
        detail = f"EventBridge '{start['ScheduleExpression']}' ({start.get('ScheduleExpressionTimezone') or 'UTC'})"
        return start["State"] == "DISABLED", detail, {n: s["State"] for n, s in schedules.items()}
