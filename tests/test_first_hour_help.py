"""`--help` at 80 columns (#39): a paragraph of a command's help flows to the terminal's
width — no word left alone on a line in the middle of a paragraph because the docstring
was wrapped at another width."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spotbench.cli.help_text import flow

COMMANDS = ["", "run", "report", "estimate", "status", "preflight", "history", "teardown"]


def _mid_paragraph_orphans(text: str) -> list[str]:
    """Single-word lines of the description (outside the option panels) followed by more
    of the same paragraph."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("│", "╭", "╰"))]
    out = []
    for before, line, after in zip(lines, lines[1:], lines[2:]):
        words = line.split()
        if len(words) == 1 and before.strip() and after.strip() and not words[0].startswith("Usage"):
            out.append(words[0])
    return out


@pytest.mark.parametrize("command", COMMANDS)
def test_first_hour_help_flows_at_80_columns(command):
    args = [*command.split(), "--help"]
    out = subprocess.run([sys.executable, "-m", "spotbench.cli", *args], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "80"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert max(len(ln) for ln in out.stdout.splitlines()) <= 80
    assert _mid_paragraph_orphans(out.stdout) == [], out.stdout


def test_first_hour_flow_keeps_lists_and_paragraphs():
    doc = """First line
    goes on.

    Second paragraph
    wrapped.

    - a list item
    - another
    """
    assert flow(doc) == "First line goes on.\n\nSecond paragraph wrapped.\n\n- a list item\n- another"
