"""How close the local OSU harness comes to a bare C ping-pong, measured in the same run.

Compiles a tiny C ping-pong + bi-directional bandwidth program (the osu_latency/osu_bibw
loops, one size per run) with the venv's `mpicc`, runs it and the harness the OSU workload
runs by default (`auto`: spotbench's C harness, workloads/osu/c, built with the same mpicc;
the mpi4py harness where no compiler is present) under `mpiexec -n 2` with identical
counts, alternating `--rounds` times and keeping each side's best, and prints JSON:

    latency_ratio_8B  = harness 8-byte latency / C      (target <= 1.3)
    bibw_ratio_1MiB   = harness 1 MiB bibw / C          (target >= 0.8)
    mpi4py_latency_ratio_8B = the Python fallback's ratio, for reference
    load_1m           = the machine's 1-minute load average when the run ended

    PATH=.venv/bin:$PATH .venv/bin/python bench/mpi_fidelity.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workloads.osu import cbuild  # noqa: E402
from workloads.osu.parse import parse  # noqa: E402

C_SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* usage: fidelity latency SIZE ITERS WARMUP | fidelity bibw SIZE LOOPS WARMUP WINDOW
   prints one OSU-format row for SIZE on rank 0 */
int main(int argc, char **argv) {
    int rank; MPI_Init(&argc, &argv); MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int lat = strcmp(argv[1], "latency") == 0;
    int size = atoi(argv[2]), iters = atoi(argv[3]), skip = atoi(argv[4]);
    int window = argc > 5 ? atoi(argv[5]) : 64, peer = 1 - rank;
    char *s = malloc(size > 0 ? size : 1), *r = malloc(size > 0 ? size : 1);
    memset(s, 'a', size > 0 ? size : 1); memset(r, 'b', size > 0 ? size : 1);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * window);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + skip; i++) {
        if (i == skip) t0 = MPI_Wtime();
        if (lat) {
            if (rank == 0) { MPI_Send(s, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                             MPI_Recv(r, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
            else { MPI_Recv(r, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                   MPI_Send(s, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD); }
        } else {
            int rt = rank == 0 ? 10 : 100, st = rank == 0 ? 100 : 10;
            for (int j = 0; j < window; j++) MPI_Irecv(r, size, MPI_CHAR, peer, rt, MPI_COMM_WORLD, &req[j]);
            for (int j = 0; j < window; j++) MPI_Isend(s, size, MPI_CHAR, peer, st, MPI_COMM_WORLD, &req[window + j]);
            MPI_Waitall(2 * window, req, MPI_STATUSES_IGNORE);
        }
    }
    double t = MPI_Wtime() - t0;
    if (rank == 0) {
        if (lat) printf("# OSU MPI Latency Test v7.5\n# Size          Latency (us)\n%-10d%20.2f\n", size, t * 1e6 / (2.0 * iters));
        else printf("# OSU MPI Bi-Directional Bandwidth Test v7.5\n# Size      Bandwidth (MB/s)\n%-10d%20.2f\n", size, size / 1e6 * iters * window * 2 / t);
    }
    MPI_Finalize(); return 0;
}
"""


def _run(cmd: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return proc.stdout


def value_at(text: str, size: int) -> float:
    return dict(parse(text).rows)[size]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lat-iters", type=int, default=20000)
    p.add_argument("--bw-loops", type=int, default=50)
    p.add_argument("--window", type=int, default=64)
    a = p.parse_args()
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    mpicc = shutil.which("mpicc", path=env["PATH"])
    mpiexec = shutil.which("mpiexec", path=env["PATH"])
    if not mpicc or not mpiexec:
        raise SystemExit("mpicc/mpiexec not found: install the `mpich` wheel into the venv")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "fidelity.c", Path(tmp) / "fidelity"
        src.write_text(C_SOURCE)
        subprocess.run([mpicc, "-O2", "-o", str(exe), str(src)], check=True, env=env)
        mib = 1 << 20
        built = cbuild.harness_binary()
        harness = [str(built)] if built else [sys.executable, "-m", "workloads.osu.harness"]
        python = [sys.executable, "-m", "workloads.osu.harness"]
        lat: dict[str, list[float]] = {"c": [], "harness": [], "mpi4py": []}
        bw: dict[str, list[float]] = {"c": [], "harness": []}
        for _ in range(a.rounds):
            lat["c"].append(value_at(_run([mpiexec, "-n", "2", str(exe), "latency", "8",
                                           str(a.lat_iters), "1000"], env), 8))
            for key, prog in (("harness", harness), ("mpi4py", python)):
                lat[key].append(value_at(_run(
                    [mpiexec, "-n", "2", *prog, "latency", "-m", "8", "-i", str(a.lat_iters),
                     "-x", "1000"], env), 8))
            bw["c"].append(value_at(_run([mpiexec, "-n", "2", str(exe), "bibw", str(mib),
                                          str(a.bw_loops), "5", str(a.window)], env), mib))
            bw["harness"].append(value_at(_run(
                [mpiexec, "-n", "2", *harness, "bibw",
                 "-m", str(mib), "-i", "1", "--iterations-large", str(a.bw_loops), "-x", "0",
                 "--warmup-large", "5", "-W", str(a.window)], env), mib))
    c_lat, h_lat, p_lat = min(lat["c"]), min(lat["harness"]), min(lat["mpi4py"])  # best of rounds
    c_bw, h_bw = max(bw["c"]), max(bw["harness"])
    print(json.dumps({
        "harness": "spotbench-c" if built else "mpi4py (no mpicc)",
        "latency_8B_us": {"c": c_lat, "harness": h_lat, "mpi4py": p_lat, "rounds": lat},
        "latency_ratio_8B": round(h_lat / c_lat, 3), "latency_target": "<= 1.3",
        "latency_ok": h_lat / c_lat <= 1.3,
        "mpi4py_latency_ratio_8B": round(p_lat / c_lat, 3),
        "bibw_1MiB_MBps": {"c": c_bw, "harness": h_bw, "rounds": bw},
        "bibw_ratio_1MiB": round(h_bw / c_bw, 3), "bibw_target": ">= 0.8",
        "bibw_ok": h_bw / c_bw >= 0.8,
        "cores": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
