"""Build and run the `mpiexec` command of one OSU benchmark between the group's two members.

    hosts   = [<launcher's own address>, <peer member name>]   (hydra forks rank 0 locally)
    local   : -launcher rsh -launcher-exec <bridge script>     → the peer's exec agent
    gcp/aws : -launcher ssh -launcher-exec <ssh wrapper>       → the peer's sshd on 2222

`run_streaming` hands each stdout line to a callback as it arrives (rows are recorded while
the benchmark runs), enforces a timeout, and watches the peer: if its port stops answering
(its instance was stopped or killed) mpiexec is ended and the outcome says "peer lost".
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spotbench.member import MemberContext, Peer
from spotbench.timed import Window
from workloads.osu.descriptor import OsuParams
from workloads.osu import cbuild, ssh
from workloads.osu.agent import kill_tree
from workloads.osu.bridge import LOST
from workloads.osu.harness import sizes

log = logging.getLogger("spotbench.osu")

C_BINARIES = {"latency": "osu_latency", "bibw": "osu_bibw"}


@dataclass(frozen=True)
class Transport:
    launcher: str  # hydra launcher name: rsh | ssh
    launcher_exec: str  # the program hydra runs as `<exec> <host> <proxy command…>`
    hosts: list[str]


def transport(ctx: MemberContext, workdir: Path) -> Transport:
    peer = ctx.peers("peer")[0]
    mode = os.environ.get("SPOTBENCH_OSU_TRANSPORT") or ("agent" if ctx.shares_host else "ssh")
    hosts = [ctx.me.host, peer.name]
    if mode == "agent":
        script = workdir / "bridge"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m workloads.osu.bridge "$@"\n')
        script.chmod(0o755)
        return Transport("rsh", str(script), hosts)
    wrapper = ssh.launcher_client_from_env(workdir, {peer.name: (peer.host, peer.port)})
    return Transport("ssh", str(wrapper), hosts)


def mpiexec() -> str:
    found = shutil.which("mpiexec") or str(Path(sys.executable).with_name("mpiexec"))
    if not Path(found).exists():
        raise FileNotFoundError("mpiexec not found: install the `mpich` wheel (pip install mpich) "
                                "or put MPICH's bin directory on PATH")
    return found


def c_binary(benchmark: str) -> str | None:
    return shutil.which(C_BINARIES[benchmark])


def choose(implementation: str, benchmark: str) -> str:
    """What runs this benchmark, per the spec's `implementation`:

    osu-c        OSU's own binaries on PATH (the images/mpi image has them)
    spotbench-c  spotbench's C harness (workloads/osu/c), built with the venv's mpicc
    mpi4py       the Python harness: the fallback where no compiler is present

    `auto` takes the first available in that order."""
    if implementation == "mpi4py":
        return "mpi4py"
    if c_binary(benchmark):
        return "osu-c"
    if implementation == "osu-c":
        raise FileNotFoundError(f"{C_BINARIES[benchmark]} is not on PATH: use the images/mpi image "
                                "or set implementation: auto / mpi4py")
    if cbuild.harness_binary() is not None:
        return "spotbench-c"
    return "mpi4py"


def program(benchmark: str, params: OsuParams, source: str) -> list[str]:
    lat = benchmark == "latency"
    iters, warm = (params.iterations, params.warmup) if lat else (params.bw_iterations, params.bw_warmup)
    if source == "osu-c":  # OSU's -i/-x apply to every size
        args = [c_binary(benchmark) or C_BINARIES[benchmark], "-m", f"{0 if lat else 1}:{params.max_size}",
                "-i", str(iters), "-x", str(warm)]
        return args if lat else [*args, "-W", str(params.window)]
    iters_l, warm_l = ((params.iterations_large, params.warmup_large) if lat
                       else (params.bw_iterations_large, params.bw_warmup_large))
    if source == "spotbench-c":
        exe = cbuild.harness_binary()
        if exe is None:
            raise FileNotFoundError("spotbench's C OSU harness is not built (no mpicc?)")
        head = [str(exe), benchmark]
    else:
        head = [sys.executable, "-m", "workloads.osu.harness", benchmark]
    return [*head, "-m", str(params.max_size),
            "-i", str(iters), "--iterations-large", str(iters_l), "-x", str(warm),
            "--warmup-large", str(warm_l), "-W", str(params.window),
            "--large-size", str(params.large_size)] + (
                ["--stall-s", str(params.stall_s)] if params.stall_s else []) + (
                ["--inject-delay-us", str(params.demo_inject_delay_us)]
                if lat and params.demo_inject_delay_us else [])


STALL = re.compile(r"^spotbench-stall size=(\d+) rank=(\d) gap_s=([0-9.]+) clock_skew_s=([0-9.]+)\s*$",
                   re.MULTILINE)


TIMED = re.compile(r"^spotbench-timed size=(\d+) from=([0-9.]+) to=([0-9.]+)\s*$", re.MULTILINE)


def timed_windows(stderr: str) -> dict[int, Window]:
    """The harness's `spotbench-timed` lines: each size's timed loop on the wall clock."""
    return {int(size): Window.between(float(start), float(end)) for size, start, end in TIMED.findall(stderr)}


def stalls(stderr: str) -> list[dict[str, float]]:
    """The harness's stall lines (`--stall-s`): one per size and rank that stalled."""
    return [{"size_bytes": int(size), "rank": int(rank), "gap_s": float(gap), "clock_skew_s": float(skew)}
            for size, rank, gap, skew in STALL.findall(stderr)]


