"""The local start/stop pair: an in-process cron (APScheduler) calling the functions over HTTP.

Like Cloud Scheduler / EventBridge Scheduler: each start tick POSTs `/start` with the
scheduler's token and schedules the matching stop tick (`/stop`) one run window later.
A paused sweep (`schedule.json`, see `LocalState`) skips start ticks; stop ticks still fire
so nothing runs past its deadline. Deliveries are retried on connection errors and 5xx.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import requests
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger

from spotbench.clouds.local.state import LocalState
from spotbench.retries import http_retry
from spotbench.spec import SweepSpec

log = logging.getLogger("spotbench.scheduler")


Bearer = str | Callable[[], str]  # a token, or what mints one per request (expiring tokens)


@http_retry(attempts=4, max_wait_s=3)
def post(url: str, token: Bearer, body: dict[str, Any] | None = None, timeout: float = 30) -> dict:
    """POST a JSON body with a bearer token (minted now when `token` is callable); returns
    the JSON answer (4xx raise HTTPError)."""
    bearer = token() if callable(token) else token
    resp = requests.post(url, json=body or {}, headers={"Authorization": f"Bearer {bearer}"},
                         timeout=timeout)
    resp.raise_for_status()
    return resp.json()


class LocalScheduler:
    def __init__(self, spec: SweepSpec, state: LocalState, functions_url: str, token: Bearer,
                 window: timedelta):
        self.spec = spec
        self.state = state
        self.url = functions_url.rstrip("/")
        self.token = token
        self.window = window
        self.tz = ZoneInfo(spec.cron_schedule.timezone if spec.cron_schedule else "UTC")
        self._sched = BackgroundScheduler(timezone=self.tz)
        self.answers: list[dict] = []  # every answer of start/stop, newest last

    # ---- ticks --------------------------------------------------------------------------
    def start_tick(self, *, force: bool = False) -> dict | None:
        """One start tick (skipped when paused, unless forced as with run-now)."""
        if self.state.paused and not force:
            log.info("sweep %s is paused: start tick skipped", self.spec.name)
            return None
        now = datetime.now(self.tz)
        # a cron tick is named by its minute, so a repeated delivery is recognised as one
        tick = now if force else now.replace(second=0, microsecond=0)
        try:
            answer = post(f"{self.url}/start", self.token, {"tick": tick.isoformat()})
        except requests.RequestException as exc:  # kept: the runner ends the run on it
            detail = _detail(exc)
            log.error("start tick failed: %s", detail)
            self.answers.append({"action": "start", "error": detail})
            return None
        self.answers.append(answer)
        stop_at = now + self.window
        self._sched.add_job(self.stop_tick, DateTrigger(run_date=stop_at), id=f"stop-{now:%s}",
                            misfire_grace_time=None)
        self.state.update_schedule(next_stop=stop_at.isoformat())
        log.info("start tick: %s", answer)
        return answer

    def stop_tick(self, groups: list[str] | None = None, reason: str = "deadline") -> dict:
        """POST /stop. A failure of the run's stop tick is kept among the answers (the
        runner ends the run on it) and raised."""
        body: dict[str, Any] = {"reason": reason}
        if groups is not None:
            body["groups"] = groups
        try:
            answer = post(f"{self.url}/stop", self.token, body)
        except requests.RequestException as exc:
            detail = _detail(exc)
            log.error("stop tick (%s) failed: %s", reason, detail)
            if groups is None:
                self.answers.append({"action": "stop", "reason": reason, "error": detail})
            raise
        self.answers.append(answer)
        log.info("stop tick: %s", answer)
        return answer

    # ---- lifecycle ------------------------------------------------------------------------
    def run(self, *, now: bool, on_schedule: bool) -> None:
        """Start the background scheduler; fire one start tick now and/or follow the cron."""
        self._sched.start()
        if on_schedule:
            if self.spec.cron_schedule is None:
                raise ValueError(f"spec {self.spec.name} has no cron schedule: remove --on-schedule")
            trigger = CronTrigger.from_crontab(self.spec.cron_schedule.cron, timezone=self.tz)
            job = self._sched.add_job(self.start_tick, trigger, id="start", misfire_grace_time=60)
            self.state.update_schedule(next_start=str(job.next_run_time))
        if now:
            self._sched.add_job(lambda: self.start_tick(force=True), id="start-now")

    def shutdown(self) -> None:
        self._sched.shutdown(wait=False)


def _detail(exc: requests.RequestException) -> str:
    """An HTTP failure in one line: status and the function's error text when it answered."""
    resp = getattr(exc, "response", None)
    if resp is not None:
        try:
            return f"{resp.status_code} {resp.json().get('error', resp.text)}"
        except ValueError:
            pass
    return str(exc)
