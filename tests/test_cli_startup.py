"""Every `spotbench` command imports the whole CLI first (`--help` too): the report's
libraries (pandas, matplotlib, scipy: seconds of start-up on a small machine) are imported
only by the commands that print or write a report's numbers, when they run."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "scipy")


def test_importing_the_cli_loads_no_report_library():
    code = ("import sys, spotbench.cli\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_estimate_prices_and_history_tables_still_format_their_numbers():
    from spotbench.cli import estimate, history, prices  # noqa: F401 - they import cleanly
    from spotbench.cli.estimate import _money, _qty

    assert _qty(28750.0) == "28,750" and _money(0.00001667) == "0.000017"
    assert _money(1234.5) == "1,234.50"


def test_estimate_prints_its_tables_with_the_report_numbers():
    from typer.testing import CliRunner

    from spotbench.cli import app

    out = CliRunner().invoke(app, ["estimate", "examples/gcp-osu.yaml"], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and out.exception is None, out.output
    assert "USD per run" in out.output
