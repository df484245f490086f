"""A local sweep served by the real local functions server (spotbench.localrun.server), for
attack and fuzz tests: two groups of sleeper instances, tokens, raw-socket helpers."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

from spotbench.auth.local import member_token, scheduler_token
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState
from spotbench.spec import load_spec

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


class LocalFunctions:
    def __init__(self, root: Path, name: str = "sec", **spec_fields: Any):
        self.spec = load_spec({"name": name, "workload": {"name": "osu"}, "trials": 2,
                               **spec_fields})
        self.groups = self.spec.plan()
        self.state = LocalState(name, root / "state")
        self.secret = self.state.secret()
        self.cloud = LocalCloud(self.state.db_path, grace_s=1, log_dir=self.state.dir / "logs")
        self.cloud.deploy([
            LocalInstanceSpec(name=m.name, labels=g.member_labels(m), command=SLEEPER, env={})
            for g in self.groups for m in g.members
        ])
        env = {"SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": self.spec.model_dump_json(),
               "SPOTBENCH_RESULTS_URL": f"file://{root}/results",
               "SPOTBENCH_STATE_DIR": str(self.state.dir), "SPOTBENCH_GRACE_S": "1"}
        self.server = FunctionsServer(env, self.state.dir / "logs" / "functions.log")
        self.url = self.server.url
        self.port = self.server.port

    def __enter__(self) -> LocalFunctions:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        for g in self.groups:
            self.cloud.stop(g.labels)

    @property
    def scheduler(self) -> str:
        return scheduler_token(self.secret, self.server.session)

    def member(self, group: int = 0, index: int = 0) -> str:
        return member_token(self.secret, self.groups[group].members[index].name)

    def states(self) -> dict[str, str]:
        return {i.name: i.state.value for i in self.cloud.query({"spotbench-sweep": self.spec.name})}


def raw_request(port: int, data: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read the whole answer (the server closes or sends Content-Length)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "-1"))
        while length < 0 or len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return status, headers, body


def json_error(status: int, headers: dict[str, str], body: bytes) -> str:
    """The `error` of a JSON error answer (asserting it is one)."""
    assert headers.get("content-type", "").startswith("application/json"), (status, headers, body[:200])
    payload = json.loads(body)
    assert isinstance(payload, dict) and isinstance(payload.get("error"), str), payload
    return payload["error"]
