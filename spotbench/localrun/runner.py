"""`spotbench run` on the local cloud: deploy, serve the functions, tick, wait, report.

The same flow as on GCP/AWS, on one machine: groups become rows of the local cloud (one
process per member when started), `functions/main.py` is served by the real
functions-framework server, and the start/stop pair fires from an in-process cron. The
runner only watches and steers through the functions, exactly like a cloud scheduler.

Faults it handles (see docs/architecture.md, "Faults"):
- the results store is probed before anything starts (read-only, full: a clear error);
- SIGTERM/SIGHUP to the runner stop every group and close the run, like Ctrl-C; after a
  SIGKILL the functions server dies with it (parent-death signal) and members stop at
  their own deadline; the next `spotbench run` stops a server left behind, serves on the
  same port (members still running reach `done`) and continues the open run;
- a functions server that dies is noticed within a poll and restarted on its port;
- every attempt of a group gets the deadline (the runner's stop, and the member's own
  max run time as the backstop, like a cloud's max-run-duration);
- a group that lost a member (crashed, reclaimed) is stopped at once and retried whole;
- the outcome names each group's final state; `spotbench run` exits non-zero when any
  group ends incomplete;
- a local state that cannot be used (cloud.db full or corrupt, a corrupt secret, schedule
  or run ledger) is one `RunError` naming the file and the fix; every process of the sweep
  is stopped first, without the instance table if it cannot be written (`LocalCloud.halt`);
- a start tick that fails is an error, not a wait for a tick that never comes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import requests

from spotbench import control
from spotbench.failures import Failure, failures
from spotbench.auth.local import member_token, scheduler_token
from spotbench.clouds.base import ACTIVE, State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec, halt
from spotbench.localrun.net import free_ports
from spotbench.localrun.scheduler import LocalScheduler, post
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState, StateError
from spotbench.localrun.takeover import recorded as _recorded, take_over_server
from spotbench.member import MemberContext
from spotbench.plan import RunGroup, sweep_labels
from spotbench.results import CorruptLedger, ResultStore, StoreError
from spotbench.spec import SweepSpec
from spotbench.workload import USER_ENV

log = logging.getLogger("spotbench.run")

POLL_S = 0.5
STALE_S = 20.0  # a group complete but still running this long lost its done: stop it
KICK_FAILURES_MAX = 3  # consecutive failed kicks (the store or the server keeps failing): give up


class RunError(RuntimeError):
    """The run cannot go on (results store unwritable, functions unreachable); nothing is
    left running when it is raised."""


@dataclass
class Progress:
    """What the runner reports while it waits (the CLI renders it with rich)."""

    total: int
    completed: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    message: str = ""
    run: str | None = None  # the run being watched
    events: list[str] = field(default_factory=list)  # sentences to show once each (retries)


@dataclass
class RunOutcome:
    sweep: str
    run: str | None
    results_url: str
    completed: list[str]
    incomplete: list[str]
    refused: list[dict]
    state_dir: Path
    answers: list[dict]
    states: dict[str, str] = field(default_factory=dict)  # group → complete/preempted/…
    faults: list[dict] = field(default_factory=list)  # what the runner noticed and did
    error: str | None = None  # why the run was cut short, if it was
    failures: dict[str, Failure] = field(default_factory=dict)  # group → why its command failed

    @property
    def ok(self) -> bool:
        return not self.incomplete and self.error is None


def run_window(spec: SweepSpec, groups: list[RunGroup]) -> timedelta:
    """How long a run may take: the per-group deadline × the waves of groups it needs, with
    room for every group's retries (a run that completes closes at once anyway)."""
    waves = 1 if spec.max_concurrency is None else math.ceil(len(groups) / spec.max_concurrency)
    waves *= control.MAX_LAUNCHES_PER_RUN
    return spec.deadline * waves + timedelta(seconds=5 * waves)


def member_max_run_s(spec: SweepSpec, grace_s: float) -> float:
    """A member's own backstop, the host's deadline: SIGTERM at its group's deadline, SIGKILL
    `grace_s` later (the supervisor, and coreutils `timeout` when no supervisor is left), so
    no member bills past deadline + grace, with or without a runner."""
    return spec.deadline.total_seconds()


