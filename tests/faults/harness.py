"""Fault injection on the local cloud: one sweep run by the real `spotbench run`, faults
delivered from outside (signals, HTTP, mounts), and the checks every scenario shares.

Used by `tests/faults/test_faults.py` (assertions) and `bench/faults.py` (figures), so the
figures the bench prints are the ones the tests hold to.

What the checks mean:
- rows lost: a workload that logged "stored N records at PATH" whose file does not hold
  N rows, plus records a workload could not store and did not write to its log either
  (a workload that cannot store prints its records to the log as JSON lines: kept, not lost);
- rows duplicated: a (group, metric, size) measured twice in one attempt, or a group with
  more than one complete attempt in a run;
- leaked processes: any process of the sweep (its supervisors, workloads, MPI ranks, its
  functions server) still alive after `spotbench run` returned.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from spotbench.auth.local import scheduler_token
from spotbench.clouds.base import ACTIVE, Instance, State
from spotbench.clouds.local.cloud import LocalCloud
from spotbench.localrun.scheduler import post
from spotbench.clouds.local.state import LocalState
from spotbench.results import ResultStore
from spotbench.retries import RETRY_SCALE_ENV

BIN = Path(sys.executable).parent
GRACE_S = 2
EXIT_INCOMPLETE = 3
# two members, latency only up to 64 B: a group is over in a second or two
TINY_OSU = {"name": "osu", "benchmarks": ["latency"], "max_size": 64, "iterations": 200,
            "iterations_large": 10, "warmup": 10, "warmup_large": 1}
STORED = re.compile(r"stored (\d+) records at (\S+) \(preempted=")
NOT_STORED = re.compile(r"results NOT stored .*; the (\d+) records follow as JSON lines")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, poll: float = 0.05) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


@dataclass
class FaultSweep:
    """A local sweep under `root`, run with the real CLI."""

    root: Path
    name: str
    trials: int = 2
    deadline: str = "2m"
    concurrency: int | None = None
    results: Path | None = None
    osu: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] | None = None  # another workload's config instead of TINY_OSU + osu
    env: dict[str, str] = field(default_factory=dict)  # more environment for the run (and its members)
    retry_scale: float | None = None  # SPOTBENCH_RETRY_SCALE for the run (None: normal waits)
    proc: subprocess.Popen | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.results = self.results or self.root / "results"
        spec: dict[str, Any] = {"name": self.name, "cloud": "local", "trials": self.trials,
                                "deadline": self.deadline, "results": str(self.results),
                                "workload": self.workload or {**TINY_OSU, **self.osu}}
        if self.concurrency is not None:
            spec["concurrency"] = self.concurrency
        self.spec_path = self.root / f"{self.name}.yaml"
        self.spec_path.write_text(yaml.safe_dump(spec))

    # ---- the runner ----------------------------------------------------------------------
    def run(self) -> subprocess.Popen:
        env = {**os.environ, "SPOTBENCH_STATE_ROOT": str(self.root / "state"),
               "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "SPOTBENCH_GRACE_S": str(GRACE_S),
               **self.env}
        env.pop("SPOTBENCH_RUN", None)
        if self.retry_scale is not None:
            env[RETRY_SCALE_ENV] = str(self.retry_scale)
        self.proc = subprocess.Popen([str(BIN / "spotbench"), "run", str(self.spec_path), "--no-report"],
                                     env=env, cwd=self.root, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        return self.proc

    def finish(self, timeout: float = 180) -> tuple[int, str]:
        assert self.proc is not None
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise AssertionError(f"spotbench run did not end within {timeout:g}s:\n{out}") from None
        return self.proc.returncode, out

    def kill_runner(self) -> None:
        """SIGKILL `spotbench run` if it still runs (a scenario's cleanup after a failure)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()

    # ---- what there is -----------------------------------------------------------------
    @property
    def state(self) -> LocalState:
        return LocalState(self.name, self.root / "state")

    @property
    def cloud(self) -> LocalCloud:
        return LocalCloud(self.state.db_path, grace_s=GRACE_S, log_dir=self.state.dir / "logs")

    @property
    def store(self) -> ResultStore:
        return ResultStore(f"file://{self.results}")

    def instances(self, **labels: str) -> list[Instance]:
        if not self.state.db_path.exists():
            return []
        return self.cloud.query({"spotbench-sweep": self.name,
                                 **{f"spotbench-{k}": v for k, v in labels.items()}})

    def running(self, role: str) -> Instance | None:
        return next((i for i in self.instances(role=role) if i.state == State.RUNNING), None)

    def pid_of(self, inst: Instance) -> int:
        from contextlib import closing

        from spotbench.clouds.local import db

        with closing(db.connect(self.state.db_path)) as conn:
            row = db.get(conn, inst.name)
        assert row is not None and row.pid, f"{inst.name} has no process"
        return row.pid

    def group_off(self, group: str) -> bool:
        return all(i.state not in ACTIVE for i in self.instances(group=group))

    def scheduler_post(self, path: str, body: dict) -> dict:
        return post(self.state.functions["url"] + path, scheduler_token(self.state.secret(), self.state.functions["session"]), body)

    # ---- faults --------------------------------------------------------------------------
    def kill_member(self, role: str, sig: signal.Signals, timeout: float = 90) -> dict[str, Any]:
        """Signal a member the moment it runs; time until its whole group is off."""
        inst = wait_for(lambda: self.running(role), timeout, f"a running {role}")
        group = inst.group()
        assert group is not None
        os.kill(self.pid_of(inst), sig)
        hit = time.monotonic()
        wait_for(lambda: self.group_off(group), 30, f"group {group} off after {sig.name} to its {role}",
                 poll=0.02)
        fault = {"fault": f"{sig.name} to {role}", "group": group,
                 "detect_s": round(time.monotonic() - hit, 3)}
        self.faults.append(fault)
        return fault

    # ---- checks --------------------------------------------------------------------------
    def logs(self) -> str:
        logs = self.state.dir / "logs"
        return "".join(p.read_text(errors="replace") for p in sorted(logs.glob("*.log"))) if logs.exists() else ""

    def rows(self) -> dict[str, int]:
        """Rows lost and duplicated (see the module doc)."""
        logs = self.logs()
        lost = 0
        for n, path in STORED.findall(logs):
            p = Path(path.removeprefix("file://")) if path.startswith("file://") else Path(path)
            have = sum(1 for line in p.read_text().splitlines() if line.strip()) if p.exists() else 0
            lost += max(0, int(n) - have)
        duplicated = 0
        store = self.store
        for info in store.runs():
            complete = Counter(a.group for a in store.attempts(info.run)
                               if not a.preempted and a.key not in store.flags(info.run))
            duplicated += sum(n - 1 for n in complete.values() if n > 1)
            for path in store.fs.glob(store.path("runs", info.run, "*.jsonl")):
                seen: Counter = Counter()
                for line in store.fs.cat_file(path).decode().splitlines():
                    if line.strip():
                        rec = json.loads(line)
                        seen[(rec["metric"], rec["metadata"].get("size_bytes"))] += 1
                duplicated += sum(n - 1 for n in seen.values() if n > 1)
        return {"rows_lost": lost, "rows_duplicated": duplicated,
                "rows_logged_not_stored": sum(int(n) for n in NOT_STORED.findall(logs))}

    def leaked(self) -> list[str]:
        """Processes of this sweep still alive (supervisors, workloads, ranks, functions):
        matched by this sweep's own state folder and results folder, not by its name, so
        another sweep of the same name elsewhere on the machine is not counted."""
        state_dir = str(self.state.dir)
        out = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            if proc.pid == os.getpid():
                continue
            try:
                cmd = " ".join(proc.info["cmdline"] or [])
                env = proc.environ()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
            except psutil.NoSuchProcess:
                continue
            if (state_dir in cmd or env.get("SPOTBENCH_STATE_DIR") == state_dir
                    or env.get("SPOTBENCH_RESULTS_URL", "").endswith(str(self.results))):
                out.append(f"{proc.pid} {cmd[:120]}")
        return out


def close_figures(sw: FaultSweep, rc: int, out: str, **extra: Any) -> dict[str, Any]:
    """What every scenario returns once `spotbench run` ended (see scenarios.py)."""
    leaked = free_after(GRACE_S + 3, sw.leaked)
    return {"faults": sw.faults, "rc": rc, "states": summary_states(out), **sw.rows(),
            "leaked": leaked, "open_runs": [r.run for r in sw.store.runs() if r.closed_at is None],
            "output": out[-3000:], **extra}


def free_after(seconds: float, check: Callable[[], list[str]]) -> list[str]:
    """Leaked processes, giving stragglers `seconds` to finish exiting."""
    end = time.monotonic() + seconds
    while True:
        left = check()
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.2)


