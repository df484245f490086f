"""osu_latency / osu_bibw re-implemented with mpi4py, printing OSU's own text format.

Run by `mpiexec -n 2` as both ranks (the launcher builds the command):

    python -m workloads.osu.harness latency -m 4194304 -i 10000 -x 100 ...
    python -m workloads.osu.harness bibw -m 4194304 -i 100 -x 10 -W 64 ...

Semantics follow OSU's pt2pt sources:
- latency: ping-pong with blocking Send/Recv; sizes 0, 1, 2, 4 … max; one-way latency =
  elapsed / (2 × iterations) in µs; `warmup` iterations are run first and not timed;
  sizes above `large_size` use the *_large counts.
- bibw: sizes 1 … max; each loop both ranks post `window` Irecv then `window` Isend and
  Waitall (as osu_bibw does, no extra ack); bandwidth = size × window × 2 × loops / elapsed
  in MB/s (1 MB = 1e6 bytes); warm-up loops are not timed.
Buffers are preallocated numpy arrays (buffer-based calls, nothing pickled). Rank 0 prints
and flushes one row per size, so a run cut short still leaves well-formed partial output.
`--stall-s S`: the loops' heartbeat, as the C harness (workloads/osu/c/osu_pt2pt.c): a
`spotbench-stall size=N rank=R gap_s=G clock_skew_s=C` line on stderr per size where a
rank's loop made no progress, or its clocks drifted apart, for longer than S, and one
`spotbench-timed size=N from=EPOCH to=EPOCH` line per size: the timed loop's wall-clock
window (the window the row's value was timed over, `spotbench.timed`). Fault injection
(`SPOTBENCH_FAULT_EDGES=DIR`): rank 0 writes `DIR/osu.<benchmark>.<size>.timing` as a
size's warm-up ends, before its timed loop starts.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import time

import numpy as np

OSU_VERSION = "7.5"  # the OSU release whose output format and semantics this mirrors
TITLES = {"latency": "OSU MPI Latency Test", "bibw": "OSU MPI Bi-Directional Bandwidth Test"}
HEADERS = {"latency": "Latency (us)", "bibw": "Bandwidth (MB/s)"}


def sizes(first: int, max_size: int) -> list[int]:
    out = [0] if first == 0 else []
    size = 1
    while size <= max_size:
        out.append(size)
        size *= 2
    return out


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the process that started us (hydra's proxy) dies, so a
    killed member never leaves a rank spinning in MPI progress."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def mark_timing(benchmark: str, size: int) -> None:
    """Fault injection only: the file saying `size`'s timed loop starts now (the docstring)."""
    folder = os.environ.get("SPOTBENCH_FAULT_EDGES")
    if folder:
        with open(os.path.join(folder, f"osu.{benchmark}.{size}.timing"), "w"):
            pass


class Beat:
    """One rank's heartbeat over a size's timed loop: the longest gap between iterations on
    the monotonic clock, and how far the monotonic and wall clocks drifted apart."""

    def __init__(self, stall_s: float) -> None:
        self.on = stall_s > 0
        self.mono0 = self.last = time.monotonic()
        self.wall0 = time.time()
        self.gap = 0.0

    def __call__(self) -> None:
        if self.on:
            now = time.monotonic()
            self.gap = max(self.gap, now - self.last)
            self.last = now

    def report(self, comm, size: int, stall_s: float) -> None:
        if not self.on:
            return
        now = time.monotonic()
        mine = [max(self.gap, now - self.last), abs((time.time() - self.wall0) - (now - self.mono0))]
        if comm.Get_rank() == 0:
            sys.stderr.write(f"spotbench-timed size={size} from={self.wall0:.6f} to={time.time():.6f}\n")
        if comm.Get_rank() == 1:
            comm.send(mine, dest=0, tag=77)
            return
        for rank, (gap, skew) in enumerate([mine, comm.recv(source=1, tag=77)]):
            if gap > stall_s or skew > stall_s:
                sys.stderr.write(f"spotbench-stall size={size} rank={rank} gap_s={gap:.3f} "
                                 f"clock_skew_s={skew:.3f}\n")
        sys.stderr.flush()


