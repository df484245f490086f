"""Attack: a scheduler token of the local functions server outlives its run (issue 38).

Every scheduler token was `hmac(secret, "scheduler:<expires>")`: whoever caught one (by
answering on the server's port, from a terminal's scrollback, a proxy's log) could start and
stop the sweep with it for minutes, in the next `spotbench run` of the sweep too. Now each
token names its run (the session the runner's functions server was started with) and expires;
the server refuses another run's token and an expired one with a JSON 401. Another local user
finds neither the session, the secret nor a token where they live (the state folder, the
server's environment, its log).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from spotbench.auth.local import SCHEDULER_TOKEN_S, SESSION_ENV, scheduler_token
from spotbench.localrun.server import FunctionsServer
from tests.security._server import LocalFunctions

pytestmark = pytest.mark.security

NOBODY = 65534


def _stop(url: str, token: str, groups: list[str]) -> requests.Response:
    return requests.post(url + "/stop", json={"reason": "attack", "groups": groups},
                         headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_local_scheduler_token_of_an_old_run_or_expired_is_refused_with_a_json_error(tmp_path: Path) -> None:
    fx = LocalFunctions(tmp_path, name="tok")
    group = fx.groups[0].id
    first = fx.server.start()
    old = fx.scheduler  # caught during the first run
    fx.cloud.start(fx.groups[0].labels)
    first.close()
    # the next `spotbench run` of the sweep: a new server on the same state
    env = {k: v for k, v in first.env.items() if k != SESSION_ENV}
    second = FunctionsServer(env, tmp_path / "second.log").start()
    try:
        assert second.session != first.session
        answer = _stop(second.url, old, [group])
        assert answer.status_code == 401, answer.text
        assert "another run" in answer.json()["error"] and old not in answer.text
        assert {fx.states()[m.name] for m in fx.groups[0].members} == {"RUNNING"}  # nothing stopped
        secret = fx.secret
        expired = scheduler_token(secret, second.session, now=time.time() - SCHEDULER_TOKEN_S - 5)
        answer = _stop(second.url, expired, [group])
        assert answer.status_code == 401 and "expired" in answer.json()["error"], answer.text
        # a forged run field with the old token's MAC, and a token without a run
        head, mac = old.rsplit(".", 1)
        parts = head.split(".")
        forged = ".".join([parts[0], second.session, parts[2], mac])
        assert _stop(second.url, forged, [group]).status_code == 401
        bare = f"scheduler.{int(time.time()) + 60}.{mac}"
        assert _stop(second.url, bare, [group]).status_code == 401
        assert {fx.states()[m.name] for m in fx.groups[0].members} == {"RUNNING"}
        # the run's own token, minted now, is taken
        answer = _stop(second.url, scheduler_token(secret, second.session), [group])
        assert answer.status_code == 200, answer.text
    finally:
        second.close()
        for g in fx.groups:
            fx.cloud.stop(g.labels)


PEEK = r"""
import json, os, re, sys
root, pid = sys.argv[1], sys.argv[2]
found, read = [], []
paths = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
paths += [root + "/functions.json", root + "/secret", root + "/logs/functions.log",
          f"/proc/{pid}/environ", f"/proc/{pid}/cmdline"]
for path in paths:
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    read.append(path)
    found += [m.decode() for m in re.findall(rb"[0-9a-f]{16,64}", data)]
print(json.dumps({"uid": os.getuid(), "read": read, "found": found}))
"""


def test_local_scheduler_tokens_another_user_reads_no_run_secret_or_token(tmp_path: Path) -> None:
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as another local user")
    base = tmp_path / "project"
    base.mkdir()
    for folder in (tmp_path, base):
        folder.chmod(0o755)  # a project folder other users can traverse
    fx = LocalFunctions(base, name="peek")
    with fx:
        fx.state.functions = fx.server.record()
        token = fx.scheduler
        assert _stop(fx.url, token, [fx.groups[0].id]).status_code == 200
        assert fx.server.proc is not None
        proc = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "/usr/bin/python3", "-I", "-c", PEEK, str(fx.state.dir), str(fx.server.proc.pid)],
            capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["uid"] == NOBODY
    secrets_seen = {fx.secret, fx.server.session, token.rsplit(".", 1)[1]}
    assert not secrets_seen & set(got["found"]), f"another user found a secret in {got['read']}"
    assert got["read"] == [f"/proc/{fx.server.proc.pid}/cmdline"], got["read"]
    assert json.loads((fx.state.dir / "functions.json").read_text())["session"] == fx.server.session
    assert token not in (fx.state.dir / "logs" / "functions.log").read_text()  # no token logged
