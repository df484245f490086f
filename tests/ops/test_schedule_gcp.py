"""Schedule control on GCP with the real google-cloud-scheduler client (REST transport)
against a small Cloud Scheduler endpoint on 127.0.0.1 (plain http://)."""

from __future__ import annotations

from google.auth.credentials import AnonymousCredentials

from spotbench.ops.schedule import describe
from spotbench.clouds.gcp.scheduler import GcpSchedule
from spotbench.spec import load_spec
from tests.ops._http import LocalHttp

PREFIX = "/v1/projects/proj/locations/us-central1/jobs/"


def _fake_scheduler():
    jobs = {
        name: {"name": PREFIX[4:] + name, "schedule": cron, "timeZone": "UTC", "state": "ENABLED"}
        for name, cron in (("osu-start", "0 3 * * *"), ("osu-stop", "30 3 * * *"))
    }
    runs: list[str] = []

    def handle(method, path, headers, body):
        path = path.split("?", 1)[0]
        name, _, verb = path.removeprefix(PREFIX).partition(":")
        if not path.startswith(PREFIX) or name not in jobs:
            return 404, {"error": {"code": 404, "message": f"no job {path}", "status": "NOT_FOUND"}}
        job = jobs[name]
        if method == "POST" and verb == "pause":
            job["state"] = "PAUSED"
        elif method == "POST" and verb == "resume":
            job["state"] = "ENABLED"
        elif method == "POST" and verb == "run":
            runs.append(name)
        elif method != "GET" or verb:
            return 400, {"error": {"code": 400, "message": "bad call", "status": "INVALID_ARGUMENT"}}
        return 200, job

    return jobs, runs, handle


def _spec():
    return load_spec({
        "name": "osu", "cloud": "gcp", "zone": "us-central1-a", "gcp": {"project": "proj"},
        "workload": {"name": "osu"}, "matrix": {"machine_type": ["n1-standard-2"]},
        "schedule": {"cron": "0 3 * * *"}, "deadline": "30m",
    })


def test_pause_resume_run_now_touch_only_the_start_job():
    jobs, runs, handle = _fake_scheduler()
    with LocalHttp(handle) as http:
        control = GcpSchedule.for_spec(
            _spec(), api_endpoint=http.url, credentials=AnonymousCredentials()
        )
        assert "PAUSED" in control.pause()
        assert jobs["osu-start"]["state"] == "PAUSED"
        assert jobs["osu-stop"]["state"] == "ENABLED"  # the deadline stop keeps firing
        info = describe(_spec(), control)
        assert info.paused is True and info.jobs == {"osu-start": "PAUSED", "osu-stop": "ENABLED"}
        assert info.next_stop - info.next_start == _spec().deadline

        assert "ENABLED" in control.resume()
        assert jobs["osu-start"]["state"] == "ENABLED"
        assert describe(_spec(), control).paused is False

        control.run_now()
        assert runs == ["osu-start"]
        paths = [(m, p.split("?")[0]) for m, p, *_ in http.calls]
        assert ("POST", PREFIX + "osu-start:pause") in paths
        assert not any("osu-stop:" in p for _, p in paths)  # never paused/resumed/run


def test_missing_job_is_reported_not_crashing_status():
    _, _, handle = _fake_scheduler()
    with LocalHttp(handle) as http:
        control = GcpSchedule("other", "proj", "us-central1", api_endpoint=http.url,
                              credentials=AnonymousCredentials())
        info = describe(_spec(), control)
        assert info.paused is None and "unavailable" in info.detail
