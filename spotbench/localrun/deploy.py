"""The sweep's local instances: the state folder and results store proven usable first,
every member of every group declared as a local instance (created stopped, with its member
context and its own deadline), and nothing left running when the runner exits (stopped
without the instance table when it cannot be used)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
from pathlib import Path

from spotbench.auth.local import member_token
from spotbench.clouds.base import ACTIVE, State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec, halt
from spotbench.localrun.net import free_ports
from spotbench.localrun.outcome import RunError, state_failure
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState, StateError
from spotbench.member import MemberContext
from spotbench.plan import RunGroup, sweep_labels
from spotbench.results import ResultStore, StoreError
from spotbench.spec import SweepSpec
from spotbench.workload import USER_ENV

log = logging.getLogger("spotbench.run")


def member_max_run_s(spec: SweepSpec, grace_s: float) -> float:
    """A member's own backstop, the host's deadline: SIGTERM at its group's deadline, SIGKILL
    `grace_s` later (the supervisor, and coreutils `timeout` when no supervisor is left), so
    no member bills past deadline + grace, with or without a runner."""
    return spec.deadline.total_seconds()


def deploy(spec: SweepSpec, state: LocalState, cloud: LocalCloud, done_url: str,
           results_url: str, grace_s: float = 30.0) -> list[RunGroup]:
    """Declare every member of every group as a local instance (created stopped)."""
    groups = spec.plan()
    secret = state.secret()
    ports = iter(free_ports(sum(len(g.members) * g.descriptor.member_ports(g.params) for g in groups)))
    bin_dir = str(Path(sys.executable).parent)
    specs = []
    for group in groups:
        addresses = {m.name: ("127.0.0.1", next(ports)) for m in group.members}
        more = group.descriptor.member_ports(group.params) - 1
        extra = {m.name: [next(ports) for _ in range(more)] for m in group.members}
        for member in group.members:
            ctx = MemberContext.for_member(
                group, member, addresses=addresses, cloud="local", results_url=results_url,
                done_url=done_url, token=member_token(secret, member.name), zone="local",
                spot=member.spot, extra_ports=extra,
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


def drain(cloud: LocalCloud, spec: SweepSpec, grace_s: float) -> None:
    """Leave nothing running behind when the runner exits."""
    labels = sweep_labels(spec.name)
    if any(i.state in ACTIVE for i in cloud.query(labels)):
        cloud.stop(labels)
        try:
            cloud.wait(labels, {State.STOPPED, State.TERMINATED}, timeout=grace_s + 10)
        except TimeoutError as exc:
            log.error("instances still running after stop: %s", exc)


def usable_state(state: LocalState, store: ResultStore, grace_s: float) -> tuple[str, LocalCloud]:
    """The sweep's secret and local cloud, once the results store, the run ledger and the
    state folder have proven usable (RunError naming the file and the fix otherwise)."""
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
    return secret, cloud


def deploy_or_halt(spec: SweepSpec, state: LocalState, cloud: LocalCloud, server: FunctionsServer,
                   results_url: str, grace_s: float) -> list[RunGroup]:
    """`deploy`, or (the instance table failed) the server and every process stopped and a
    RunError naming the file and the fix."""
    try:
        return deploy(spec, state, cloud, f"{server.url}/done", results_url, grace_s)
    except sqlite3.Error as exc:
        server.stop()
        halt(state.db_path, grace_s)
        raise RunError(f"{state_failure(exc, state.db_path)} (nothing was started)") from None


def drain_or_halt(cloud: LocalCloud, spec: SweepSpec, state: LocalState, grace_s: float,
                  faults: list[dict]) -> str | None:
    """Stop every instance of the sweep; when the table cannot be used, stop every process
    without it and say why."""
    try:
        drain(cloud, spec, grace_s)
    except (sqlite3.Error, OSError) as exc:  # the table cannot be used: stop without it
        left = halt(state.db_path, grace_s)
        faults.append({"fault": "instance table unusable", "detail": str(exc),
                       "action": "every process stopped without it", "left": left})
        return state_failure(exc, state.db_path)
    return None