def counts(benchmark: str, params: OsuParams, source: str, size: int) -> tuple[int, int]:
    """(iterations, warm-up) used for `size`."""
    lat = benchmark == "latency"
    large = size > params.large_size and source != "osu-c"  # OSU's -i/-x apply to every size
    if lat:
        return (params.iterations_large, params.warmup_large) if large else (params.iterations, params.warmup)
    return (params.bw_iterations_large, params.bw_warmup_large) if large else (params.bw_iterations, params.bw_warmup)


def command(t: Transport, prog: list[str]) -> list[str]:
    return [mpiexec(), "-launcher", t.launcher, "-launcher-exec", t.launcher_exec,
            "-hosts", ",".join(t.hosts), "-n", "2", "-ppn", "1", *prog]


def timeout_for(benchmark: str, params: OsuParams) -> float:
    """A hang guard, far above any sane run: 60 s + 5× a slow-network estimate."""
    if os.environ.get("SPOTBENCH_OSU_TIMEOUT"):
        return float(os.environ["SPOTBENCH_OSU_TIMEOUT"])
    est = 0.0
    for size in sizes(0 if benchmark == "latency" else 1, params.max_size):
        n, w = counts(benchmark, params, "mpi4py", size)
        per = 2 * (50e-6 + size / 50e6)
        est += (n + w) * (per if benchmark == "latency" else per * params.window)
    return 60.0 + 5 * est


def port_open(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def peer_answers(peer: Peer, tries: int = 6, pause: float = 0.5) -> bool:
    """Is the peer still there? A dying instance may take a moment to close its port."""
    for i in range(tries):
        if not port_open(peer.host, peer.port):
            return False
        if i + 1 < tries:
            time.sleep(pause)
    return True


PEER_BOOT_S = 600.0  # how long a launcher waits for its peer's VM to boot (the deadline caps it)


def wait_for_peer(peer: Peer, timeout: float = PEER_BOOT_S, interval: float = 1.0) -> bool:
    """Block until the peer's port answers (members' VMs boot at different times; mpiexec
    started before the peer's sshd would be called a lost peer). False after `timeout`."""
    deadline = time.monotonic() + timeout
    while not port_open(peer.host, peer.port):
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


@dataclass
class Outcome:
    rc: int
    stderr: str
    reason: str | None  # None: finished · "peer lost" · "timeout" · "mpiexec failed (rc N)"


def run_streaming(cmd: list[str], on_line: Callable[[str], None], *, timeout: float,
                  peer: Peer | None = None, poll: float = 1.0) -> Outcome:
    """Run `cmd`, feeding stdout lines to `on_line`. Always leaves no child behind: on any
    exception (a SIGTERM's `Preempted`, a parse error) mpiexec and its ranks are killed."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                text=True, bufsize=1)
        flagged: list[str] = []
        finished = threading.Event()

        def watchdog() -> None:
            deadline, misses = time.monotonic() + timeout, 0
            while not finished.wait(poll):
                if time.monotonic() > deadline:
                    flagged.append("timeout")
                elif peer is not None:
                    misses = 0 if port_open(peer.host, peer.port) else misses + 1
                    if misses >= 2:
                        flagged.append("peer lost")
                if flagged:
                    log.warning("%s: ending mpiexec", flagged[0])
                    kill_tree(proc.pid)
                    return

        threading.Thread(target=watchdog, daemon=True).start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                on_line(line)
            rc = proc.wait()
        finally:
            finished.set()
            if proc.poll() is None:
                kill_tree(proc.pid)
        err.seek(0)
        stderr = err.read()
    reason = None
    if flagged:
        reason = flagged[0]
    elif rc != 0:
        gone = LOST in stderr or (peer is not None and not peer_answers(peer))
        reason = "peer lost" if gone else f"mpiexec failed (rc {rc})"
    return Outcome(rc, stderr, reason)