def summary_states(out: str) -> dict[str, str]:
    """Each group's final state as `spotbench run` printed it."""
    states = {}
    for line in out.splitlines():
        m = re.search(r"(\S+-t\d+)\s*│\s*(complete|incomplete: [a-z ]+|refused: .*?)\s*│", line)
        if m:
            states[m.group(1)] = m.group(2).strip()
    return states


def mounted(path: Path) -> bool:
    return any(p.mountpoint == str(path) for p in psutil.disk_partitions(all=True))


def mount(*args: str, attempts: int = 3) -> None:
    """`mount ARGS`, tried again briefly when it fails (exit 32 seen once under a parallel
    suite, while another worker's test mounted and unmounted its own folder); the last
    failure is raised with mount's own words."""
    for attempt in range(attempts):
        proc = subprocess.run(["mount", *args], capture_output=True, text=True)
        if proc.returncode == 0:
            return
        if attempt + 1 < attempts:
            time.sleep(0.5)
    raise RuntimeError(f"mount {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def can_mount(tmp: Path) -> str | None:
    """None if this process may mount (root with CAP_SYS_ADMIN), else why not."""
    probe = tmp / "mount-probe"
    probe.mkdir(exist_ok=True)
    try:
        mount("-t", "tmpfs", "-o", "size=16k", "tmpfs", str(probe), attempts=1)
    except (RuntimeError, FileNotFoundError) as exc:
        return f"cannot mount here ({exc})"
    umount(probe)
    return None
