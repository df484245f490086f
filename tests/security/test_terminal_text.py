"""Attack: record text drives the operator's terminal (issue 38). A group stores a machine
type, a unit and a failed command's reason with Rich markup and raw escape sequences (clear
the screen, set the window title, a C1 CSI, a bidi override); `query`, `status`,
`history`, `market` print them. Every one prints as visible text: no control character
reaches the terminal, markup shows as written."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotbench import failures
from spotbench.cli import app
from spotbench.results import Result, ResultStore
from spotbench.spec import load_spec
from spotbench.terminal import PlainFormatter, plain
from tests.history.conftest import spec_for
from tests.security.test_readers_fuzz import CONTROL

pytestmark = pytest.mark.security

EVIL = "[bold red]FAKE[/] \x1b[2J\x1b]0;pwned\x07 \x9b31m \u202eexe.txt"


def test_terminal_text_record_text_reaches_no_terminal_raw(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "results"
    spec_path = spec_for(tmp_path, root)
    group = load_spec(spec_path).plan()[0].id
    store = ResultStore(f"file://{root}")
    run = store.open_run(datetime.now(UTC) - timedelta(minutes=5)).run
    t0 = datetime.now(UTC) - timedelta(minutes=4)
    common = dict(sweep="synthetic", run=run, group=group, trial=1, workload="osu", cloud="local",
                  machine_type=EVIL, zone=EVIL, started_at=t0, ended_at=t0 + timedelta(seconds=30))
    store.write_group(run, group, [
        Result(metric="latency", value=1.5, unit="us\x1b[8m", metadata={"size_bytes": 8}, **common),
        Result(metric=failures.FAILED_METRIC, value=1.0, unit=failures.FAILED_UNIT,
               metadata={failures.FAILURE_KEY: EVIL, failures.TAIL_KEY: EVIL}, **common)])
    monkeypatch.setenv("COLUMNS", "400")
    for args in (["query", str(spec_path), "SELECT machine_type, zone, unit FROM records"],
                 ["status", str(spec_path)], ["history", str(spec_path)], ["market", str(spec_path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert not CONTROL.search(result.output), (args, result.output)
        if args[0] in ("query", "market"):
            assert "[bold red]FAKE[/]" in result.output, (args, result.output)
    assert "[bold red]FAKE[/] \\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m \\u202eexe.txt" == plain(EVIL)


def test_terminal_text_a_log_line_naming_a_members_file_is_escaped() -> None:
    record = logging.LogRecord("spotbench", logging.WARNING, __file__, 1, "skipped %s", (f"runs/r/{EVIL}",), None)
    assert not CONTROL.search(PlainFormatter("%(message)s").format(record))
