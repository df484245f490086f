"""A container command that cannot start, exits non-zero or reports nothing has FAILED:
one `failed` marker with the reason and its stderr's tail, never an `exit_code` value;
a JSON metric line on stdout is a metric like `name=value unit` (issue #27, item 1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spotbench import failures
from workloads.container.__main__ import execute
from workloads.container.descriptor import ContainerParams
from tests.workloads.container.test_metrics import FakeRun


def _run(tmp_path: Path, command: list[str]) -> tuple[int, FakeRun]:
    run = FakeRun()
    return execute(run, ContainerParams(command=command), tmp_path), run


def _marker(run: FakeRun) -> dict:
    marks = [meta for metric, _, unit, meta in run.records if metric == "failed" and unit == "flag"]
    assert len(marks) == 1, run.records
    return marks[0]


def test_exit_1_is_a_failure_with_the_tail_of_its_stderr(tmp_path: Path):
    code = ("import sys; print('score=3 pts'); "
            "[print(f'noise {i}', file=sys.stderr) for i in range(40)]; "
            "print('boom: missing input file', file=sys.stderr); sys.exit(1)")
    assert _run(tmp_path, [sys.executable, "-c", code])[0] == 1
    run = _run(tmp_path, [sys.executable, "-c", code])[1]
    mark = _marker(run)
    assert mark["failure"] == "the command exited with code 1" and mark["exit_code"] == 1
    tail = mark["stderr_tail"].splitlines()
    assert tail[-1] == "boom: missing input file" and len(tail) == failures.TAIL_LINES
    assert "exit_code" not in {metric for metric, *_ in run.records}
    # what it did print is kept, marked as part of a failed attempt (never averaged)
    assert ("score", 3.0, "pts") in [r[:3] for r in run.records]
    assert all(failures.is_failure(meta) for *_, meta in run.records)


def test_a_command_that_does_not_exist_is_a_failure(tmp_path: Path):
    code, run = _run(tmp_path, ["/nonexistent/bench", "--fast"])
    assert code == 127
    mark = _marker(run)
    assert "cannot run '/nonexistent/bench'" in mark["failure"]
    assert "No such file or directory" in mark["stderr_tail"]
    assert [r[0] for r in run.records] == ["failed"]


def test_exit_0_without_a_metric_is_a_failure(tmp_path: Path):
    code, run = _run(tmp_path, [sys.executable, "-c", "print('all good, no numbers')"])
    assert code == 0
    assert "reported no metric" in _marker(run)["failure"]


def test_a_json_metric_line_on_stdout_counts(tmp_path: Path):
    code = ('import json; print(json.dumps({"metric": "lat", "value": 2.5, "unit": "us", '
            '"labels": {"size": 8}})); print(json.dumps({"level": "info", "msg": "a log line"}))')
    rc, run = _run(tmp_path, [sys.executable, "-c", code])
    assert rc == 0
    assert run.records == [("lat", 2.5, "us", {"labels": {"size": 8}})]


@pytest.mark.parametrize("line", ['{"metric": "lat", "value": "fast"}', '{"metric": ""}'])
def test_a_broken_json_metric_on_stdout_is_reported(tmp_path: Path, line: str):
    rc, run = _run(tmp_path, [sys.executable, "-c", f"print({line!r}); print('x=1')"])
    assert rc == 0 and run.records == [("x", 1.0, "", {"labels": {}})]
    assert run.raws["problems.txt"].startswith("stdout:1: ")


def test_failures_reads_the_marker_and_a_later_success_wins():
    class R:
        def __init__(self, group, metric, meta, preempted=False, run="r1"):
            self.run, self.group, self.metric, self.metadata, self.preempted = run, group, metric, meta, preempted

    bad = {"failure": "the command exited with code 1", "stderr_tail": "a\nb", "exit_code": 1}
    found = failures.failures([R("g1", "failed", bad), R("g2", "failed", bad), R("g2", "x", {}),
                               R("g3", "failed", bad, preempted=True)])
    assert list(found) == [("r1", "g1")]
    assert found["r1", "g1"].line() == "g1 failed: the command exited with code 1 (last stderr line: b)"
