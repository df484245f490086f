"""Who steers a local sweep: `functions.json` names the functions server and the
`spotbench run` that started it (pid and start time). A run finding a server whose runner
still lives stops with AlreadyRunning (pid, how to stop it) and touches nothing; a server
left by a killed runner is stopped and its port taken over, so members it started can
still reach `done`."""

from __future__ import annotations

import logging
import os

from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState

log = logging.getLogger("spotbench.run")


class AlreadyRunning(RuntimeError):
    """Another live `spotbench run` steers this sweep: nothing was touched."""


def recorded(server: FunctionsServer) -> dict:
    """functions.json: the server, and this runner (pid, start time) that steers it."""
    import psutil

    return {**server.record(), "runner_pid": os.getpid(), "runner_ctime": psutil.Process().create_time()}


def live_runner(noted: dict) -> int | None:
    """The pid of the `spotbench run` functions.json names, if that exact process still runs."""
    import psutil

    pid, ctime = noted.get("runner_pid"), noted.get("runner_ctime")
    if not pid or pid == os.getpid():
        return None
    try:
        proc = psutil.Process(int(pid))
        alive = proc.status() != psutil.STATUS_ZOMBIE
        same = ctime is None or abs(proc.create_time() - float(ctime)) <= 0.05
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None
    return int(pid) if alive and same else None


def take_over_server(state: LocalState, faults: list[dict]) -> int | None:
    """A functions server left by a runner that was killed: stop it, and serve on its port
    again so members it started can still reach `done`. A runner still alive keeps its
    server: this run stops with AlreadyRunning before touching anything."""
    noted = state.functions
    proc = state.functions_process()
    runner = live_runner(noted) if proc is not None else None
    if runner is not None:
        raise AlreadyRunning(
            f"{state.sweep} is already running: `spotbench run` pid {runner} steers it (functions "
            f"server pid {proc.pid}, {noted.get('url')}). Wait for it, stop it with Ctrl-C in its "
            f"terminal or `kill {runner}` (its groups are stopped and the run closed), or watch it "
            "with `spotbench status SPEC`.")
    if proc is not None:
        log.warning("a functions server of %s is still running (pid %d; its runner was killed): "
                    "stopping it and taking over its port", state.sweep, proc.pid)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - psutil.TimeoutExpired
            proc.kill()
        faults.append({"fault": "orphaned functions server", "pid": proc.pid, "action": "stopped"})
    port = noted.get("port")
    if port and _port_free(int(port)):
        return int(port)
    return None


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
