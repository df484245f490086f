"""Run one group (tf-mnist, torch: its descriptor's module) as real processes, without the
sweep runner.

Each member gets its `SPOTBENCH_CONTEXT` (free 127.0.0.1 ports), the run is opened in a
temporary `ResultStore`, and `done_url` points at a tiny HTTP server that records calls.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from spotbench.member import MemberContext
from spotbench.plan import RunGroup
from spotbench.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]


def free_ports(n: int) -> list[int]:
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


class DoneServer:
    """Records every POST body; answers like the done function."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                calls.append(json.loads(body or b"{}"))
                answer = json.dumps({"stopped": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/done"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> DoneServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def group_for(workload: dict, name: str = "tft") -> RunGroup:
    spec = load_spec({"name": name, "cloud": "local", "workload": {"name": "tf-mnist", **workload}})
    return spec.plan()[0]


class Cluster:
    """The members of one group as subprocesses; `stop()` kills every one still running."""

    def __init__(self, group: RunGroup, results_url: str, done_url: str, logs: Path,
                 extra_env: dict[str, str] | None = None):
        self.group, self.logs = group, logs
        ports = free_ports(len(group.members))
        addresses = {m.name: ("127.0.0.1", port) for m, port in zip(group.members, ports)}
        self.contexts = {
            m.name: MemberContext.for_member(group, m, addresses=addresses, cloud="local",
                                             results_url=results_url, done_url=done_url)
            for m in group.members
        }
        self.env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT),
                    **(extra_env or {})}
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self) -> Cluster:
        self.logs.mkdir(parents=True, exist_ok=True)
        for name, ctx in self.contexts.items():
            log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", self.group.descriptor.module], cwd=ROOT,
                env={**self.env, **ctx.to_env()}, stdout=log, stderr=subprocess.STDOUT,
            )
            log.close()
        return self

    def proc(self, role: str, index: int = 0) -> subprocess.Popen:
        ctx = next(c for c in self.contexts.values() if c.role == role and c.index == index)
        return self.procs[ctx.name]

    def wait(self, proc: subprocess.Popen, timeout: float) -> int:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"timed out after {timeout}s; logs:\n{self.log_text()}") from None

    def log_text(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.logs.glob("*.log")))

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