def state_failure(exc: BaseException, db_path: Path) -> str:
    """One line for a local state that cannot be used: which file, why, and the fix."""
    if isinstance(exc, (StateError, StoreError, RunError)):
        return str(exc)
    text = str(exc)
    if "full" in text:
        fix = f"free space on the disk holding {db_path.parent}, then run again"
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        fix = (f"remove {db_path} (and its -wal, -shm files; spotbench makes it anew) and "
               "run again")
    else:
        fix = f"check {db_path.parent} is writable by you, then run again"
    return f"the local cloud's instance table {db_path} failed ({text}): {fix}"


def deploy(spec: SweepSpec, state: LocalState, cloud: LocalCloud, done_url: str,
           results_url: str, grace_s: float = 30.0) -> list[RunGroup]:
    """Declare every member of every group as a local instance (created stopped)."""
    groups = spec.plan()
    secret = state.secret()
    ports = iter(free_ports(sum(len(g.members) for g in groups)))
    bin_dir = str(Path(sys.executable).parent)
    specs = []
    for group in groups:
        addresses = {m.name: ("127.0.0.1", next(ports)) for m in group.members}
        for member in group.members:
            ctx = MemberContext.for_member(
                group, member, addresses=addresses, cloud="local", results_url=results_url,
                done_url=done_url, token=member_token(secret, member.name), zone="local",
                spot=spec.spot,
            )
            env = {**ctx.to_env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                   "PYTHONUNBUFFERED": "1"}
            if group.descriptor.user_image is not None:  # secret values: not in the context
                env[USER_ENV] = json.dumps(group.descriptor.user_image.env(group.params))
            specs.append(LocalInstanceSpec(
                name=member.name, labels=group.member_labels(member),
                command=[sys.executable, "-m", group.descriptor.module],
                env=env, cwd=os.getcwd(), max_run_s=member_max_run_s(spec, grace_s),
            ))
    cloud.deploy(specs)
    return groups


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
    try:
        store.probe()
    except StoreError as exc:
        raise RunError(f"{exc}; nothing was started. Point `results:` at a writable folder "
                       "or bucket, or free space, then run again.") from None
    try:
        store.runs(strict=True)  # the run ledger must be readable before anything starts
        secret = state.secret()
        state.schedule  # noqa: B018 - read: a corrupt file is named now, not mid-run
        cloud = LocalCloud(state.db_path, grace_s=grace_s, log_dir=state.dir / "logs")
    except (StoreError, StateError, sqlite3.Error) as exc:
        halt(state.db_path, grace_s)
        raise RunError(f"{state_failure(exc, state.db_path)} (nothing was started)") from None
    token = scheduler_token(secret)
    env = {
        "SPOTBENCH_CLOUD": "local",
        "SPOTBENCH_SPEC": spec.model_dump_json(),
        "SPOTBENCH_RESULTS_URL": results_url,
        "SPOTBENCH_STATE_DIR": str(state.dir),
        "SPOTBENCH_GRACE_S": str(grace_s),
    }
    faults: list[dict] = []
    port = take_over_server(state, faults)
    server = FunctionsServer(env, state.dir / "logs" / "functions.log", port=port).launch()
    try:
        groups = deploy(spec, state, cloud, f"{server.url}/done", results_url, grace_s)
    except sqlite3.Error as exc:
        server.stop()
        halt(state.db_path, grace_s)
        raise RunError(f"{state_failure(exc, state.db_path)} (nothing was started)") from None
    sweep = control.Sweep(spec=spec, cloud=cloud, store=store, groups=groups)
    scheduler = LocalScheduler(spec, state, server.url, token, run_window(spec, groups))
    run_id: str | None = None
    error: str | None = None
    unusable = False  # the sweep's own state failed: no outcome can be read, only the error
    with server, _signals_interrupt():
        state.functions = _recorded(server)
        try:
            scheduler.run(now=not on_schedule, on_schedule=on_schedule)
            run_id = _watch(sweep, scheduler, server, token, on_schedule, on_progress, faults)
        except KeyboardInterrupt:
            log.warning("interrupted: stopping every group of %s", spec.name)
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
            try:
                _drain(cloud, spec, grace_s)
            except (sqlite3.Error, OSError) as exc:  # the table cannot be used: stop without it
                error, unusable = error or state_failure(exc, state.db_path), True
                left = halt(state.db_path, grace_s)
                faults.append({"fault": "instance table unusable", "detail": str(exc),
                               "action": "every process stopped without it", "left": left})
            with contextlib.suppress(StateError, OSError):
                if state.functions.get("pid") == (server.proc.pid if server.proc else None):
                    state.functions = {}
    if error is not None and unusable:
        with contextlib.suppress(StoreError):  # the functions could not: close it here
            store.close_open_runs(reason="local state unusable")
        raise RunError(f"{error}; every process of the sweep was stopped")
    run_id = run_id or _newest_run(scheduler)
    completed = store.completed_groups(run_id) if run_id else set()
    failed = {g: f for (_, g), f in failures(store.read(run_id)).items()} if run_id else {}
    completed -= set(failed)  # stored and over, not retried, but no success
    refused = [r for a in scheduler.answers for r in a.get("refused", [])]
    states = final_states(sweep, run_id, completed, set(failed)) if run_id else {}
    errors = [a["error"] for a in scheduler.answers if a.get("error")]
    return RunOutcome(
        sweep=spec.name, run=run_id, results_url=results_url,
        completed=sorted(completed), incomplete=sorted({g.id for g in groups} - completed),
        refused=list({r["group"]: r for r in refused}.values()), state_dir=state.dir,
        answers=scheduler.answers, states=states, faults=faults,
        error=error or (errors[-1] if errors else None), failures=failed,
    )


