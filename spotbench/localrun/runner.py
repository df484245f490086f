"""`spotbench run` on the local cloud: deploy, serve the functions, tick, wait, report.

The same flow as on GCP/AWS, on one machine: groups become rows of the local cloud (one
process per member when started), `functions/main.py` is served by the real
functions-framework server, and the start/stop pair fires from an in-process cron. The
runner only watches and steers through the functions, exactly like a cloud scheduler.

The faults it handles (a store probed first, SIGTERM/SIGHUP/SIGKILL of the runner, a dead
functions server, deadlines, lost members, an unusable local state, a failed start tick)
are docs/architecture.md's "Faults" table.

Beside it: `deploy` (the state checked, the sweep's local instances declared and drained),
`outcome` (how a run ends), `signals` (SIGTERM/SIGHUP as Ctrl-C).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import requests

from spotbench import control
from spotbench.auth.local import scheduler_token
from spotbench.clouds.base import ACTIVE, Instance, State
from spotbench.localrun.deploy import deploy_or_halt, drain_or_halt, usable_state
from spotbench.localrun.outcome import RunError, RunOutcome, outcome_of, state_failure
from spotbench.localrun.scheduler import Bearer, LocalScheduler, post
from spotbench.localrun.signals import interrupt_on_signals
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState, StateError
from spotbench.failures import failures
from spotbench.localrun.takeover import recorded as _recorded, take_over_server
from spotbench.plan import RunGroup
from spotbench.results import CorruptLedger, ResultStore, StoreError
from spotbench.spec import SweepSpec

log = logging.getLogger("spotbench.run")

POLL_S = 0.5
STALE_S = 20.0  # a group complete but still running this long lost its done: stop it
KICK_FAILURES_MAX = 3  # consecutive failed kicks (the store or the server keeps failing): give up

__all__ = ["Progress", "overrun_sentence", "run_local", "run_window"]


@dataclass
class Progress:
    """What the runner reports while it waits (the CLI renders it with rich)."""

    total: int
    completed: set[str] = field(default_factory=set)  # stored and over (failed ones too)
    failed: set[str] = field(default_factory=set)  # over, but their command failed: not complete
    running: set[str] = field(default_factory=set)
    message: str = ""
    run: str | None = None  # the run being watched
    events: list[str] = field(default_factory=list)  # sentences to show once each (retries)


def run_window(spec: SweepSpec, groups: list[RunGroup]) -> timedelta:
    """How long a run may take: the per-group deadline × the waves of groups it needs, with
    room for every group's retries (a run that completes closes at once anyway)."""
    waves = 1 if spec.max_concurrency is None else math.ceil(len(groups) / spec.max_concurrency)
    waves *= control.MAX_LAUNCHES_PER_RUN
    return spec.deadline * waves + timedelta(seconds=5 * waves)


def run_local(
    spec: SweepSpec,
    *,
    on_schedule: bool = False,
    state_root: Path | None = None,
    grace_s: float = 30.0,
    on_progress: Callable[[Progress], None] | None = None,
) -> RunOutcome:
    """Run SPEC on the local cloud once now (or on its cron with `on_schedule`).

    Raises RunError before anything starts when the results store cannot be written."""
    state = LocalState(spec.name, state_root)
    results_url = spec.results_url()
    store = ResultStore(results_url)
    secret, cloud = usable_state(state, store, grace_s)
    faults: list[dict] = []
    port = take_over_server(state, faults)
    server = FunctionsServer(_functions_env(spec, results_url, state, grace_s),
                             state.dir / "logs" / "functions.log", port=port).launch()
    token = functools.partial(scheduler_token, secret, server.session)  # per tick: they expire
    groups = deploy_or_halt(spec, state, cloud, server, results_url, grace_s)
    sweep = control.Sweep(spec=spec, cloud=cloud, store=store, groups=groups)
    scheduler = LocalScheduler(spec, state, server.url, token, run_window(spec, groups))
    run_id, error, unusable = _supervise(sweep, scheduler, server, token, state, grace_s,
                                         on_schedule, on_progress, faults)
    if error is not None and unusable:
        with contextlib.suppress(StoreError):  # the functions could not: close it here
            store.close_open_runs(reason="local state unusable")
        raise RunError(f"{error}; every process of the sweep was stopped")
    return outcome_of(sweep, results_url, scheduler.answers, run_id or _newest_run(scheduler),
                      state.dir, faults, error)


