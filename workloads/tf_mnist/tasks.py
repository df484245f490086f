"""A worker member's further TF tasks (`processes_per_vm` > 1): the member's own process is
its task 0 and starts tasks 1..n-1 as child processes of the same module (same context,
`LOCAL_TASK_ENV` set), each with its own TF_CONFIG task index and port (`cluster.py`).

The children never outlive the member: each asks the kernel for SIGTERM when its parent
dies (`PR_SET_PDEATHSIG`), and they stay in the member's process group (a local instance is
stopped as a group). One exiting with an error fails the member: a watch thread stops the
others and the member exits 1, as a failed member does (its group fails and is stopped).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading

from spotbench.member import ENV_KEY, MemberContext
from workloads.tf_mnist.cluster import LOCAL_TASK_ENV, processes

log = logging.getLogger("spotbench.tf_mnist")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_EVERY_S = 0.5


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Tasks:
    """The child task processes of one member; `finish()` waits for them (their own end of
    training) and stops what is left."""

    def __init__(self, procs: dict[int, subprocess.Popen]):
        self.procs = procs
        self._finishing = threading.Event()
        self._watch = threading.Thread(target=self._run, name="tf-tasks", daemon=True)
        self._watch.start()

    def _run(self) -> None:
        while not self._finishing.wait(WATCH_EVERY_S):
            for local, proc in self.procs.items():
                code = proc.poll()
                if code and not self._finishing.is_set():
                    log.error("TF task %d of this member exited with code %d: failing the member",
                              local, code)
                    self.stop()
                    logging.shutdown()
                    os._exit(1)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    def finish(self, timeout: float = 120.0) -> int:
        """Wait for every task to end by itself (then 0, or 1 when one failed); stop those
        still running after `timeout` (1)."""
        self._finishing.set()
        failed = False
        for local, proc in self.procs.items():
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.error("TF task %d still running %.0fs after task 0 ended: stopped", local, timeout)
                code = 1
            if code:
                log.error("TF task %d exited with code %d", local, code)
                failed = True
        self.stop()
        return 1 if failed else 0


def start(ctx: MemberContext) -> Tasks | None:
    """Start this worker member's tasks 1..processes_per_vm-1 (None: it has one task)."""
    n = processes(ctx)
    if ctx.role != "worker" or n <= 1:
        return None
    env = {**os.environ, ENV_KEY: ctx.model_dump_json()}  # the trial's params, as resolved
    procs = {
        local: subprocess.Popen([sys.executable, "-m", "workloads.tf_mnist"],
                                env={**env, LOCAL_TASK_ENV: str(local)}, preexec_fn=_die_with_parent)
        for local in range(1, n)
    }
    log.info("started TF tasks 1..%d of %s (pids %s)", n - 1, ctx.name,
             [p.pid for p in procs.values()])
    return Tasks(procs)
