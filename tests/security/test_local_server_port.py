"""Attack: another local user takes the local functions server's port (issue 38).

The port of the functions server was chosen free, released, and bound by gunicorn a moment
later: in between, any local process could bind it, answer the readiness probe and receive
every scheduler tick with its token (which never expired). The attacker here is another
process racing for the port the moment it is chosen; it must find it bound, and the
scheduler's ticks reach the real server. A token caught anyway is good for minutes only.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from spotbench.auth import Unauthorized
from spotbench.auth.local import SCHEDULER_TOKEN_S, caller_from_headers, scheduler_token
from spotbench.clouds.local.state import LocalState
from spotbench.localrun.scheduler import post
from spotbench.localrun.server import FunctionsServer
from spotbench.spec import load_spec

pytestmark = pytest.mark.security

ATTACKER = textwrap.dedent("""
    import socket, sys, time
    port, seen = int(sys.argv[1]), sys.argv[2]
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen(16)
    except OSError as exc:
        print("refused", exc.errno, flush=True)
        sys.exit(0)
    print("bound", flush=True)
    s.settimeout(0.5)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        try:
            c, _ = s.accept()
        except OSError:
            continue
        c.settimeout(2)
        try:
            data = c.recv(65536)
        except OSError:
            data = b""
        with open(seen, "ab") as fh:
            fh.write(data + b"\\n--\\n")
        c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: 2\\r\\n"
                  b"Connection: close\\r\\n\\r\\n{}")
        c.close()
""")


def _env(root: Path) -> tuple[dict[str, str], str]:
    spec = load_spec({"name": "px", "workload": {"name": "osu"}})
    state = LocalState("px", root / "state")
    secret = state.secret()
    return {"SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": spec.model_dump_json(),
            "SPOTBENCH_RESULTS_URL": f"file://{root}/results", "SPOTBENCH_STATE_DIR": str(state.dir),
            "SPOTBENCH_GRACE_S": "2"}, secret


def test_local_server_port_cannot_be_taken_between_its_choice_and_gunicorns_bind(tmp_path: Path) -> None:
    env, secret = _env(tmp_path)
    server = FunctionsServer(env, tmp_path / "functions.log")  # the port is chosen here
    seen = tmp_path / "attacker-saw"
    attacker = subprocess.Popen([sys.executable, "-c", ATTACKER, str(server.port), str(seen)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout is not None
        verdict = attacker.stdout.readline().split()
        server.launch().wait_ready(60)
        answer = requests.post(server.url + "/stop", json={"reason": "test"},
                               headers={"Authorization": f"Bearer {scheduler_token(secret, server.session)}"},
                               timeout=30)
        assert verdict and verdict[0] == "refused", f"the attacker bound port {server.port} first"
        assert answer.status_code == 200 and answer.json() != {}, answer.text
        assert not seen.exists() or b"scheduler." not in seen.read_bytes()
        # restarted (it died) on the same port: still the socket this process holds
        server.proc.kill()
        server.proc.wait()
        again = subprocess.run([sys.executable, "-c", ATTACKER, str(server.port), str(seen)],
                               capture_output=True, text=True, timeout=30)
        assert again.stdout.split()[0] == "refused"
        server.restart()
        assert post(server.url + "/stop", lambda: scheduler_token(secret, server.session), {"reason": "test"}) != {}
    finally:
        attacker.kill()
        attacker.wait()
        server.close()


def test_local_server_a_caught_scheduler_token_expires() -> None:
    secret, run = "s" * 64, "0123456789abcdef"
    token = scheduler_token(secret, run)
    headers = {"Authorization": f"Bearer {token}"}
    assert caller_from_headers(headers, secret, run).kind == "scheduler"
    with pytest.raises(Unauthorized, match="expired"):
        caller_from_headers(headers, secret, run, now=time.time() + SCHEDULER_TOKEN_S + 1)
    far = scheduler_token(secret, run, now=time.time() + 10 * SCHEDULER_TOKEN_S)  # minted for later
    with pytest.raises(Unauthorized, match="too late"):
        caller_from_headers({"Authorization": f"Bearer {far}"}, secret, run)
    forged = token.rsplit(".", 2)[0] + f".{int(time.time()) + 99}." + token.rsplit(".", 1)[1]
    with pytest.raises(Unauthorized, match="invalid"):
        caller_from_headers({"Authorization": f"Bearer {forged}"}, secret, run)