def _functions_env(spec: SweepSpec, results_url: str, state: LocalState,
                   grace_s: float) -> dict[str, str]:
    return {
        "SPOTBENCH_CLOUD": "local",
        "SPOTBENCH_SPEC": spec.model_dump_json(),
        "SPOTBENCH_RESULTS_URL": results_url,
        "SPOTBENCH_STATE_DIR": str(state.dir),
        "SPOTBENCH_GRACE_S": str(grace_s),
    }


def _supervise(sweep: control.Sweep, scheduler: LocalScheduler, server: FunctionsServer,
               token: Bearer, state: LocalState, grace_s: float, on_schedule: bool,
               on_progress: Callable[[Progress], None] | None,
               faults: list[dict]) -> tuple[str | None, str | None, bool]:
    """Serve, tick and watch until the run is over; then stop whatever is left. Returns the
    run watched, the error that cut it short, and whether the sweep's own state failed
    (then no outcome can be read, only the error)."""
    run_id: str | None = None
    error: str | None = None
    unusable = False
    with server, interrupt_on_signals():
        state.functions = _recorded(server)
        try:
            scheduler.run(now=not on_schedule, on_schedule=on_schedule)
            run_id = _watch(sweep, scheduler, server, token, on_schedule, on_progress, faults)
        except KeyboardInterrupt:
            log.warning("interrupted: stopping every group of %s", sweep.spec.name)
            _stop_all(server, token, "interrupted", faults)
            raise
        except (RunError, StoreError, StateError, sqlite3.Error) as exc:
            error = state_failure(exc, state.db_path)
            unusable = isinstance(exc, (StateError, sqlite3.Error, CorruptLedger))
            if unusable:  # the functions cannot act on it either: stopped below
                log.info("%s: stopping every process of the sweep", error)
            else:
                log.error("%s: stopping every group", error)
                _stop_all(server, token, "runner error", faults)
        finally:
            scheduler.shutdown()
            left_error = drain_or_halt(sweep.cloud, sweep.spec, state, grace_s, faults)
            if left_error is not None:
                error, unusable = error or left_error, True
            with contextlib.suppress(StateError, OSError):
                if state.functions.get("pid") == (server.proc.pid if server.proc else None):
                    state.functions = {}
    return run_id, error, unusable


def _newest_run(scheduler: LocalScheduler) -> str | None:
    runs = [a["run"] for a in scheduler.answers if a.get("run")]
    return runs[-1] if runs else None


def _stop_all(server: FunctionsServer, token: Bearer, reason: str, faults: list[dict]) -> None:
    try:
        server.ensure_running()
        post(f"{server.url}/stop", token, {"reason": reason})
    except (requests.RequestException, RuntimeError) as exc:
        log.error("could not close the run through the functions (%s); instances are stopped directly", exc)
        faults.append({"fault": "stop failed", "detail": str(exc)})


