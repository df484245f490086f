"""Run the spec's command, store the metrics it reports, then ask the sweep to stop the group.

    python -m workloads.container                      # run the command here (local cloud)
    python -m workloads.container check DIR            # cloud VM, before the user's image
    python -m workloads.container collect DIR --exit-code N [--stopped]   # ... after it

On the local cloud the member runs the command itself. On a cloud VM the spec's image (the
user's, knowing nothing of spotbench) runs it between two runs of spotbench's runner image
(`images/runner`, this module): `check` leaves with `EXIT_OUTSIDE_RUN` outside an open run
and writes the run's id to DIR/run; `collect` reads what the command left in DIR
(`results/`, its `stdout.txt`) exactly as the local path does, stores it and calls `done`
(`--stopped`: the VM was being stopped, so it is stored as preempted and `done` is not called).

The runner's own heartbeat (`WorkloadRun.heartbeat`) watches the command's run: this
process or its VM stopped for longer than the threshold makes the attempt contaminated. On a
cloud VM no spotbench process lives while the user's image runs, so `check` notes the host's
monotonic and wall clocks and `collect` compares them (`clock_stall`): a VM paused meanwhile
(its monotonic clock misses the pause, its wall clock is stepped back in line) made the
attempt contaminated.

A SIGTERM (preemption, deadline) stops the command's whole process group and stores what it
had reported so far, marked preempted. A command that cannot start, exits non-zero or
reports no metric **failed**: what it did report is kept with `exit_code` and `failure` in
its metadata (never averaged or charted), plus one `failed` marker with the reason and the
tail of its stderr (`spotbench.failures`); the group ends `failed` and is not retried in
this run (the same command fails the same way).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from spotbench import failures
from spotbench.member import EXIT_OUTSIDE_RUN, MemberContext
from spotbench.results import ARTIFACTS_ENV
from spotbench.timed import Window
from workloads.common import STALL_S, Preempted, WorkloadRun, exit_if_outside_run
from workloads.container import metrics, nodes
from spotbench.workload import USER_ENV, fill_templates
from workloads.container import descriptor
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


def _record(run: WorkloadRun, found: list[metrics.Metric], timed: Window | None, **meta: object) -> None:
    for m in found:  # a user's value was timed somewhere inside the command's run: all of it
        run.record(m.metric, m.value, m.unit, timed=timed, labels=dict(m.labels), **meta)


def execute(run: WorkloadRun, params: ContainerParams, results_dir: Path,
            user_env: dict[str, str] | None = None, group_env: dict[str, str] | None = None) -> int:
    """Run the command to its end (or a SIGTERM); record its metrics; return its exit code
    (127 when it cannot be started). `user_env`: the spec's `env` in clear (default:
    `params.env`'s values); `group_env`: what the member learns of its group (`nodes`)."""
    given = user_env if user_env is not None else descriptor.user_env(params)
    env = {**os.environ, **given, "SPOTBENCH_RESULTS_DIR": str(results_dir), **(group_env or {})}
    artifacts = getattr(run, "artifacts_dir", None)  # a WorkloadRun's: its files are stored with the attempt
    if artifacts:
        env[ARTIFACTS_ENV] = artifacts
    log.info("running: %s", " ".join(params.command))
    began = time.time()
    try:
        proc = subprocess.Popen(params.command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)
    except OSError as exc:  # not found, not executable: the attempt failed
        why = f"cannot run {params.command[0]!r}: {exc.strerror or exc}"
        log.error("%s", why)
        record_reported(run, "", results_dir, 127, stderr=f"{why}\n", reason=why, timed=None)
        return 127
    lines: list[str] = []
    errors: list[str] = []
    assert proc.stdout is not None and proc.stderr is not None
    copier = threading.Thread(target=_copy, args=(proc.stderr, errors, sys.stderr), daemon=True)
    copier.start()
    try:
        with run.heartbeat(f"the runner of {params.command[0]!r}"):  # a stopped runner or VM
            for line in proc.stdout:
                lines.append(line)
                sys.stdout.write(line)  # the member's log shows the command's output
                _progress(run, line)
            code = proc.wait()
        copier.join(timeout=5)
    except Preempted:
        _stop(proc)
        record_stopped(run, "".join(lines), results_dir, Window.between(began, time.time()))
        raise
    ran = Window.between(began, time.time())
    record_reported(run, "".join(lines), results_dir, code, stderr="".join(errors), timed=ran)
    return code


def _progress(run: WorkloadRun, line: str) -> None:
    """A JSON metric line with an integer `step` label is also an intermediate value, sent
    as it comes (a search's pruner reads it: `WorkloadRun.intermediate`)."""
    if '"step"' not in line or not line.strip().startswith("{"):
        return
    try:
        m = metrics.from_json_line(line.strip())
    except ValueError:
        return
    step = m.labels.get("step")
    if isinstance(step, int) and not isinstance(step, bool):
        run.intermediate(m.metric, m.value, m.unit or "", step=step)


