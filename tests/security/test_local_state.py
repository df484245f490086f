"""Attack: another local user reads a local sweep's state and runs commands as its owner.

The sweep runs as root in a project folder others may traverse (0755, like a home
directory). The attacker step runs as uid 65534 (`setpriv`), with only the stdlib: it reads
whatever it can under `.spotbench/<sweep>/`, looks for member tokens or the secret, derives
the OSU exec-agent key, asks the agent to run `id -u`, and calls `done` over the real
functions server. Every step must fail.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from spotbench.auth.local import member_token
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.localrun.net import free_ports
from spotbench.localrun.deploy import deploy
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState
from spotbench.spec import load_spec
from workloads.osu import agent

pytestmark = pytest.mark.security

ATTACKER = Path(__file__).with_name("_attacker_local.py")
NOBODY = 65534
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def as_nobody(*args: str) -> dict:
    """Run the attacker script as uid/gid 65534 with no supplementary groups."""
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as another local user")
    proc = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         "/usr/bin/python3", "-I", "-c", ATTACKER.read_text(), *args],
        capture_output=True, text=True, timeout=60, cwd="/",
        env={"VICTIM_UID": str(os.getuid()), "VICTIM_KEYS": str(agent.runtime_dir())},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def sweep():
    base = Path(tempfile.mkdtemp(prefix="spotbench-sec-", dir="/tmp"))
    base.chmod(0o755)  # a project folder other users can traverse, as homes often are
    old_umask = os.umask(0o022)  # the usual default: spotbench must not rely on a strict one
    try:
        spec = load_spec({"name": "sec", "workload": {"name": "osu"}, "trials": 1,
                          "results": str(base / "results")})
        state = LocalState(spec.name, base / ".spotbench")
        cloud = LocalCloud(state.db_path, grace_s=1, log_dir=state.dir / "logs")
        env = {"SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": spec.model_dump_json(),
               "SPOTBENCH_RESULTS_URL": f"file://{base}/results",
               "SPOTBENCH_STATE_DIR": str(state.dir), "SPOTBENCH_GRACE_S": "1"}
        server = FunctionsServer(env, state.dir / "logs" / "functions.log").launch()
        groups = deploy(spec, state, cloud, f"{server.url}/done", f"file://{base}/results")
        cloud.deploy([LocalInstanceSpec("probe", {"spotbench-sweep": "other"}, SLEEPER, {})])
        cloud.start({"spotbench-sweep": "other"})  # a supervisor log, WAL traffic
        state.functions = {"url": server.url, "pid": server.proc.pid}
        state.update_schedule(paused=False)
        member = groups[0].members[-1].name  # the peer: it serves the exec agent
        port = free_ports(1)[0]
        stop = threading.Event()
        thread = threading.Thread(target=agent.serve, args=("127.0.0.1", port, member, stop),
                                  daemon=True)
        with server:
            thread.start()
            agent_up = agent.key_path(member)
            for _ in range(100):
                if agent_up.exists():
                    break
                threading.Event().wait(0.05)
            yield {"base": base, "state": state, "url": server.url, "port": port,
                   "member": member, "secret": state.secret()}
            stop.set()
            thread.join(10)
            cloud.stop({"spotbench-sweep": "other"})
    finally:
        os.umask(old_umask)
        shutil.rmtree(base, ignore_errors=True)


def test_another_user_reads_no_token_and_cannot_run_commands(sweep) -> None:
    got = as_nobody(str(sweep["base"] / ".spotbench"), sweep["url"], str(sweep["port"]),
                    sweep["member"])
    assert got["uid"] == NOBODY
    assert got["read"] == [], f"another user read {got['read']}"
    assert got["tokens"] == {} and got["secret"] is None
    assert all(e["code"] != 0 for e in got["exec"]), f"the attacker ran a command: {got['exec']}"
    assert got["done"] is None


def test_a_leaked_member_token_does_not_give_the_exec_agent_key(sweep) -> None:
    token = member_token(sweep["secret"], sweep["member"])
    got = as_nobody(str(sweep["base"] / ".spotbench"), sweep["url"], str(sweep["port"]),
                    sweep["member"], token)
    assert got["exec"], "the attacker should have tried the token-derived key"
    assert all(e["code"] == 255 and e["stdout"] == "" for e in got["exec"]), got["exec"]


def test_state_is_created_private(sweep) -> None:
    """Every folder 0700 and every file 0600 as created, SQLite's -wal/-shm and logs too."""
    root = sweep["base"] / ".spotbench"
    seen = set()
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        assert mode == want, f"{path} is {mode:o}, not {want:o}"
        seen.add(path.name)
    assert {"cloud.db", "cloud.db-wal", "cloud.db-shm", "secret", "functions.json",
            "schedule.json", "functions.log", "probe.log"} <= seen
