"""`examples/tf-local.yaml` after `make demo` (no `tf` extra): the missing extra is found
before `run` and by `preflight`, named with the command that installs it, and nothing
starts — never a member lost three times and counted as preempted (#39)."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.cli.extras import workload_missing


@pytest.fixture
def no_tensorflow(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # find_spec: not installed
    monkeypatch.chdir(tmp_path)  # nothing of a run may appear here
    return tmp_path


def test_first_hour_tf_example_without_the_extra_is_refused_before_run(no_tensorflow):
    from pathlib import Path

    spec = str(Path(__file__).parents[1] / "examples" / "tf-local.yaml")
    out = CliRunner().invoke(app, ["run", spec])
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert "workload tf-mnist needs the `tf` extra" in text and "tensorflow not installed" in text
    assert "pip install -e '.[tf]'" in text
    assert "preempt" not in text and "lost" not in text
    assert not (no_tensorflow / ".spotbench").exists()  # nothing was deployed

    pre = CliRunner().invoke(app, ["preflight", spec])
    assert pre.exit_code == 1, pre.output
    text = " ".join(pre.output.split())
    assert "✗" in text and "`tf` extra" in text and "pip install -e '.[tf]'" in text
    assert "ready" not in text


def test_first_hour_extras_only_for_members_on_this_machine(no_tensorflow):
    assert workload_missing("local", "tf-mnist") is not None
    assert workload_missing("gcp", "tf-mnist") is None  # a cloud VM runs the tf image
    assert workload_missing("local", "osu") is None
