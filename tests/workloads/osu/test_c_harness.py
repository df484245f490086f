"""spotbench's C OSU harness: built from the project's own source with the venv's mpicc into
a cache folder, chosen by `auto` when OSU's binaries are absent, same output and counts as
the mpi4py harness; the mpi4py harness is the fallback without a compiler."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workloads.osu.descriptor import OsuParams
from tests.workloads.osu.conftest import ROOT
from workloads.osu import cbuild, launch
from workloads.osu.parse import parse


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_built_once_into_the_cache_and_rebuilt_when_the_source_changes(cache, monkeypatch, tmp_path):
    exe = cbuild.harness_binary()
    assert exe is not None and exe.is_relative_to(cache) and os.access(exe, os.X_OK)
    mtime = exe.stat().st_mtime_ns
    assert cbuild.harness_binary() == exe and exe.stat().st_mtime_ns == mtime  # cached
    changed = tmp_path / "osu_pt2pt.c"
    changed.write_text(cbuild.SOURCE.read_text() + "\n/* changed */\n")
    monkeypatch.setattr(cbuild, "SOURCE", changed)
    assert cbuild.harness_binary() not in (None, exe)


def test_no_compiler_means_the_mpi4py_fallback(cache, monkeypatch):
    monkeypatch.setattr(cbuild, "mpicc", lambda: None)
    monkeypatch.setenv("PATH", str(cache))  # no OSU binaries either
    assert cbuild.harness_binary() is None
    assert launch.choose("auto", "latency") == "mpi4py"
    bad = cache / "broken.c"
    cache.mkdir(parents=True, exist_ok=True)
    bad.write_text("int main( {")
    monkeypatch.undo()
    monkeypatch.setenv("SPOTBENCH_CACHE", str(cache))
    monkeypatch.setattr(cbuild, "SOURCE", bad)
    assert cbuild.harness_binary() is None  # a failed build falls back too, logged


def test_auto_prefers_it_and_it_prints_what_the_parser_reads(cache, monkeypatch):
    monkeypatch.setenv("PATH", f"{ROOT / '.venv' / 'bin'}{os.pathsep}/usr/bin:/bin")  # no osu_* binaries
    assert launch.choose("auto", "latency") == "spotbench-c"
    params = OsuParams(max_size=64, iterations=200, iterations_large=20, warmup=5, warmup_large=1,
                       bw_iterations=4, bw_iterations_large=2, bw_warmup=1, bw_warmup_large=1,
                       window=4, large_size=16)
    assert launch.counts("latency", params, "spotbench-c", 32) == (20, 1)  # large counts as mpi4py
    for bench in ("latency", "bibw"):
        prog = launch.program(bench, params, "spotbench-c")
        assert prog[0].startswith(str(cache)) and prog[1] == bench
        proc = subprocess.run([launch.mpiexec(), "-n", "2", *prog], capture_output=True, text=True,
                              timeout=120, cwd=ROOT, env={**os.environ})
        assert proc.returncode == 0, proc.stderr
        out = parse(proc.stdout)
        assert (out.version, out.preamble) == ("7.5", {"Datatype": "MPI_CHAR."})
        assert [s for s, _ in out.rows] == ([0] if bench == "latency" else []) + [2**k for k in range(7)]
        # a positive measurement is printed with the digits it needs, never as 0.00
        assert all(v > 0 for _, v in out.rows)


def test_setup_builds_it():
    makefile = (ROOT / "Makefile").read_text()
    assert "workloads.osu.cbuild" in makefile
    proc = subprocess.run([sys.executable, "-m", "workloads.osu.cbuild"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("osu_pt2pt"), proc.stderr
