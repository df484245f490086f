"""Run the spec's command, store the metrics it reports, then ask the sweep to stop the group.

A SIGTERM (preemption, deadline) stops the command's whole process group and stores what it
had reported so far, marked preempted. A command that exits non-zero keeps its metrics with
`exit_code` in their metadata; one that reported nothing stores an `exit_code` value, so
the group still has a result to show (and is not started again and again).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from spotbench.member import MemberContext
from workloads.common import Preempted, WorkloadRun, exit_if_outside_run
from workloads.container import metrics
from workloads.container.descriptor import ContainerParams

log = logging.getLogger("spotbench.container")
KILL_GRACE_S = 10.0


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the command's process group, SIGKILL after a grace period."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _record(run: WorkloadRun, found: list[metrics.Metric], **meta: object) -> None:
    for m in found:
        run.record(m.metric, m.value, m.unit, labels=dict(m.labels), **meta)


def execute(run: WorkloadRun, params: ContainerParams, results_dir: Path) -> int:
    """Run the command to its end (or a SIGTERM); record its metrics; return its exit code."""
    env = {**os.environ, **params.env, "SPOTBENCH_RESULTS_DIR": str(results_dir)}
    log.info("running: %s", " ".join(params.command))
    try:
        proc = subprocess.Popen(params.command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace",
                                start_new_session=True)
    except OSError as exc:  # not found, not executable: say so as the result
        log.error("cannot run %s: %s", params.command[0], exc)
        run.raw("stdout.txt", f"cannot run {params.command!r}: {exc}\n")
        run.record("exit_code", 127.0, "code", error=str(exc))
        return 127
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            sys.stdout.write(line)  # the member's log shows the command's output
        code = proc.wait()
    except Preempted:
        _stop(proc)
        run.raw("stdout.txt", "".join(lines))
        found, _ = metrics.from_folder(results_dir)
        _record(run, found + metrics.from_stdout("".join(lines)), interrupted="stopped")
        raise
    text = "".join(lines)
    run.raw("stdout.txt", text)
    found, problems = metrics.from_folder(results_dir)
    found += metrics.from_stdout(text)
    if problems:
        log.warning("ignored %d malformed metric line(s):\n%s", len(problems), "\n".join(problems))
        run.raw("problems.txt", "\n".join(problems) + "\n")
    meta: dict[str, object] = {"exit_code": code} if code else {}
    _record(run, found, **meta)
    if not found:
        log.warning("the command reported no metric (exit code %d)", code)
        run.record("exit_code", float(code), "code")
    return code


def main() -> int:
    exit_if_outside_run(MemberContext.from_env())
    run = WorkloadRun.from_env()
    params = ContainerParams.model_validate(run.ctx.params)
    with run.preemptible():
        with tempfile.TemporaryDirectory(prefix="spotbench-container-") as tmp:
            code = execute(run, params, Path(tmp))
        run.finish()
        try:
            run.done()
        except Exception as exc:  # noqa: BLE001 - the deadline stop still ends the group
            log.error("done call failed (the group stops at its deadline): %s", exc)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
