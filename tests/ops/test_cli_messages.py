"""Human output of the operations commands is sentences: a failed group in `status` with
the tail of its stderr, spend as a sentence, no Python reprs (issue #27, items 1 and 6)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.results import Result, ResultStore
from spotbench.spec import load_spec


@pytest.fixture
def local_spec(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTBENCH_STATE_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "byo.yaml"
    path.write_text(yaml.safe_dump({
        "name": "byo", "cloud": "local", "results": str(tmp_path / "results"), "budget": 5,
        "workload": {"name": "container", "command": ["false"]},
    }))
    return path


def _record(run: str, group: str, metric: str, **meta) -> Result:
    now = datetime.now(UTC)
    return Result(sweep="byo", run=run, group=group, trial=1, workload="container", metric=metric,
                  value=1.0, unit="flag", cloud="local", machine_type="local", started_at=now,
                  ended_at=now, metadata=meta)


def test_status_shows_a_failed_group_with_its_stderr_and_spend_as_a_sentence(local_spec):
    spec = load_spec(local_spec)
    store = ResultStore(spec.results_url())
    run = store.open_run().run
    group = spec.plan()[0].id
    store.write_group(run, group, [_record(run, group, "failed", exit_code=1,
                                           failure="the command exited with code 1",
                                           stderr_tail="loading\nfatal: no input.dat")])
    out = CliRunner().invoke(app, ["status", str(local_spec)])
    assert out.exit_code == 0, out.output
    assert "FAILED: the command exited with code 1" in out.output
    assert "last stderr line: fatal: no input.dat" in out.output
    assert "    fatal: no input.dat" in out.output
    spend = next(line for line in out.output.splitlines() if line.startswith("spend:"))
    assert "{" not in spend and "'" not in spend, spend
    assert "budget 5 USD" in spend and "left" in spend


@pytest.mark.parametrize("cron, says", [
    ("0 25 * * *", "the hour field '25' is out of range: 25 is not within 0-23"),
    ("61 3 * * *", "the minute field '61' is out of range"),
    ("0 3 * * 9", "the day-of-week field '9' is out of range"),
    ("0 3 * *", "has 4 field(s), a cron has five"),
])
def test_a_bad_cron_names_the_field_that_is_wrong(tmp_path, cron, says):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "c", "cloud": "local", "schedule": {"cron": cron},
                                    "workload": {"name": "container", "command": "true"}}))
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert out.exit_code == 2 and says in out.output, out.output


def test_a_missing_spec_file_is_a_sentence_not_a_repr(tmp_path):
    out = CliRunner().invoke(app, ["plan", str(tmp_path / "nope.yaml")])
    assert out.exit_code == 2 and "nope.yaml: file not found" in out.output
    assert "PosixPath" not in out.output


def test_version():
    out = CliRunner().invoke(app, ["--version"])
    assert out.exit_code == 0 and out.output.startswith("spotbench ") and out.output.strip()[-1].isdigit()


def test_report_labels_show_env_and_commands_as_people_write_them():
    from spotbench.report.data import param_text

    assert param_text({"N": "1000000", "M": "2"}) == "M=2 N=1000000"
    assert param_text(["python", "-c", "print('x=1')"]) == "python -c 'print('\"'\"'x=1'\"'\"')'"
    assert param_text(4) == "4"


def _options(command, path=()):
    if hasattr(command, "commands"):  # a group (typer vendors its own click)
        for name, sub in command.commands.items():
            yield from _options(sub, (*path, name))
        return
    for param in command.params:
        if param.param_type_name == "option" and param.envvar:
            yield " ".join(path), max(param.opts, key=len), param.envvar


def test_one_environment_variable_name_per_setting():
    import typer

    names: dict[str, set[str]] = {}
    for _, option, envvar in _options(typer.main.get_command(app)):
        names.setdefault(option, set()).add(envvar)
    assert {o: e for o, e in names.items() if len(e) > 1} == {}
    assert names["--results"] == {"SPOTBENCH_RESULTS_URL"}  # as the functions call it


def test_json_on_schedule(local_spec):
    import json

    out = CliRunner().invoke(app, ["schedule", "pause", str(local_spec), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == {"sweep": "byo", "cloud": "local", "action": "pause",
                                      "message": "byo: paused; start ticks are skipped, the deadline "
                                                 "stop still fires"}


def test_json_on_report_lists_files_and_failures(local_spec, tmp_path):
    import json

    spec = load_spec(local_spec)
    store = ResultStore(spec.results_url())
    run = store.open_run().run
    group = spec.plan()[0].id
    store.write_group(run, group, [_record(run, group, "failed", exit_code=2, failure="the command exited with code 2",
                                           stderr_tail="usage: bench N")])
    out = CliRunner().invoke(app, ["report", spec.results_url(), "--out", str(tmp_path / "rep"), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert Path(data["markdown"]).is_file() and Path(data["html"]).is_file()
    assert data["failures"] == [{"run": run, "group": group, "reason": "the command exited with code 2",
                                 "exit_code": 2, "stderr_tail": "usage: bench N"}]
