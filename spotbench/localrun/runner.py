"""`spotbench run` on the local cloud: deploy, serve the functions, tick, wait, report.

The same flow as on GCP/AWS, on one machine: groups become rows of the local cloud (one
process per member when started), `functions/main.py` is served by the real
functions-framework server, and the start/stop pair fires from an in-process cron. The
runner only watches and steers through the functions, exactly like a cloud scheduler.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from spotbench import control
from spotbench.auth.local import member_token, scheduler_token
from spotbench.clouds.base import ACTIVE, State
from spotbench.clouds.local import LocalCloud, LocalInstanceSpec
from spotbench.localrun.net import free_ports
from spotbench.localrun.scheduler import LocalScheduler, post
from spotbench.localrun.server import FunctionsServer
from spotbench.localrun.state import LocalState
from spotbench.member import MemberContext
from spotbench.plan import RunGroup, sweep_labels
from spotbench.results import ResultStore
from spotbench.spec import SweepSpec

log = logging.getLogger("spotbench.run")

POLL_S = 0.5


@dataclass
class Progress:
    """What the runner reports while it waits (the CLI renders it with rich)."""

    total: int
    completed: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    message: str = ""


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


def run_window(spec: SweepSpec, groups: list[RunGroup]) -> timedelta:
    """How long a run may take: the per-group deadline × the waves of groups it needs."""
    waves = 1 if spec.max_concurrency is None else math.ceil(len(groups) / spec.max_concurrency)
    return spec.deadline * waves + timedelta(seconds=5 * waves)


def deploy(spec: SweepSpec, state: LocalState, cloud: LocalCloud, done_url: str,
           results_url: str) -> list[RunGroup]:
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
            specs.append(LocalInstanceSpec(
                name=member.name, labels=group.member_labels(member),
                command=[sys.executable, "-m", group.descriptor.module],
                env=env, cwd=os.getcwd(),
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
    """Run SPEC on the local cloud once now (or on its cron with `on_schedule`)."""
    state = LocalState(spec.name, state_root)
    results_url = spec.results_url()
    store = ResultStore(results_url)
    secret = state.secret()
    token = scheduler_token(secret)
    env = {
        "SPOTBENCH_CLOUD": "local",
        "SPOTBENCH_SPEC": spec.model_dump_json(),
        "SPOTBENCH_RESULTS_URL": results_url,
        "SPOTBENCH_STATE_DIR": str(state.dir),
        "SPOTBENCH_GRACE_S": str(grace_s),
    }
    server = FunctionsServer(env, state.dir / "logs" / "functions.log").launch()  # boots meanwhile
    cloud = LocalCloud(state.db_path, grace_s=grace_s, log_dir=state.dir / "logs")
    groups = deploy(spec, state, cloud, f"{server.url}/done", results_url)
    sweep = control.Sweep(spec=spec, cloud=cloud, store=store, groups=groups)
    scheduler = LocalScheduler(spec, state, server.url, token, run_window(spec, groups))
    with server:
        state.functions = {"url": server.url, "pid": server.proc.pid if server.proc else None}
        try:
            scheduler.run(now=not on_schedule, on_schedule=on_schedule)
            run_id = _watch(sweep, scheduler, server.url, token, on_schedule, on_progress)
        except KeyboardInterrupt:
            log.warning("interrupted: stopping every group of %s", spec.name)
            post(f"{server.url}/stop", token, {"reason": "interrupted"})
            raise
        finally:
            scheduler.shutdown()
            _drain(cloud, spec, grace_s)
            state.functions = {}
    completed = store.completed_groups(run_id) if run_id else set()
    refused = [r for a in scheduler.answers for r in a.get("refused", [])]
    return RunOutcome(
        sweep=spec.name, run=run_id, results_url=results_url,
        completed=sorted(completed), incomplete=sorted({g.id for g in groups} - completed),
        refused=list({r["group"]: r for r in refused}.values()), state_dir=state.dir,
        answers=scheduler.answers,
    )


def _watch(sweep: control.Sweep, scheduler: LocalScheduler, url: str, token: str,
           on_schedule: bool, on_progress: Callable[[Progress], None] | None) -> str | None:
    """Wait until the current run is over; enforce each group's deadline meanwhile."""
    progress = Progress(total=len(sweep.groups))
    first_running: dict[str, float] = {}
    deadline_s = sweep.spec.deadline.total_seconds()
    run_id: str | None = None
    while True:
        time.sleep(POLL_S)
        if run_id is None:
            answers = [a for a in scheduler.answers if a.get("run")]
            if not answers:
                if on_progress:
                    progress.message = "waiting for the start tick"
                    on_progress(progress)
                continue
            run_id = answers[0]["run"]
        states = control.group_states(sweep)
        active = {gid for gid, insts in states.items() if any(i.state in ACTIVE for i in insts)}
        now = time.monotonic()
        for gid in active:
            if now - first_running.setdefault(gid, now) > deadline_s:
                log.warning("group %s passed its deadline: stopping it", gid)
                scheduler.stop_tick([gid], reason="group deadline")
                first_running[gid] = math.inf
        progress.completed = sweep.store.completed_groups(run_id)
        progress.running = active
        current = sweep.store.current_run()
        run_open = current is not None and current.run == run_id
        progress.message = "running" if active else ("idle" if run_open else "run closed")
        if on_progress:
            on_progress(progress)
        if not active and not run_open:
            if on_schedule:
                run_id, first_running = None, {}
                continue
            return run_id
        if not active and run_open:  # a group ended without `done` (crash): kick the run on
            answer = post(f"{url}/start", token, {"tick": "runner"})
            scheduler.answers.append(answer)
            if not answer.get("started") and not answer.get("running"):
                return run_id  # nothing can start now (budget, or groups that keep failing)


def _drain(cloud: LocalCloud, spec: SweepSpec, grace_s: float) -> None:
    """Leave nothing running behind when the runner exits."""
    labels = sweep_labels(spec.name)
    if any(i.state in ACTIVE for i in cloud.query(labels)):
        cloud.stop(labels)
        try:
            cloud.wait(labels, {State.STOPPED, State.TERMINATED}, timeout=grace_s + 10)
        except TimeoutError as exc:
            log.error("instances still running after stop: %s", exc)