@dataclass
class _Watch:
    """What the watch loop keeps between polls."""

    sweep: control.Sweep
    scheduler: LocalScheduler
    server: FunctionsServer
    token: Bearer
    faults: list[dict]
    progress: Progress
    run_id: str | None = None
    seen: int = 0  # answers already looked at: --on-schedule follows every tick, not the first
    kick_failures: int = 0
    started_at: dict[str, float] = field(default_factory=dict)  # group → this attempt first seen active
    last_active: set[str] = field(default_factory=set)
    stale_since: dict[str, float] = field(default_factory=dict)
    progress_seen: dict[str, int] = field(default_factory=dict)  # group → its progress values seen

    @property
    def deadline_s(self) -> float:
        return self.sweep.spec.deadline.total_seconds()

    def restart_a_dead_server(self) -> None:
        server = self.server
        if server.proc is None or server.proc.poll() is None:
            return
        noticed = time.time()
        log.error("the functions server exited (code %s): restarting it on port %d",
                  server.proc.returncode, server.port)
        server.restart()
        self.scheduler.state.functions = _recorded(server)
        self.faults.append({"fault": "functions server died", "action": "restarted",
                            "noticed_at": noticed, "restarted_in_s": round(time.time() - noticed, 3)})

    def raise_a_failed_stop(self) -> None:
        failed = next((a for a in self.scheduler.answers
                       if a.get("action") == "stop" and a.get("error")), None)
        if failed is not None:
            raise RunError(f"the stop tick failed: {failed['error']}")

    def follow_a_new_run(self) -> bool:
        """Whether a run is being watched: the newest a start tick answered since the last
        look (RunError when the start tick failed)."""
        answers = self.scheduler.answers[self.seen:]
        self.seen = len(self.scheduler.answers)
        fresh = [a for a in answers if a.get("run") and not a.get("duplicate") and not a.get("closed")]
        failed = next((a for a in answers if a.get("action") == "start" and a.get("error")), None)
        if failed is not None and not fresh:
            raise RunError(f"the start tick failed: {failed['error']}")
        if not fresh:
            return False
        self.run_id = fresh[-1]["run"]
        return True

    def stop_overdue(self, active: set[str], now: float) -> None:
        """Each attempt gets the deadline from when it was first seen active."""
        for gid in list(self.started_at):
            if gid not in active:
                del self.started_at[gid]  # this attempt is over: the next one gets its own deadline
        overdue = []
        for gid in active:
            if now - self.started_at.setdefault(gid, now) > self.deadline_s:
                overdue.append(gid)
                self.started_at[gid] = math.inf
        if not overdue:
            return
        for gid in overdue:
            self.progress.events.append(overrun_sentence(
                gid, self.sweep.store.launch_count(self.run_id, gid), self.deadline_s))
            log.info("%s", self.progress.events[-1])
        try:
            self.scheduler.stop_tick(overdue, reason="group deadline")
        except requests.RequestException as exc:
            log.error("deadline stop failed (%s): stopping the instances directly", exc)
            for gid in overdue:
                self.sweep.cloud.stop(next(g for g in self.sweep.groups if g.id == gid).labels)
        self.faults.extend({"fault": "deadline overrun", "group": gid} for gid in overdue)

    def lost_done(self, states: dict[str, list[Instance]], now: float) -> list[str]:
        """Groups complete but still running STALE_S later: their done was lost."""
        stale = self.progress.completed & {
            gid for gid, insts in states.items()
            if any(i.state in (State.PENDING, State.RUNNING) for i in insts)}
        self.stale_since = {gid: self.stale_since.get(gid, now) for gid in stale}
        return sorted(gid for gid, t in self.stale_since.items() if now - t > STALE_S)

    def run_is_open(self) -> bool:
        return any(r.run == self.run_id and r.closed_at is None
                   for r in self.sweep.store.runs(strict=True))

    def show(self, active: set[str], run_open: bool,
             on_progress: Callable[[Progress], None] | None) -> None:
        self.progress.message = run_state(active, self.progress.completed, run_open)
        if on_progress:
            on_progress(self.progress)

    def new_progress(self, active: set[str]) -> bool:
        """Whether a running group of a pruned search reported an intermediate value since
        the last poll (control's pruner decides at the kick it makes)."""
        search = self.sweep.spec.search
        if search is None or search.pruner is None or self.run_id is None:
            return False
        fresh = False
        for gid in sorted(active):
            count = len(self.sweep.store.intermediate(self.run_id, gid))
            fresh |= count > self.progress_seen.get(gid, 0)
            self.progress_seen[gid] = count
        return fresh

    def kick(self, broken: list[str], ended: set[str]) -> dict | None:
        """Ask start to act on the run (stop broken groups, retry, start the next); None when
        the kick failed and is due again at the next poll."""
        if broken:
            self.faults.extend({"fault": "member lost", "group": gid, "noticed_at": time.time()}
                               for gid in broken)
        try:
            answer = post(f"{self.server.url}/start", self.token, {"run": self.run_id})
            self.kick_failures = 0
        except requests.RequestException as exc:
            self.kick_failures += 1
            detail = _answer_error(exc)
            log.error("start kick failed (%d): %s", self.kick_failures, detail)
            if self.kick_failures >= KICK_FAILURES_MAX:
                raise RunError(f"the run cannot go on: {detail}") from None
            self.last_active |= ended  # kick again at the next poll
            return None
        self.scheduler.answers.append(answer)
        return answer


