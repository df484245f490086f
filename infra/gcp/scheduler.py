"""The start/stop pair: Cloud Scheduler jobs calling `start` on the spec's cron and `stop`
at cron + deadline (`spotbench.cron.shift_cron`), with OIDC tokens of the scheduler account
(audience = the function URL; the request goes to the service's run.app URL), the spec's time zone and a retry policy (delivery is at
least once; start/stop are idempotent).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from spotbench.cron import CronShiftError, shift_cron
from spotbench.spec import SweepSpec

RETRY = {
    "retry_count": 3,
    "min_backoff_duration": "10s",
    "max_backoff_duration": "120s",
    "max_doublings": 3,
    "max_retry_duration": "600s",
}


def cron_pair(spec: SweepSpec) -> tuple[str, str]:
    """(start cron, stop cron), or a `pulumi.RunError` saying what to change."""
    if spec.schedule is None:
        raise pulumi.RunError(
            f"spec {spec.name!r} has no schedule: a cloud sweep is started by Cloud Scheduler; "
            "add e.g. `schedule: {cron: '0 3 * * *', timezone: UTC}`"
        )
    try:
        return spec.schedule.cron, shift_cron(spec.schedule.cron, spec.deadline)
    except CronShiftError as exc:
        raise pulumi.RunError(f"spec {spec.name!r}: schedule/deadline: {exc}") from None


@dataclass
class GcpSchedulerArgs:
    spec: SweepSpec
    project: str
    region: str
    scheduler_account: pulumi.Input[str]
    start_url: str  # the function's URL: the token's audience (what the function checks)
    stop_url: str
    # what the jobs call: each service's run.app URL (Cloud Run ingress counts Cloud
    # Scheduler internal there only); default: the URL above
    start_uri: pulumi.Input[str] | None = None
    stop_uri: pulumi.Input[str] | None = None


class GcpScheduler(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: GcpSchedulerArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotbench:gcp:Scheduler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        self.start_cron, self.stop_cron = cron_pair(spec)
        assert spec.schedule is not None
        body = base64.b64encode(json.dumps({"sweep": spec.name}).encode()).decode()
        self.jobs = {}
        for action, cron, url, uri in (
            ("start", self.start_cron, args.start_url, args.start_uri or args.start_url),
            ("stop", self.stop_cron, args.stop_url, args.stop_uri or args.stop_url),
        ):
            self.jobs[action] = gcp.cloudscheduler.Job(
                f"{name}-{action}",
                name=f"{spec.name}-{action}",
                description=f"spotbench {spec.name}: {action}",
                project=args.project,
                region=args.region,
                schedule=cron,
                time_zone=spec.schedule.timezone,
                attempt_deadline="320s",
                retry_config=RETRY,
                http_target={
                    "uri": uri,
                    "http_method": "POST",
                    "body": body,
                    "headers": {"Content-Type": "application/json"},
                    "oidc_token": {
                        "service_account_email": args.scheduler_account,
                        "audience": url,
                    },
                },
                opts=child,
            )
        self.register_outputs({"start": self.start_cron, "stop": self.stop_cron})
