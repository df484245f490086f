"""The container workload reads what a command reports: JSON lines and `name=value unit`."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

from spotbench.spec import SpecError, load_spec
from workloads.common import Preempted
from workloads.container import metrics
from workloads.container.__main__ import execute
from workloads.container.descriptor import ContainerParams


def test_stdout_lines():
    text = "warming up\nlatency=1.5 us\n  events_per_s = 2e3 events/s \nratio=-.25\nx=1 2 3\n=4\n"
    assert metrics.from_stdout(text) == [
        metrics.Metric("latency", 1.5, "us"),
        metrics.Metric("events_per_s", 2000.0, "events/s"),
        metrics.Metric("ratio", -0.25, ""),
    ]


def test_json_lines_with_labels_and_problems(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text(
        '{"metric": "lat", "value": 2, "unit": "ms", "labels": {"size": 8}}\n\n'
        '{"metric": "lat", "value": "fast"}\n'
        "not json\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.jsonl").write_text('{"metric": "bw", "value": 1.5e9}\n{"value": 1}\n')
    (tmp_path / "ignored.txt").write_text('{"metric": "no", "value": 1}\n')
    found, problems = metrics.from_folder(tmp_path)
    assert found == [metrics.Metric("lat", 2.0, "ms", {"size": 8}), metrics.Metric("bw", 1.5e9, "")]
    assert problems == [
        "a.jsonl:3: 'value' must be a finite number, got 'fast'",
        "a.jsonl:4: not JSON: Expecting value",
        "sub/b.jsonl:2: 'metric' must be a non-empty string",
    ]


@pytest.mark.parametrize("bad", ['{"metric": "x", "value": true}', '{"metric": "x", "value": NaN}',
                                 '{"metric": "x", "value": 1, "labels": [1]}', "[1]"])
def test_json_line_rejects(bad: str):
    with pytest.raises(ValueError):
        metrics.from_json_line(bad)


def test_spec_command_string_is_split_like_a_shell():
    spec = load_spec({"name": "c", "workload": {"name": "container", "command": "echo 'a b' c"}})
    assert spec.workload.command == ["echo", "a b", "c"]
    assert [m.role for m in spec.plan()[0].members] == ["member"]
    with pytest.raises(SpecError, match="command"):
        load_spec({"name": "c", "workload": {"name": "container", "command": []}})


class FakeRun:
    def __init__(self):
        self.records, self.raws = [], {}

    def record(self, metric, value, unit, *, timed=None, **meta):  # WorkloadRun.record's signature
        self.records.append((metric, value, unit, meta))
        self.timed = timed

    def raw(self, name, text):
        self.raws[name] = text

    def heartbeat(self, what, **kw):  # the runner's stall watch (tests/faults/test_stalls.py)
        return contextlib.nullcontext()


def _params(code: str, **kw) -> ContainerParams:
    return ContainerParams(command=[sys.executable, "-c", code], **kw)


def test_execute_reads_both_sources_and_keeps_labels(tmp_path: Path):
    run = FakeRun()
    code = ("import json, os; d = os.environ['SPOTBENCH_RESULTS_DIR']; "
            "open(d + '/m.jsonl', 'w').write(json.dumps({'metric': 'lat', 'value': 3, 'unit': 'us', "
            "'labels': {'n': os.environ['N']}}) + '\\n'); print('score=7 pts')")
    assert execute(run, _params(code, env={"N": "4"}), tmp_path) == 0
    assert run.records == [("lat", 3.0, "us", {"labels": {"n": "4"}}),
                           ("score", 7.0, "pts", {"labels": {}})]
    assert run.raws["stdout.txt"] == "score=7 pts\n"


def test_a_failing_command_keeps_its_numbers_and_says_its_exit_code(tmp_path: Path):
    # was: an `exit_code` value stored as a measurement; now a `failed` marker (issue #27)
    run = FakeRun()
    assert execute(run, _params("print('x=1 s'); raise SystemExit(3)"), tmp_path) == 3
    failure = "the command exited with code 3"
    assert run.records[0] == ("x", 1.0, "s", {"labels": {}, "exit_code": 3, "failure": failure})
    assert run.records[1][:3] == ("failed", 1.0, "flag")
    run = FakeRun()
    assert execute(run, _params("raise SystemExit(2)"), tmp_path) == 2
    assert [r[:3] for r in run.records] == [("failed", 1.0, "flag")]
    run = FakeRun()
    assert execute(run, ContainerParams(command=["/nonexistent/bench"]), tmp_path) == 127
    assert run.records[0][:3] == ("failed", 1.0, "flag")


def test_a_stop_kills_the_command_and_keeps_what_it_reported(tmp_path: Path, monkeypatch):
    run = FakeRun()
    pid_file = tmp_path / "pid"
    code = (f"import os, sys, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
            "print('early=1 s', flush=True); time.sleep(60)")

    def stop_after_first_line(line):  # stands in for the SIGTERM handler raising Preempted
        raise Preempted("signal 15")

    monkeypatch.setattr(sys.stdout, "write", stop_after_first_line)
    with pytest.raises(Preempted):
        execute(run, _params(code), tmp_path / "res")
    monkeypatch.undo()
    assert run.records == [("early", 1.0, "s", {"labels": {}, "interrupted": "stopped"})]
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        __import__("os").kill(pid, 0)


def test_freeze_rule_a_commands_values_are_timed_over_its_run(tmp_path: Path):
    """`spotbench.timed`: a user's value was timed somewhere inside the command's run, so
    that run (start to exit) is the window every value of it says."""
    import time

    run = FakeRun()
    before = time.time()
    assert execute(run, _params("import time; time.sleep(0.3); print('x=1 s')"), tmp_path) == 0
    window = run.timed
    assert window is not None and before <= window.start.timestamp() <= window.end.timestamp() <= time.time()
    assert (window.end - window.start).total_seconds() >= 0.3
