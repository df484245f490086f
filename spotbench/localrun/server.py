"""Serve `functions/main.py` with functions-framework's app and gunicorn on 127.0.0.1
(bounded for a machine other users share: `spotbench.localrun.http_server`).

The listening socket is bound here, before its port is known to anyone, and handed to
gunicorn as an inherited file descriptor (`fd://N`); this process keeps it open across
restarts. So no other local user can take the port between its choice and gunicorn's bind
and answer the readiness probe, or a scheduler tick carrying its token (issue 38). Each
server serves one run (`session`, in its environment and `functions.json`, both readable by
its user only): it takes scheduler tokens of that run alone."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import requests

from spotbench import PROJECT_ROOT
from spotbench._private import open_private_append, private_dir
from spotbench.auth.local import SESSION_ENV, new_session
from spotbench.localrun.net import listening_socket

FUNCTIONS_SOURCE = PROJECT_ROOT / "functions" / "main.py"
_PR_SET_PDEATHSIG = 1


try:  # resolved here: the child runs only a plain call between fork and exec
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the runner dies, even by SIGKILL (Linux)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGTERM))


class FunctionsServer:
    """A functions-framework process serving the `router` target (POST /start|/stop|/done)."""

    def __init__(self, env: dict[str, str], log_path: Path, port: int | None = None):
        self.sock = listening_socket(port or None)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.session = env.get(SESSION_ENV) or new_session()  # the run whose tokens it takes
        self.env = {**env, SESSION_ENV: self.session}
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> FunctionsServer:
        """Launch the server and wait until it answers."""
        return self.launch().wait_ready(timeout)

    def launch(self) -> FunctionsServer:
        """Start the server process without waiting (boot it while other work goes on)."""
        if not FUNCTIONS_SOURCE.exists():
            raise RuntimeError(f"functions source not found at {FUNCTIONS_SOURCE}")
        fd = self.sock.fileno()
        cmd = [sys.executable, "-m", "spotbench.localrun.http_server", "--target", "router",
               "--source", str(FUNCTIONS_SOURCE), "--fd", str(fd)]
        private_dir(self.log_path.parent)
        log = open_private_append(self.log_path)  # owned by the child's lifetime
        self.proc = subprocess.Popen(
            cmd, env={**os.environ, **self.env}, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, pass_fds=(fd,),
            start_new_session=True,  # its own process group: stop() reaches its workers too
        )
        log.close()
        return self

    def record(self) -> dict[str, Any]:
        """What `functions.json` keeps: enough to find (and stop) this exact process later."""
        pid = self.proc.pid if self.proc else None
        ctime = None
        if pid:
            try:
                ctime = psutil.Process(pid).create_time()
            except psutil.NoSuchProcess:
                pass
        return {"url": self.url, "port": self.port, "pid": pid, "ctime": ctime, "session": self.session}

    def restart(self, timeout: float = 60) -> FunctionsServer:
        """Start it again on the same port (members keep their done URL)."""
        self.stop()
        return self.start(timeout)

    def ensure_running(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.restart()

    def wait_ready(self, timeout: float = 60) -> FunctionsServer:
        assert self.proc is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the functions server exited with code {self.proc.returncode}; "
                    f"see {self.log_path}"
                )
            try:  # the socket is ours: a connection waits in its backlog until gunicorn accepts
                requests.get(self.url + "/", timeout=1)
                return self
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the functions server did not answer within {timeout:.0f}s; see {self.log_path}")

    def stop(self) -> None:
        """Quick shutdown; after 10 s, or when the server died on its own, SIGKILL to its
        whole process group, so no worker it forked outlives it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # gunicorn: quick shutdown (TERM is graceful)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def __enter__(self) -> FunctionsServer:
        return self.start() if self.proc is None else self.wait_ready()

    def close(self) -> None:
        """Stop the server and release its port."""
        self.stop()
        self.sock.close()

    def __exit__(self, *exc: object) -> None:
        self.close()
