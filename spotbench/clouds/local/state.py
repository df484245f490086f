"""Files a local sweep keeps under `.spotbench/<sweep>/` (folder 0700, every file 0600:
see `spotbench._private`) so that any spotbench process
(the runner, `spotbench schedule …`, `spotbench status`) can find and steer it.

    cloud.db          the local cloud's SQLite instance table
    secret            the per-sweep secret the bearer tokens derive from (mode 0600)
    functions.json    {"url": …, "port": …, "pid": …, "ctime": …} of the running functions
                      server; kept when the runner is killed, so the next run or teardown
                      finds (and stops) the server it left
    schedule.json     {"paused": bool, "next_start": iso|None, "next_stop": iso|None}

A file here that cannot be read as what it should be (corrupt, truncated) raises
`StateError` naming the file and the fix, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

from spotbench._private import FILE_MODE, private_dir, trusted_path, write_private
from spotbench.clouds.provider import state_root  # where local sweeps keep their state

__all__ = ["LocalState", "StateError", "state_removed", "state_root"]


SECRET = re.compile(r"^[0-9a-f]{64}$")


class StateError(RuntimeError):
    """A file of the local sweep's state is corrupt or cannot be written; says which and
    what to do."""




class LocalState:
    def __init__(self, sweep: str, root: Path | str | None = None):
        self.sweep = sweep
        self.dir = private_dir(state_root(root) / sweep)

    def _path(self, name: str) -> Path:
        """A state file's path, after checking (again) that nobody else can swap a folder
        above it since the state was opened (`trusted_path`)."""
        return trusted_path(self.dir / name)

    @property
    def db_path(self) -> Path:
        return self._path("cloud.db")

    def secret(self) -> str:
        """The sweep's secret, made on first use and kept (0600) for later processes."""
        path = self._path("secret")
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
        text = path.read_text(errors="replace").strip()
        if not SECRET.match(text):
            raise StateError(f"{path} is corrupt (not the 64 hex digits spotbench wrote): stop the "
                             f"sweep's processes (`spotbench teardown`), remove the file (a new "
                             "secret is made) and run again")
        return text

    def _read(self, name: str) -> dict[str, Any]:
        path = self._path(name)
        if not path.exists():
            return {}
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            raise StateError(f"{path} is corrupt ({exc}): remove it (spotbench writes it "
                             "anew) and run again") from None
        if not isinstance(data, dict):
            raise StateError(f"{path} is corrupt (not a JSON object): remove it and run again")
        return data

    def _write(self, name: str, data: dict[str, Any]) -> None:
        write_private(self._path(name), json.dumps(data, indent=2, default=str))

    @property
    def functions(self) -> dict[str, Any]:
        return self._read("functions.json")

    @functions.setter
    def functions(self, value: dict[str, Any]) -> None:
        self._write("functions.json", value)

    def functions_process(self) -> Any:
        """The functions server `functions.json` names, if that exact process still runs."""
        import psutil

        info = self.functions
        pid = info.get("pid")
        if not pid:
            return None
        try:
            proc = psutil.Process(int(pid))
            if info.get("ctime") is not None and abs(proc.create_time() - float(info["ctime"])) > 0.05:
                return None  # the pid was reused
            cmdline = " ".join(proc.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
            return None
        return proc if "functions" in cmdline and proc.status() != psutil.STATUS_ZOMBIE else None

    @property
    def schedule(self) -> dict[str, Any]:
        return {"paused": False, "next_start": None, "next_stop": None, **self._read("schedule.json")}

    def update_schedule(self, **changes: Any) -> dict[str, Any]:
        data = {**self.schedule, **changes}
        self._write("schedule.json", data)
        return data

    @property
    def paused(self) -> bool:
        return bool(self.schedule["paused"])


def state_removed(folder: Path, logs_to: Path | None = None) -> Path | None:
    """A local sweep's state folder deleted, its `logs/` moved to `logs_to / "logs"` first;
    where the logs went (None: no folder, or no logs to move)."""
    if not folder.is_dir():
        return None
    moved = None
    if logs_to is not None and (folder / "logs").is_dir():
        moved = logs_to / "logs"
        if moved.exists():
            shutil.rmtree(moved)
        moved.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder / "logs"), str(moved))
    shutil.rmtree(folder)
    return moved