_GO_ON = object()  # a poll that leaves the run to watch further


def run_state(active: set[str], completed: set[str], run_open: bool) -> str:
    """The progress line's word: `running` while a group that is not complete yet has a
    live member; `stopping` when every live group already stored its result (its members
    are shutting down); else `idle` (the run waits for a retry) or `run closed`."""
    if active - completed:
        return "running"
    if active:
        return "stopping"
    return "idle" if run_open else "run closed"


def _watch(sweep: control.Sweep, scheduler: LocalScheduler, server: FunctionsServer, token: Bearer,
           on_schedule: bool, on_progress: Callable[[Progress], None] | None,
           faults: list[dict]) -> str | None:
    """Wait until the current run is over; enforce each attempt's deadline meanwhile."""
    w = _Watch(sweep, scheduler, server, token, faults, Progress(total=len(sweep.groups)))
    while True:
        time.sleep(POLL_S)
        w.restart_a_dead_server()
        w.raise_a_failed_stop()
        if w.run_id is None and not w.follow_a_new_run():
            if on_progress:
                w.progress.message = "waiting for the start tick"
                on_progress(w.progress)
            continue
        over = _poll(w, on_schedule, on_progress)
        if over is not _GO_ON:
            return over


def _poll(w: _Watch, on_schedule: bool, on_progress: Callable[[Progress], None] | None) -> object:
    """One look at the watched run: deadlines, progress, a kick when a group broke or ended.
    The run id when the watch is over, else _GO_ON."""
    states = control.group_states(w.sweep)
    active = {gid for gid, insts in states.items() if any(i.state in ACTIVE for i in insts)}
    broken = sorted(gid for gid, insts in states.items() if control.broken(insts))
    now = time.monotonic()
    w.stop_overdue(active, now)
    over = w.sweep.store.completed_groups(w.run_id)
    if over != w.progress.completed:  # a group ended: did its command fail? (read once per change)
        w.progress.failed = {g for (_, g) in failures(w.sweep.store.read(w.run_id))} & over
    w.progress.completed = over
    w.progress.running = active
    w.progress.run = w.run_id
    broken += w.lost_done(states, now)
    ended, w.last_active = w.last_active - active, active
    run_open = w.run_is_open()
    w.show(active, run_open, on_progress)
    if not active and not run_open:
        return _next_run(w) if on_schedule else w.run_id
    if broken or (run_open and (ended or not active or w.new_progress(active))):
        # a group lost a member, or ended (a retry may be due, or it crashed without done),
        # or a search trial reported progress (the pruner may stop it)
        answer = w.kick(broken, ended)
        if answer is not None and not active and _nothing_starts(answer):
            return w.run_id  # nothing can start now (budget, or groups that keep failing)
    return _GO_ON


def _next_run(w: _Watch) -> object:
    """--on-schedule: the run is over; watch the next tick's."""
    w.run_id, w.started_at = None, {}
    return _GO_ON


def _nothing_starts(answer: dict) -> bool:
    return not (answer.get("started") or answer.get("running") or answer.get("stopping"))


def overrun_sentence(group: str, attempt: int, deadline_s: float) -> str:
    """`g1: attempt 1 of 3: deadline 10 s exceeded; stopped, attempt 2 of 3 follows`."""
    most = control.MAX_LAUNCHES_PER_RUN
    attempt = max(attempt, 1)
    then = (f"stopped, attempt {attempt + 1} of {most} follows" if attempt < most
            else "stopped; no attempt left in this run: the group gave up")
    return f"{group}: attempt {attempt} of {most}: deadline {deadline_s:g} s exceeded; {then}"


def _answer_error(exc: requests.RequestException) -> str:
    resp = getattr(exc, "response", None)
    if resp is not None:
        try:
            return f"{resp.status_code} {resp.json().get('error', resp.text)}"
        except ValueError:
            return f"{resp.status_code} {resp.text[:200]}"
    return str(exc)

