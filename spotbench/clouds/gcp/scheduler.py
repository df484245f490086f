"""Schedule control on GCP: the sweep's Cloud Scheduler jobs, through google-cloud-scheduler.

Job names: `projects/{project}/locations/{region}/jobs/{sweep}-start` and `…-stop` (the
names `infra/` gives the pair; override with `start_job`/`stop_job`). Pause/resume act on
the START job only (the deadline stop keeps firing for running groups); run-now runs it.
`api_endpoint` (env `SPOTBENCH_GCP_API_ENDPOINT`, e.g. `http://127.0.0.1:8085`) switches to
the REST transport against that endpoint.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from spotbench.clouds.gcp import project_of, region_of

if TYPE_CHECKING:
    from spotbench.spec import SweepSpec


def job_path(project: str, region: str, job: str) -> str:
    return f"projects/{project}/locations/{region}/jobs/{job}"


class GcpSchedule:
    def __init__(
        self,
        sweep: str,
        project: str,
        region: str,
        *,
        api_endpoint: str | None = None,
        credentials: Any = None,
        start_job: str | None = None,
        stop_job: str | None = None,
    ):
        from google.cloud import scheduler_v1

        self.sweep = sweep
        self.start_job = job_path(project, region, start_job or f"{sweep}-start")
        self.stop_job = job_path(project, region, stop_job or f"{sweep}-stop")
        endpoint = api_endpoint or os.environ.get("SPOTBENCH_GCP_API_ENDPOINT") or None
        kwargs: dict[str, Any] = {"credentials": credentials}
        if endpoint:
            kwargs |= {"transport": "rest", "client_options": {"api_endpoint": endpoint}}
        self.client = scheduler_v1.CloudSchedulerClient(**kwargs)
        self._states = scheduler_v1.Job.State

    @classmethod
    def for_spec(cls, spec: SweepSpec, **options: Any) -> GcpSchedule:
        project = options.pop("project", None) or project_of(spec)
        return cls(spec.name, project, options.pop("region", None) or region_of(spec), **options)

    def pause(self) -> str:
        job = self.client.pause_job(name=self.start_job)
        return f"{self.sweep}: start job {job.name} is {job.state.name}; the stop job still fires"

    def resume(self) -> str:
        job = self.client.resume_job(name=self.start_job)
        return f"{self.sweep}: start job {job.name} is {job.state.name}"

    def run_now(self) -> str:
        job = self.client.run_job(name=self.start_job)
        return f"{self.sweep}: start job {job.name} asked to run now"

    def state(self) -> tuple[bool | None, str, dict[str, str]]:
        jobs = {name: self.client.get_job(name=name) for name in (self.start_job, self.stop_job)}
        states = {name.rsplit("/", 1)[-1]: job.state.name for name, job in jobs.items()}
        start = jobs[self.start_job]
        detail = f"Cloud Scheduler '{start.schedule}' ({start.time_zone or 'UTC'})"
        return start.state == self._states.PAUSED, detail, states