def _copy(stream, into: list[str], echo) -> None:  # noqa: ANN001 - text streams
    """The command's stderr, kept and shown in the member's log as it comes."""
    for line in stream:
        into.append(line)
        echo.write(line)


def record_stopped(run: WorkloadRun, text: str, results_dir: Path, timed: Window | None) -> None:
    """What a command cut short had reported (stored as preempted by the caller); `timed`:
    the command's run."""
    run.raw("stdout.txt", text)
    found, problems = metrics.from_folder(results_dir)
    found += metrics.from_stdout(text, problems)
    _record(run, found, timed, interrupted="stopped")


NO_METRIC = ("the command exited 0 but reported no metric: print `name=value unit` or a JSON "
             "line {\"metric\": …, \"value\": …} on stdout, or write JSON lines to "
             "$SPOTBENCH_RESULTS_DIR/*.jsonl")


def record_reported(run: WorkloadRun, text: str, results_dir: Path, code: int, *,
                    timed: Window | None, stderr: str = "", reason: str | None = None) -> None:
    """What a command that exited with `code` reported: its stdout `text` and the JSON lines
    under `results_dir`, timed over `timed` (the command's run; None: unknown). Exit code ≠ 0, or no metric at all, is a failure: one `failed`
    marker with the reason and the tail of `stderr` (of `text` when stderr is empty, as on a
    cloud VM where the unit writes both to one file)."""
    run.raw("stdout.txt", text)
    if stderr:
        run.raw("stderr.txt", stderr)
    found, problems = metrics.from_folder(results_dir)
    found += metrics.from_stdout(text, problems)
    if problems:
        log.warning("ignored %d malformed metric line(s):\n%s", len(problems), "\n".join(problems))
        run.raw("problems.txt", "\n".join(problems) + "\n")
    if reason is None and code:
        reason = f"the command exited with code {code}"
    elif reason is None and not found:
        reason = NO_METRIC
    meta: dict[str, object] = {"exit_code": code} if code else {}
    if reason:
        meta[failures.FAILURE_KEY] = reason
    _record(run, found, timed, **meta)
    if reason:
        tail = failures.tail(stderr if stderr.strip() else text)
        log.error("this attempt failed: %s%s", reason, f"; stderr ends:\n{tail}" if tail else "")
        run.record(failures.FAILED_METRIC, 1.0, failures.FAILED_UNIT, exit_code=code,
                   **{failures.FAILURE_KEY: reason, failures.TAIL_KEY: tail})


def _finish_and_done(run: WorkloadRun) -> None:
    run.finish()
    try:
        run.done()
    except Exception as exc:  # noqa: BLE001 - the deadline stop still ends the group
        log.error("done call failed (the group stops at its deadline): %s", exc)