def final_states(sweep: control.Sweep, run: str, completed: set[str],
                 failed: frozenset[str] | set[str] = frozenset()) -> dict[str, str]:
    """Each group's end, in one word: complete, preempted, contaminated, failed (its command
    failed, or it stored nothing), gave up (kept failing), refused (budget) or not run."""
    store = sweep.store
    attempts = store.attempts(run)
    flags = store.flags(run)
    out = {}
    for group in sweep.groups:
        mine = [a for a in attempts if a.group == group.id]
        launches = store.launch_count(run, group.id)
        if group.id in failed:
            out[group.id] = "failed"
        elif group.id in completed:
            out[group.id] = "complete"
        elif launches >= control.MAX_LAUNCHES_PER_RUN:
            out[group.id] = "gave up"
        elif mine and (mine[-1].key in flags or mine[-1].contaminated):
            out[group.id] = "contaminated"
        elif mine:
            out[group.id] = "preempted"
        elif launches:
            out[group.id] = "failed"
        else:
            out[group.id] = "not run"
    return out


def _newest_run(scheduler: LocalScheduler) -> str | None:
    runs = [a["run"] for a in scheduler.answers if a.get("run")]
    return runs[-1] if runs else None


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end the run like Ctrl-C: every group stopped, the run closed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_all(server: FunctionsServer, token: str, reason: str, faults: list[dict]) -> None:
    try:
        server.ensure_running()
        post(f"{server.url}/stop", token, {"reason": reason})
    except (requests.RequestException, RuntimeError) as exc:
        log.error("could not close the run through the functions (%s); instances are stopped directly", exc)
        faults.append({"fault": "stop failed", "detail": str(exc)})


