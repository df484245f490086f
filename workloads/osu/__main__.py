"""`python -m workloads.osu`: one member of an OSU group (role from SPOTBENCH_CONTEXT).

peer (rank 1)      serves the launcher until its instance is stopped: the exec agent on the
                   local cloud, sshd on gcp/aws. Stores nothing; SIGTERM → exit 0.
launcher (rank 0)  runs each benchmark of `params.benchmarks` with mpiexec across both
                   members, records one Result per message size as rows arrive, stores the
                   raw OSU text beside them, then calls `done` (which stops the group).
                   A rank whose loop stalled longer than `stall_s` (the harness's heartbeat,
                   a SIGSTOP or a paused VM) makes the attempt contaminated (retried).
                   SIGTERM, a lost peer or a timeout → what was measured is stored with
                   preempted=true (metadata `interrupted` says why) and done is still called
                   (on SIGTERM too: the peer must not bill until the deadline). A store that
                   cannot be written does not skip done either.

Exit codes: 0 finished or preempted/peer lost (results stored), 1 the benchmark failed or
its results could not be stored, 143 SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from spotbench.member import MemberContext
from spotbench.results import StoreError
from workloads.osu.descriptor import OsuParams
from workloads.common import WorkloadRun, exit_if_outside_run
from workloads.osu import agent, launch, ssh
from workloads.osu.parse import OsuParseError, OsuStream

log = logging.getLogger("spotbench.osu")


def mpi_library_version() -> str:
    try:
        import mpi4py

        mpi4py.rc.initialize = False  # only ask the library, do not start MPI here
        from mpi4py import MPI

        return MPI.Get_library_version().strip().splitlines()[0].strip()
    except Exception as exc:  # noqa: BLE001 - metadata only
        return f"unknown ({exc})"


def peer(ctx: MemberContext) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    mode = os.environ.get("SPOTBENCH_OSU_TRANSPORT") or ("agent" if ctx.shares_host else "ssh")
    if mode == "agent":
        agent.serve(ctx.me.host, ctx.me.port, ctx.name, stop)
        return 0
    with tempfile.TemporaryDirectory(prefix="spotbench-sshd-") as tmp:
        sshd = ssh.peer_sshd_from_env(Path(tmp), ctx.me.port)
        log.info("sshd for %s listening on port %d", ctx.name, ctx.me.port)
        while not stop.wait(0.5):
            if sshd.poll() is not None:
                log.error("sshd exited with %s; see %s/sshd.log", sshd.returncode, tmp)
                return 1
        agent.kill_tree(sshd.pid)
    return 0


def _bench(run: WorkloadRun, t: launch.Transport, params: OsuParams, benchmark: str,
           mpi_version: str) -> str | None:
    """Run one benchmark, recording rows as they come; returns why it was cut short."""
    delayed = benchmark == "latency" and params.demo_inject_delay_us > 0
    source = launch.choose("mpi4py" if delayed else params.implementation, benchmark)
    cmd = launch.command(t, launch.program(benchmark, params, source))
    log.info("%s via %s: %s", benchmark, source, " ".join(cmd))
    stream, lines = OsuStream(), []
    raw_name = f"osu_{benchmark}.txt"

    def on_line(line: str) -> None:
        lines.append(line)
        run.raw(raw_name, "".join(lines))
        row = stream.feed(line)
        if row is None:
            return
        size, value = row
        out = stream.out
        assert out is not None
        iters, warm = launch.counts(benchmark, params, source, size)
        meta = {"benchmark": benchmark, "size_bytes": size, "iterations": iters, "warmup": warm,
                "source": source, "osu_version": out.version, "mpi_library": mpi_version}
        if benchmark == "bibw":
            meta["window"] = params.window
        if delayed:  # never mistaken for a real measurement
            meta["injected_delay_us"] = params.demo_inject_delay_us
        run.record(benchmark, value, out.unit, **meta)

    peer_member = run.ctx.peers("peer")[0]
    try:
        outcome = launch.run_streaming(cmd, on_line, timeout=launch.timeout_for(benchmark, params),
                                       peer=peer_member)
    except OsuParseError as exc:
        # a rank lost mid-run makes mpiexec print its own error text among the rows
        if not launch.peer_answers(peer_member):
            return "peer lost"
        return f"unparseable {benchmark} output: {exc}"
    tool_stderr = launch.TIMED.sub("", outcome.stderr)  # the timed windows are spotbench's, below
    if tool_stderr.strip():
        run.raw(f"osu_{benchmark}.stderr.txt", tool_stderr)
    windows = launch.timed_windows(outcome.stderr)  # each size's timed loop
    for size, window in windows.items():
        run.retime(window, benchmark=benchmark, size_bytes=size)
    for stall in launch.stalls(outcome.stderr):  # the harness loops' heartbeat
        run.stalled(f"{benchmark} rank {stall['rank']} at {stall['size_bytes']} B",
                    max(stall["gap_s"], stall["clock_skew_s"]), window=windows.get(stall["size_bytes"]),
                    benchmark=benchmark,
                    size_bytes=stall["size_bytes"], rank=stall["rank"], loop_gap_s=stall["gap_s"],
                    clock_skew_s=stall["clock_skew_s"])
    if outcome.reason:
        log.warning("%s cut short: %s\n%s", benchmark, outcome.reason, outcome.stderr[-2000:])
        return outcome.reason
    try:
        stream.result()
    except OsuParseError as exc:
        # mpiexec may exit 0 with half the rows when the peer's proxy is killed: ask the peer
        if not launch.peer_answers(peer_member):
            return "peer lost"
        return f"incomplete {benchmark} output: {exc}"
    return None


def launcher(run: WorkloadRun) -> int:
    params = OsuParams.model_validate(run.ctx.params)
    interrupted: str | None = None
    stored = True
    with run.preemptible(call_done=True):
        with tempfile.TemporaryDirectory(prefix="spotbench-osu-") as tmp:
            t = launch.transport(run.ctx, Path(tmp))
            mpi_version = mpi_library_version()
            if not launch.wait_for_peer(run.ctx.peers("peer")[0]):
                interrupted = "peer lost"  # never booted: the group is retried whole
                log.warning("the peer never answered within %.0f s", launch.PEER_BOOT_S)
            for benchmark in params.benchmarks if interrupted is None else ():
                interrupted = _bench(run, t, params, benchmark, mpi_version)
                if interrupted:
                    break
        try:
            run.finish(preempted=interrupted is not None,
                       **({"interrupted": interrupted} if interrupted else {}))
        except StoreError:
            stored = False  # logged with the records; done still stops the group
        run.done_quietly()
    failed = interrupted is not None and interrupted not in ("peer lost", "timeout")
    if failed:
        log.error("benchmark failed: %s", interrupted)
    return 1 if failed or not stored else 0


def main() -> int:
    ctx = MemberContext.from_env()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    exit_if_outside_run(ctx)
    if ctx.role == "peer":
        return peer(ctx)
    if ctx.role == "launcher":
        return launcher(WorkloadRun.from_env())
    print(f"osu: unknown role {ctx.role!r} (expected launcher or peer)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