def _user_env() -> dict[str, str]:
    """The spec's `env` the local cloud handed over (`USER_ENV`), taken out of this
    process's environment (the context holds the params with the values masked)."""
    raw = os.environ.pop(USER_ENV, "")
    try:
        given = json.loads(raw) if raw else {}
    except ValueError:
        given = {}
    return {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {}


def main() -> int:
    exit_if_outside_run(MemberContext.from_env())
    user_env = _user_env()
    run = WorkloadRun.from_env()
    fields = set(ContainerParams.model_fields)
    params = ContainerParams.model_validate({k: v for k, v in run.ctx.params.items() if k in fields})
    # a search's parameters (the trial's, by name) in the env's `${name}`s
    user_env = fill_templates(user_env, {k: v for k, v in run.ctx.params.items() if k not in fields})
    if run.ctx.index:
        return follow(run, params, user_env)
    with run.preemptible():
        with tempfile.TemporaryDirectory(prefix="spotbench-container-") as tmp:
            (Path(tmp) / "results").mkdir()
            code = execute(run, params, Path(tmp) / "results", user_env,
                           nodes.node_env(run.ctx, Path(tmp)))
        _finish_and_done(run)
    return 0 if code == 0 else 1


def follow(run: WorkloadRun, params: ContainerParams, user_env: dict[str, str]) -> int:
    """A member other than the leader (`nodes` > 1): the same command; exiting 0 stores
    nothing (the leader's metrics decide), exiting non-zero stores its `failed` marker and
    calls `done`, which stops the others; a SIGTERM (the group stopping) ends it quietly."""

    def on_term(signum: int, frame: object) -> None:
        raise Preempted(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    try:
        with tempfile.TemporaryDirectory(prefix="spotbench-container-") as tmp:
            (Path(tmp) / "results").mkdir()
            code = execute(run, params, Path(tmp) / "results", user_env,
                           nodes.node_env(run.ctx, Path(tmp)))
    except Preempted:
        return 143
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if code:
        log.error("member %d's command failed: the group fails and stops", run.ctx.index)
        _finish_and_done(run)
        return 1
    return 0


# ---- on a cloud VM: around the user's own image ----------------------------------------
RUN_FILE = "run"  # DIR/run: the run `check` found open, for `collect`
CLOCKS_FILE = "clocks"  # DIR/clocks: the host's monotonic and wall clocks when `check` ended
RESULTS = "results"  # DIR/results: the user's container's results folder
STDOUT = "stdout.txt"  # DIR/stdout.txt: its stdout and stderr


MULTINODE_ON_CLOUDS = (
    "container `nodes` > 1 runs on the local cloud only so far: on a cloud VM the user's image "
    "runs on docker's bridge network (kept from the VM's identity), where its peers cannot "
    "reach it; use `nodes: 1`, or a built-in workload (torch, osu) across VMs (issue #36)")


def check(folder: Path) -> int:
    """Before the user's image: leave (EXIT_OUTSIDE_RUN) unless a run is open; note its id.
    A group of `nodes` > 1 is refused here (stored as failed, the group stopped)."""
    ctx = MemberContext.from_env()
    exit_if_outside_run(ctx)
    run_id = os.environ.get("SPOTBENCH_RUN")  # set by the check (VMs boot outside runs)
    if ContainerParams.model_validate(ctx.params).nodes > 1:
        run = WorkloadRun(ctx)
        log.error("%s", MULTINODE_ON_CLOUDS)
        run.record(failures.FAILED_METRIC, 1.0, failures.FAILED_UNIT,
                   **{failures.FAILURE_KEY: MULTINODE_ON_CLOUDS, failures.TAIL_KEY: ""})
        _finish_and_done(run)
        return EXIT_OUTSIDE_RUN
    if run_id:
        (folder / RUN_FILE).write_text(run_id + "\n")
    (folder / CLOCKS_FILE).write_text(f"{time.monotonic()!r} {time.time()!r}\n")
    return 0


def clock_stall(run: WorkloadRun, folder: Path, stall_s: float = STALL_S) -> None:
    """Note a stall when the host's monotonic and wall clocks drifted apart by more than
    `stall_s` since `check` (containers share the host's clocks): the VM was paused while
    the user's command ran. No note, or one that cannot be read, checks nothing."""
    try:
        mono0, wall0 = (float(v) for v in (folder / CLOCKS_FILE).read_text().split())
    except (OSError, ValueError):
        return
    mono, wall = time.monotonic() - mono0, time.time() - wall0
    skew = abs(wall - mono)
    if skew > stall_s:
        run.stalled("the VM while the user's command ran", skew, window=Window.between(wall0, wall0 + wall),
                    clock_skew_s=round(skew, 3), monotonic_s=round(mono, 3), wall_s=round(wall, 3))


def command_window(folder: Path) -> Window | None:
    """On a cloud VM: the user's command ran between `check` (its clocks note) and now."""
    try:
        wall0 = float((folder / CLOCKS_FILE).read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return Window.between(wall0, time.time())


def collect(folder: Path, code: int, *, stopped: bool) -> int:
    """After the user's image exited with `code` (`stopped`: the VM is being stopped)."""
    run_file = folder / RUN_FILE
    if run_file.exists():  # the run this attempt started in, even if it closed meanwhile
        os.environ["SPOTBENCH_RUN"] = run_file.read_text().strip()
    run = WorkloadRun.from_env()
    stdout = folder / STDOUT
    text = stdout.read_text(errors="replace") if stdout.exists() else ""
    sys.stdout.write(text)  # the member's log shows the command's output
    results = folder / RESULTS
    clock_stall(run, folder)
    with run.preemptible():
        ran = command_window(folder)
        if stopped:
            record_stopped(run, text, results, ran)
            raise Preempted("the VM was being stopped while the command ran")
        record_reported(run, text, results, code, timed=ran)
        _finish_and_done(run)
    return 0 if code == 0 else 1


def cli(argv: list[str]) -> int:
    if not argv:
        return main()
    parser = argparse.ArgumentParser(prog="python -m workloads.container")
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("check", help="before the user's image").add_argument("dir", type=Path)
    p = sub.add_parser("collect", help="after the user's image")
    p.add_argument("dir", type=Path)
    p.add_argument("--exit-code", type=int, required=True)
    p.add_argument("--stopped", action="store_true")
    args = parser.parse_args(argv)
    if args.step == "check":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        return check(args.dir)
    return collect(args.dir, args.exit_code, stopped=args.stopped)


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
