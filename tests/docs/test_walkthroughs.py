"""The first-deploy walkthroughs (docs/gcp.md, docs/aws.md): every `spotbench …` line in them
names a real command with options it accepts, every `make …` target exists, and the
offline steps run (`spotbench preview` of the walkthrough's spec)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs/gcp.md", ROOT / "docs/aws.md"]


def commands(doc: Path, program: str) -> list[list[str]]:
    """`program …` lines of the fenced code blocks, continuation lines joined, with
    `$(pulumi stack output X)` replaced by a placeholder value."""
    out, block = [], False
    lines = iter(doc.read_text().splitlines())
    for line in lines:
        if line.strip().startswith("```"):
            block = not block
            continue
        text = line.strip()
        while block and text.endswith("\\"):
            text = text[:-1] + " " + next(lines).strip()
        text = re.sub(r"\$\(pulumi stack output (\w+)[^)]*\)", r"PULUMI-\1", text)
        text = text.split(" #")[0].strip()
        if block and text.startswith(program + " "):
            out.append(shlex.split(text)[1:])
    return out


def _help(args: list[str]) -> str:
    from spotbench.cli import app

    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (args, result.output)
    return result.output


@pytest.mark.parametrize("doc", DOCS, ids=[d.stem for d in DOCS])
def test_every_spotbench_line_is_a_real_command(doc: Path):
    lines = commands(doc, "spotbench")
    assert {c[0] for c in lines} >= {"preview", "schedule", "status", "report", "teardown"}
    for argv in lines:
        words = [a for a in argv if not a.startswith("-")]
        path = words[:2] if words[0] == "schedule" else words[:1]
        text = _help(path)
        for opt in (a.split("=")[0] for a in argv if a.startswith("--")):
            assert opt in text, f"{doc.name}: `spotbench {' '.join(argv)}`: {opt} unknown"
        for arg in words[len(path):]:
            if arg.startswith("examples/"):
                assert (ROOT / arg).is_file(), f"{doc.name}: {arg} does not exist"


@pytest.mark.parametrize("doc", DOCS, ids=[d.stem for d in DOCS])
def test_every_make_target_exists(doc: Path):
    targets = {c[0] for c in commands(doc, "make")}
    assert "images" in targets
    makefile = (ROOT / "Makefile").read_text()
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"no make target {target}"
    dry = subprocess.run(["make", "-n", "images", "REGISTRY=r.example/x"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "build_images.sh" in dry.stdout, dry.stderr
