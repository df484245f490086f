"""The OSU parser against golden raw outputs (OSU's documented text format) + expected JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.osu.descriptor import OsuParams
from workloads.osu import cbuild, launch
from workloads.osu.parse import OsuParseError, OsuStream, parse

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.txt"))
ROOT = Path(__file__).resolve().parents[3]


def test_golden_files_exist_in_pairs():
    assert len(CASES) >= 8
    for name in CASES:
        assert (GOLDEN / f"{name}.json").exists(), f"{name}.txt has no expected .json beside it"
    assert any(n.startswith("malformed") for n in CASES)


@pytest.mark.parametrize("name", CASES)
def test_golden(name):
    text = (GOLDEN / f"{name}.txt").read_text()
    expected = json.loads((GOLDEN / f"{name}.json").read_text())
    if "error" in expected:
        with pytest.raises(OsuParseError) as err:
            parse(text)
        assert expected["error"] in str(err.value)
        assert "line " in str(err.value)  # the message points at the offending line
        return
    out = parse(text, partial=expected["partial"])
    assert {"partial": expected["partial"], **out.to_dict()} == expected


def test_values_and_sizes_of_a_documented_latency_output():
    out = parse((GOLDEN / "latency_v7.3.txt").read_text())
    assert out.benchmark == "latency" and out.unit == "us" and out.version == "7.3"
    assert out.rows[0] == (1, 0.15) and out.rows[-1] == (4194304, 601.03)


def test_truncated_output_is_an_error_unless_partial():
    text = (GOLDEN / "bibw_partial_harness.txt").read_text()
    with pytest.raises(OsuParseError, match="not a number|columns"):
        parse(text + "\n3 x\n")
    assert [s for s, _ in parse(text, partial=True).rows] == [1, 2]
    with pytest.raises(OsuParseError, match="no data rows"):
        parse("# OSU MPI Latency Test v7.5\n# Size       Avg Latency(us)\n")
    with pytest.raises(OsuParseError, match="no OSU title"):
        parse("")


def test_stream_returns_rows_as_lines_arrive():
    stream = OsuStream()
    lines = (GOLDEN / "latency_v7.5.txt").read_text().splitlines(keepends=True)
    rows = [r for r in (stream.feed(line) for line in lines) if r is not None]
    assert rows[:2] == [(0, 1.12), (1, 1.15)] and stream.result().rows == rows


def test_harness_never_prints_a_positive_value_as_zero():
    """1-byte bibw with few loops on a busy machine measures a few kB/s: OSU's 2 decimals
    printed 0.00 MB/s, stored as a zero bandwidth (and failed the members test's > 0)."""
    from workloads.osu.harness import fmt_value

    assert [fmt_value(v) for v in (1.125, 0.0125, 0.004, 0.0000321, 0.0)] == [
        "1.12", "0.01", "0.00400", "0.0000321", "0.00"]
    for v in (0.004, 0.0000321, 1e-9):
        assert float(fmt_value(v)) == pytest.approx(v, rel=0.01)


def test_harness_output_parses_like_the_c_binaries(tmp_path):
    """The mpi4py harness and OSU's C output go through the same parser into the same schema."""
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    for bench, golden in [("latency", "latency_v7.5.txt"), ("bibw", "bibw_v7.5.txt")]:
        proc = subprocess.run(
            [launch.mpiexec(), "-n", "2", sys.executable, "-m", "workloads.osu.harness", bench,
             "-m", "64", "-i", "20", "-x", "2", "-W", "4"],
            capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
        assert proc.returncode == 0, proc.stderr
        mine, theirs = parse(proc.stdout), parse((GOLDEN / golden).read_text())
        assert (mine.benchmark, mine.unit, mine.version) == (theirs.benchmark, theirs.unit, "7.5")
        assert mine.preamble == theirs.preamble == {"Datatype": "MPI_CHAR."}
        expected = ([0] if bench == "latency" else []) + [2**k for k in range(7)]  # … 64
        assert [s for s, _ in mine.rows] == expected
        # a positive measurement is printed with the digits it needs, never as 0.00
        assert all(v > 0 for _, v in mine.rows)


def test_c_binaries_are_preferred_when_on_path(tmp_path, monkeypatch):
    params = OsuParams(max_size=1024, iterations=50, warmup=5, bw_iterations=7, bw_warmup=1, window=8)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(cbuild, "mpicc", lambda: None)  # no compiler either: the Python fallback
    assert launch.choose("auto", "latency") == "mpi4py"
    with pytest.raises(FileNotFoundError, match="osu_latency is not on PATH"):
        launch.choose("osu-c", "latency")
    for name in ("osu_latency", "osu_bibw"):
        exe = tmp_path / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    assert launch.choose("auto", "latency") == "osu-c"
    assert launch.choose("mpi4py", "latency") == "mpi4py"
    lat = launch.program("latency", params, "osu-c")
    assert lat == [str(tmp_path / "osu_latency"), "-m", "0:1024", "-i", "50", "-x", "5"]
    bw = launch.program("bibw", params, "osu-c")
    assert bw == [str(tmp_path / "osu_bibw"), "-m", "1:1024", "-i", "7", "-x", "1", "-W", "8"]
    harness = launch.program("bibw", params, "mpi4py")
    assert harness[1:4] == ["-m", "workloads.osu.harness", "bibw"] and "-W" in harness


def test_demo_injected_delay_really_slows_the_ping_pong():
    """DEMOS AND TESTS ONLY option: the peer waits before each reply; one-way latency grows by
    half the delay (history demo's slowdown); without it the loop is untouched."""
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}

    def latency(*extra: str) -> float:
        proc = subprocess.run(
            [launch.mpiexec(), "-n", "2", sys.executable, "-m", "workloads.osu.harness", "latency",
             "-m", "8", "-i", "300", "-x", "20", *extra],
            capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
        assert proc.returncode == 0, proc.stderr
        return dict(parse(proc.stdout).rows)[8]

    plain, slowed = latency(), latency("--inject-delay-us", "200")
    # +½ × 200 µs one way on a quiet machine; a loaded one preempts the busy-wait: more
    assert slowed - plain >= 70, (plain, slowed)
    params = OsuParams(max_size=8, demo_inject_delay_us=200)
    assert "--inject-delay-us" in launch.program("latency", params, "mpi4py")
    assert "--inject-delay-us" not in launch.program("bibw", params, "mpi4py")
    with pytest.raises(ValueError, match="demo_inject_delay_us"):
        OsuParams(implementation="osu-c", demo_inject_delay_us=5)
