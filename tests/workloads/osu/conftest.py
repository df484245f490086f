"""Run `python -m workloads.osu` as two real member processes without the lead's runner:
a MemberContext env per member (free ports on 127.0.0.1), a run opened in a tmp
ResultStore, and a tiny HTTP server standing in for the `done` function."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from spotbench.member import MemberContext, Peer
from spotbench.results import ResultStore

ROOT = Path(__file__).resolve().parents[3]
VENV_BIN = ROOT / ".venv" / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class DoneServer:
    url: str
    calls: list[dict] = field(default_factory=list)
    event: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def done_server() -> Iterator[DoneServer]:
    state = DoneServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.calls.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                "body": json.loads(body or b"{}")})
            state.event.set()
            data = json.dumps({"stopped": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/done"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@dataclass
class OsuGroup:
    store: ResultStore
    run_id: str
    envs: dict[str, dict[str, str]]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, role: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "workloads.osu"], env=self.envs[role],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs[role] = proc
        return proc

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def make_group(tmp_path: Path, done_url: str, params: dict, group: str = "g-osu-test") -> OsuGroup:
    store = ResultStore(f"file://{tmp_path / 'results'}")
    run = store.open_run()
    ports = {"launcher": free_port(), "peer": free_port()}
    names = {"launcher": f"{group}-l0", "peer": f"{group}-p0"}
    members = [Peer(name=names[r], role=r, index=0, rank=i, host="127.0.0.1", port=ports[r])
               for i, r in enumerate(["launcher", "peer"])]
    envs = {}
    for i, role in enumerate(["launcher", "peer"]):
        ctx = MemberContext(
            sweep="osu-test", group=group, trial=0, cloud="local", workload="osu",
            params={"name": "osu", **params}, name=names[role], role=role, index=0, rank=i,
            members=members, results_url=store.url, done_url=done_url,
            token=f"{names[role]}.test-token",
        )
        env = {**os.environ, **ctx.to_env(), "SPOTBENCH_RUN": run.run}
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env.pop("SPOTBENCH_OSU_TRANSPORT", None)
        envs[role] = env
    return OsuGroup(store=store, run_id=run.run, envs=envs)
