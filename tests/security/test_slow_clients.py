"""Attack: slow clients starve the local functions server (issue 38).

Another local user opens a few hundred connections to the server on 127.0.0.1 and sends
headers a byte at a time, a declared body a byte at a time, nothing at all, or pipelined
requests it never reads. Each dribbling connection held one of the 16 worker threads for the
whole 5 s read deadline, so a real call (the scheduler's tick, a member's `done`) queued
behind them for a minute. Now a request is read whole in the event loop before a thread takes
it, a connection incomplete after `REQUEST_READ_S` gets a JSON 408, and a user holds at most
`PER_USER` connections (more: JSON 503 at once). The attack runs while the sweep's own
calls are made; each of them must be answered well within one read deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from spotbench.localrun import http_server, prefetch
from tests.security._server import LocalFunctions

pytestmark = pytest.mark.security

ATTACKER = Path(__file__).with_name("_attacker_slow.py")
NOBODY = 65534
ATTACK_S = 25.0
CALL_BOUND_S = http_server.REQUEST_READ_S + 7  # generous: the machine is loaded


def _attacker(port: int, count: int) -> subprocess.Popen:
    cmd = [sys.executable, "-I", str(ATTACKER), str(port), str(count), str(ATTACK_S)]
    if os.getuid() == 0 and shutil.which("setpriv"):  # as another local user
        cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
               "/usr/bin/python3", "-I", "-c", ATTACKER.read_text(), *cmd[3:]]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")


def test_slow_clients_starve_no_legitimate_call_and_are_bounded_per_user(tmp_path: Path) -> None:
    other_user = os.getuid() == 0 and shutil.which("setpriv") is not None
    # as another user: far more than PER_USER; as the same user: fewer, leaving room for ours
    count = 4 * prefetch.PER_USER if other_user else prefetch.PER_USER - 8
    with LocalFunctions(tmp_path, name="slow") as fx:
        group = fx.groups[0].id
        attacker = _attacker(fx.port, count)
        try:
            time.sleep(3.0)  # every attacking connection is open and dribbling
            waits: list[float] = []
            while len(waits) < 8:  # the sweep's own calls, one after the other, during the attack
                began = time.monotonic()
                answer = requests.post(fx.url + "/stop", json={"reason": "tick", "groups": [group]},
                                       headers={"Authorization": f"Bearer {fx.scheduler}"},
                                       timeout=60)
                waits.append(time.monotonic() - began)
                assert answer.status_code == 200, answer.text
                time.sleep(1.0)
            out, err = attacker.communicate(timeout=ATTACK_S + 60)
        finally:
            if attacker.poll() is None:
                attacker.kill()
                attacker.wait()
    assert attacker.returncode == 0, err
    got = json.loads(out)
    print("legitimate calls answered in", [round(w, 2) for w in waits], "s; attack:",
          {kind: sorted({e[0] for e in ends}) for kind, ends in got.items()})
    assert max(waits) < CALL_BOUND_S, f"a legitimate call waited {max(waits):.1f}s behind the attack"
    slow = [e for kind in ("header", "body", "silent") for e in got[kind]]
    assert not [e for e in slow if e[0] == "open"], "a slow connection was left open past the attack"
    read_by = http_server.REQUEST_READ_S + 8
    assert all(e[0] in ("408", "503") and e[1] < read_by + 3 for e in slow), slow
    refused = sum(e[0] == "503" for e in slow)
    if other_user:  # at most 2 × PER_USER of its connections at once; the rest refused at once
        assert refused >= len(slow) - 2 * prefetch.PER_USER, f"{refused} of {len(slow)} refused"
        assert all(e[1] < read_by for e in slow if e[0] == "503")
    else:
        assert refused == 0 and len(slow) == 3 * count // 4


def test_slow_clients_a_request_is_read_whole_before_a_thread_takes_it() -> None:
    state = prefetch.request_state
    assert state(b"POST /done HTTP/1.1\r\nHost: x") is False
    assert state(b"POST /done HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}") is False
    assert state(b"POST /done HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}") is True
    assert state(b"GET / HTTP/1.1\r\n\r\n") is True
    huge = b"POST / HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n" + b"x" * prefetch.BODY_BYTES
    assert state(huge) is True  # enough to refuse it: the rest is never waited for
    assert state(b"POST / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n") is True  # refused unread
    assert state(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n") is True  # gunicorn's 400
    assert state(b"POST / HTTP/1.1\nHost: x\n\n") is True  # bare line feeds: gunicorn's answer
    assert state(b"POST / HTTP/1.1\r\nX: " + b"a" * (prefetch.HEAD_BYTES + 1)) is None


def test_slow_clients_the_peer_uid_is_the_connecting_users(tmp_path: Path) -> None:
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.create_connection(server.getsockname())
        conn, addr = server.accept()
        try:
            assert prefetch.peer_uid(addr, server.getsockname()) == os.getuid()
        finally:
            conn.close()
            client.close()
    assert prefetch.peer_uid(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