def _watch(sweep: control.Sweep, scheduler: LocalScheduler, server: FunctionsServer, token: str,
           on_schedule: bool, on_progress: Callable[[Progress], None] | None,
           faults: list[dict]) -> str | None:
    """Wait until the current run is over; enforce each attempt's deadline meanwhile."""
    progress = Progress(total=len(sweep.groups))
    started_at: dict[str, float] = {}  # group → when this attempt was first seen active
    deadline_s = sweep.spec.deadline.total_seconds()
    run_id: str | None = None
    seen = 0  # answers already looked at: --on-schedule follows every tick, not the first
    kick_failures = 0
    last_active: set[str] = set()
    stale_since: dict[str, float] = {}
    while True:
        time.sleep(POLL_S)
        if server.proc is not None and server.proc.poll() is not None:
            noticed = time.time()
            log.error("the functions server exited (code %s): restarting it on port %d",
                      server.proc.returncode, server.port)
            server.restart()
            scheduler.state.functions = _recorded(server)
            faults.append({"fault": "functions server died", "action": "restarted",
                           "noticed_at": noticed, "restarted_in_s": round(time.time() - noticed, 3)})
        failed_stop = next((a for a in scheduler.answers if a.get("action") == "stop" and a.get("error")), None)
        if failed_stop is not None:
            raise RunError(f"the stop tick failed: {failed_stop['error']}")
        if run_id is None:
            answers = scheduler.answers[seen:]
            seen = len(scheduler.answers)
            fresh = [a for a in answers if a.get("run") and not a.get("duplicate") and not a.get("closed")]
            failed_start = next((a for a in answers if a.get("action") == "start" and a.get("error")), None)
            if failed_start is not None and not fresh:
                raise RunError(f"the start tick failed: {failed_start['error']}")
            if not fresh:
                if on_progress:
                    progress.message = "waiting for the start tick"
                    on_progress(progress)
                continue
            run_id = fresh[-1]["run"]
        states = control.group_states(sweep)
        active = {gid for gid, insts in states.items() if any(i.state in ACTIVE for i in insts)}
        broken = sorted(gid for gid, insts in states.items() if control.broken(insts))
        now = time.monotonic()
        for gid in list(started_at):
            if gid not in active:
                del started_at[gid]  # this attempt is over: the next one gets its own deadline
        overdue = []
        for gid in active:
            if now - started_at.setdefault(gid, now) > deadline_s:
                overdue.append(gid)
                started_at[gid] = math.inf
        if overdue:
            for gid in overdue:
                progress.events.append(overrun_sentence(gid, sweep.store.launch_count(run_id, gid),
                                                        deadline_s))
                log.info("%s", progress.events[-1])
            try:
                scheduler.stop_tick(overdue, reason="group deadline")
            except requests.RequestException as exc:
                log.error("deadline stop failed (%s): stopping the instances directly", exc)
                for gid in overdue:
                    sweep.cloud.stop(next(g for g in sweep.groups if g.id == gid).labels)
            faults.extend({"fault": "deadline overrun", "group": gid} for gid in overdue)
        progress.completed = sweep.store.completed_groups(run_id)
        progress.running = active
        progress.run = run_id
        # complete but still running a while later: its done was lost
        stale = progress.completed & {gid for gid, insts in states.items()
                                      if any(i.state in (State.PENDING, State.RUNNING) for i in insts)}
        stale_since = {gid: stale_since.get(gid, now) for gid in stale}
        broken += sorted(gid for gid, t in stale_since.items() if now - t > STALE_S)
        ended, last_active = last_active - active, active
        run_open = any(r.run == run_id and r.closed_at is None for r in sweep.store.runs(strict=True))
        progress.message = "running" if active else ("idle" if run_open else "run closed")
        if on_progress:
            on_progress(progress)
        if not active and not run_open:
            if on_schedule:
                run_id, started_at = None, {}
                continue
            return run_id
        if broken or (run_open and (ended or not active)):
            # a group lost a member, or ended (a retry may be due, or it crashed without done)
            if broken:
                faults.extend({"fault": "member lost", "group": gid, "noticed_at": time.time()}
                              for gid in broken)
            try:
                answer = post(f"{server.url}/start", token, {"run": run_id})
                kick_failures = 0
            except requests.RequestException as exc:
                kick_failures += 1
                detail = _answer_error(exc)
                log.error("start kick failed (%d): %s", kick_failures, detail)
                if kick_failures >= KICK_FAILURES_MAX:
                    raise RunError(f"the run cannot go on: {detail}") from None
                last_active |= ended  # kick again at the next poll
                continue
            scheduler.answers.append(answer)
            if (not active and not answer.get("started") and not answer.get("running")
                    and not answer.get("stopping")):
                return run_id  # nothing can start now (budget, or groups that keep failing)


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


def _drain(cloud: LocalCloud, spec: SweepSpec, grace_s: float) -> None:
    """Leave nothing running behind when the runner exits."""
    labels = sweep_labels(spec.name)
    if any(i.state in ACTIVE for i in cloud.query(labels)):
        cloud.stop(labels)
        try:
            cloud.wait(labels, {State.STOPPED, State.TERMINATED}, timeout=grace_s + 10)
        except TimeoutError as exc:
            log.error("instances still running after stop: %s", exc)