def run_latency(comm, args, out) -> None:
    rank = comm.Get_rank()
    peer = 1 - rank
    sbuf = np.full(max(args.max_size, 1), ord("a"), dtype=np.uint8)
    rbuf = np.full(max(args.max_size, 1), ord("b"), dtype=np.uint8)
    from mpi4py import MPI

    for size in sizes(0, args.max_size):
        large = size > args.large_size
        iters = args.iterations_large if large else args.iterations
        skip = args.warmup_large if large else args.warmup
        smsg, rmsg = [sbuf[:size], MPI.BYTE], [rbuf[:size], MPI.BYTE]
        send, recv = comm.Send, comm.Recv
        comm.Barrier()
        t_start = 0.0
        beat = Beat(args.stall_s)
        if rank == 0:
            for i in range(iters + skip):
                if i == skip:
                    mark_timing("latency", size)
                    t_start = MPI.Wtime()
                    beat = Beat(args.stall_s)
                elif i > skip:
                    beat()
                send(smsg, peer, 1)
                recv(rmsg, peer, 1)
            elapsed = MPI.Wtime() - t_start
            beat.report(comm, size, args.stall_s)
            out(size, elapsed * 1e6 / (2.0 * iters))
            continue
        delay_s = args.inject_delay_us / 1e6  # demos and tests only: a real delay before each reply
        for i in range(iters + skip):
            if i == skip:
                beat = Beat(args.stall_s)
            elif i > skip:
                beat()
            recv(rmsg, peer, 1)
            if delay_s:
                time.sleep(delay_s)  # slept (yields the core: fair on a busy host)
            send(smsg, peer, 1)
        beat.report(comm, size, args.stall_s)


def run_bibw(comm, args, out) -> None:
    from mpi4py import MPI

    rank = comm.Get_rank()
    peer = 1 - rank
    window = args.window
    sbuf = np.full(args.max_size, ord("a"), dtype=np.uint8)
    rbuf = np.full(args.max_size, ord("b"), dtype=np.uint8)
    # rank 0 receives tag 10 and sends tag 100; rank 1 the other way round (as osu_bibw)
    rtag, stag = (10, 100) if rank == 0 else (100, 10)
    waitall = MPI.Request.Waitall
    for size in sizes(1, args.max_size):
        large = size > args.large_size
        loops = args.iterations_large if large else args.iterations
        skip = args.warmup_large if large else args.warmup
        smsg, rmsg = [sbuf[:size], MPI.BYTE], [rbuf[:size], MPI.BYTE]
        irecv, isend = comm.Irecv, comm.Isend
        comm.Barrier()
        t_start = 0.0
        beat = Beat(args.stall_s)
        for i in range(loops + skip):
            if i == skip:
                if rank == 0:
                    mark_timing("bibw", size)
                t_start = MPI.Wtime()
                beat = Beat(args.stall_s)
            elif i > skip:
                beat()
            reqs = [irecv(rmsg, peer, rtag) for _ in range(window)]
            reqs += [isend(smsg, peer, stag) for _ in range(window)]
            waitall(reqs)
        elapsed = MPI.Wtime() - t_start
        beat.report(comm, size, args.stall_s)
        if rank == 0:
            out(size, size / 1e6 * loops * window * 2 / elapsed)


def fmt_value(value: float) -> str:
    """OSU's 2 decimals, or as many as 3 significant digits of a value below 0.01 need: a
    real, positive measurement (1-byte bibw loops on a busy machine: a few kB/s) must not be
    stored as 0.00. The C harness prints the same way."""
    decimals = 2
    while 0 < value < 0.01 and value * 10**decimals < 100 and decimals < 12:
        decimals += 1
    return f"{value:.{decimals}f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workloads.osu.harness", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", choices=sorted(TITLES))
    p.add_argument("-m", "--max-size", type=int, default=4 * 1024 * 1024)
    p.add_argument("-i", "--iterations", type=int, default=None)
    p.add_argument("--iterations-large", type=int, default=None)
    p.add_argument("-x", "--warmup", type=int, default=None)
    p.add_argument("--warmup-large", type=int, default=None)
    p.add_argument("-W", "--window", type=int, default=64)
    p.add_argument("--large-size", type=int, default=8192)
    p.add_argument("--inject-delay-us", type=float, default=0.0,
                   help="DEMOS AND TESTS ONLY: rank 1 sleeps this long before each latency reply")
    p.add_argument("--stall-s", type=float, default=0.0,
                   help="report a rank's loop making no progress this long (0: off)")
    args = p.parse_args(argv)
    lat = args.benchmark == "latency"
    defaults = {"iterations": 10_000 if lat else 100, "iterations_large": 1_000 if lat else 20,
                "warmup": 100 if lat else 10, "warmup_large": 10 if lat else 2}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if min(args.iterations, args.iterations_large, args.window) < 1 or args.max_size < 1:
        p.error("iterations, window and max size must be >= 1")

    _die_with_parent()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        if comm.Get_rank() == 0:
            print("This test requires exactly two processes", file=sys.stderr)
        return 2

    def out(size: int, value: float) -> None:
        sys.stdout.write(f"{size:<10d}{fmt_value(value):>20}\n")
        sys.stdout.flush()

    if comm.Get_rank() == 0:
        sys.stdout.write(f"# {TITLES[args.benchmark]} v{OSU_VERSION}\n# Datatype: MPI_CHAR.\n")
        sys.stdout.write(f"{'# Size':<10}{HEADERS[args.benchmark]:>20}\n")
        sys.stdout.flush()
    (run_latency if lat else run_bibw)(comm, args, out)
    comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
