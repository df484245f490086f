"""Attack: a user's command writes output that would lose its attempt (issue 38).

The user's container (the `container` workload) prints and writes what it likes. A metric
line that is malformed in a way the parser did not expect (nested past Python's recursion
limit), oversized (one line of megabytes, labels of megabytes) or a flood of big labels
must be refused alone, with a note in `problems.txt`, and every other metric kept in an
attempt file the readers still read (under `MAX_ATTEMPT_BYTES`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from spotbench.results import MAX_ATTEMPT_BYTES
from tests.security.test_data_path import member_run
from workloads.container import metrics
from workloads.container.__main__ import execute
from workloads.container.descriptor import ContainerParams

pytestmark = pytest.mark.security

HOSTILE = r"""
import json, os
d = os.environ["SPOTBENCH_RESULTS_DIR"]
with open(d + "/m.jsonl", "w") as fh:
    fh.write(json.dumps({"metric": "good", "value": 1, "unit": "us"}) + "\n")
    fh.write('{"metric": "deep", "value": 1, "labels": ' + "[" * 20000 + "]" * 20000 + "}\n")
    fh.write(json.dumps({"metric": "huge", "value": 1, "labels": {"x": "y" * 10000}}) + "\n")
    fh.write('{"metric": "long", "value": 1, "unit": "' + "u" * (8 << 20) + '"}\n')
    for i in range(3000):  # labels just under the cap: 3000 x 2 KiB would pass the file bound with the rest
        fh.write(json.dumps({"metric": "many", "value": i, "labels": {"x": "z" * 2000}}) + "\n")
    fh.write(json.dumps({"metric": "after", "value": 2, "unit": "us"}) + "\n")
    fh.write('{"metric": "wide", "value": 1, "unit": "' + "u" * (8 << 20) + '"}\n')
print('{"metric": "deep_out", "value": 1, "labels": ' + "[" * 20000 + "]" * 20000 + "}")
print("x" * (2 << 20))
print("score=7 pts")
"""


def test_container_output_a_hostile_metric_line_is_refused_alone(tmp_path: Path, monkeypatch) -> None:
    sweep, run, wr = member_run(tmp_path, monkeypatch, "container")
    group = sweep.groups[0]
    monkeypatch.setattr(sys, "stdout", open("/dev/null", "w"))  # noqa: SIM115 - the member's log
    assert execute(wr, ContainerParams(command=[sys.executable, "-c", HOSTILE]), tmp_path / "res") == 0
    monkeypatch.undo()
    path = wr.finish()
    assert sweep.store.fs.size(path) <= MAX_ATTEMPT_BYTES
    stored = sweep.store.read(run)
    names = [r.metric for r in stored]
    assert {"good", "after", "score"} <= set(names), sorted(set(names))
    assert names.count("many") >= 1000
    assert not {"deep", "huge", "long", "deep_out"} & set(names)
    problems = sweep.store.fs.cat(sweep.store.path("runs", run, f"{group.id}.1", "problems.txt")).decode()
    for why in ("nested too deeply", "'labels' take", "more than 65536 characters"):
        assert why in problems, problems


def test_container_output_a_line_is_read_no_further_than_its_bound(tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text('{"metric": "a", "value": 1}\n' + "{" * (32 << 20) + "\n"
                                      + '{"metric": "b", "value": 2}\n')
    found, problems = metrics.from_folder(tmp_path)
    assert [m.metric for m in found] == ["a", "b"]
    assert problems == [f"m.jsonl:2: a line of more than {metrics.MAX_LINE} characters"]
    assert json.loads('{"metric": "c", "value": 1}')  # the bound is the only change to valid lines
