"""Local orphan sweep: every instance row of a local sweep's cloud db (its process is
killed: SIGTERM, then SIGKILL after the grace period) and the sweep's functions server.

Local sweeps live in `<state root>/<sweep>/` (see `spotbench.clouds.local.state`); with no
sweep given, every sweep directory under the root is searched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil

from spotbench.clouds.local import db
from spotbench.clouds.base import Resource, State
from spotbench.clouds.local.cloud import LocalCloud
from spotbench.clouds.local.state import LocalState

WAIT_MARGIN_S = 30.0  # on top of the grace period, for the supervisor to record the end


class LocalSweeper:
    cloud = "local"

    def __init__(self, root: Path | str, grace_s: float | None = None):
        self.root = Path(root).resolve()
        self.grace_s = float(grace_s if grace_s is not None else os.environ.get("SPOTBENCH_GRACE_S", "30"))

    def _sweeps(self, sweep: str | None) -> list[str]:
        if sweep:
            return [sweep] if (self.root / sweep).is_dir() else []
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "cloud.db").exists())

    def _state(self, sweep: str) -> LocalState:
        return LocalState(sweep, root=self.root)

    def _cloud(self, sweep: str) -> Any:
        state = self._state(sweep)
        return LocalCloud(db_path=state.db_path, grace_s=self.grace_s, log_dir=state.dir / "logs")

    def find(self, sweep: str | None) -> list[Resource]:
        out: list[Resource] = []
        for name in self._sweeps(sweep):
            state = self._state(name)
            server = _functions_process(state)
            if server is not None:
                out.append(Resource("local", "functions-server", str(server.pid), str(state.dir), name, "running"))
            if not state.db_path.exists():
                continue
            for inst in self._cloud(name).query({}):  # every row of this sweep's db is ours
                out.append(Resource("local", "instance", inst.name, str(state.dir), name, inst.state.value))
        return out

    def delete(self, resource: Resource) -> None:
        sweep = resource.sweep or Path(resource.where).name
        if resource.kind == "functions-server":
            proc = _functions_process(self._state(sweep))
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=self.grace_s)
                except psutil.TimeoutExpired:
                    proc.kill()
            return
        if resource.kind != "instance":
            raise ValueError(f"local sweeper cannot delete a {resource.kind}")
        cloud = self._cloud(sweep)
        mine = [i for i in cloud.query({}) if i.name == resource.id]
        if not mine:
            return  # already gone
        labels = dict(mine[0].labels)
        cloud.terminate(labels)  # SIGTERM now; the supervisor sends SIGKILL after grace_s
        try:
            cloud.wait(labels, {State.TERMINATED}, timeout=self.grace_s + WAIT_MARGIN_S)
        except TimeoutError as exc:
            raise RuntimeError(str(exc)) from None
        _forget(cloud.db_path, resource.id)


def _forget(db_path: Path, name: str) -> None:
    """Drop a TERMINATED instance's row from the local cloud's table (LocalCloud keeps
    terminated rows; teardown leaves the table clean)."""
    from contextlib import closing

    with closing(db.connect(db_path)) as conn, db.transaction(conn):
        conn.execute("DELETE FROM instances WHERE name = ? AND state = ?", (name, State.TERMINATED.value))


def _functions_process(state: LocalState) -> psutil.Process | None:
    """The sweep's functions server if it is still running (and really is one)."""
    return state.functions_process()
