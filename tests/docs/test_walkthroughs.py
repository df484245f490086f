"""The first-deploy walkthroughs (docs/gcp.md, docs/aws.md): every `spotbench …` line in them
names a real command with options it accepts, every `make …` target exists, and the
offline steps run (`spotbench preview` of the walkthrough's spec)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
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


# ---- the README and a guide, run as a new user would, on a fresh install -------------------
PLACEHOLDERS = {"SPEC", "GROUP", "RESULTS_URL", "PCT", "KEY=VALUE"}
NEEDS_ACCOUNT = re.compile(r"no (GCP|AWS) credentials on this machine")


def _is_template(line: str) -> bool:
    """`spotbench schedule pause|resume|run-now SPEC`, `teardown SPEC [--yes]`: not runnable."""
    try:
        args = shlex.split(line)
    except ValueError:  # a fragment of a longer shell line
        return True
    return any(a in PLACEHOLDERS or "|" in a or a.startswith("[") or "$(" in a for a in args)


def _fresh_copy(dest: Path) -> Path:
    """The checkout's files (tracked and new, not ignored) in `dest`: a fresh clone, no .venv."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\n")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(src.read_bytes())
            (dest / name).chmod(src.stat().st_mode)
    return dest


def _user_env(home: Path) -> dict[str, str]:
    """A new user's shell: no venv on PATH, no PYTHONPATH, no cloud credentials; pip's
    configuration and its cache kept, so installs reuse the wheels already downloaded."""
    import os

    path = [p for p in os.environ["PATH"].split(":") if ".venv" not in p]
    keep = {k: v for k, v in os.environ.items()
            if k.startswith(("PIP_", "LANG", "LC_", "SSL_", "REQUESTS_CA", "AWS_CA_BUNDLE"))}
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return {**keep, "PATH": ":".join(path), "HOME": str(home),
            "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(cache / "pip")),
            "PIP_NO_COMPILE": "1",  # no .pyc for the big wheels: the slowest part of an install
            "AWS_EC2_METADATA_DISABLED": "true", "COLUMNS": "120"}


def _tour(doc: Path) -> list[str]:
    """The doc's shell lines in order: `make …`, `. .venv/bin/activate`, `spotbench …`."""
    out, block = [], False
    for line in doc.read_text().splitlines():
        if line.strip().startswith("```"):
            block = not block
            continue
        text = line.strip().split(" #")[0].strip()
        if block and text.startswith(("make ", "spotbench ", ". .venv/bin/activate")) \
                and not text.endswith("\\"):
            out.append(text)
    return out


@pytest.mark.slow
@pytest.mark.timeout(3600)  # two installs and the demo: ~4 min idle, far more on a loaded machine
def test_readme_then_both_cloud_guides_on_a_fresh_install(tmp_path: Path):
    """Every README command in order on a fresh clone with only the documented install
    steps (`make test` aside: it is this suite), then docs/gcp.md's and docs/aws.md's up to the
    first step that needs a cloud account (`preflight`): each succeeds, or (a cloud command) fails with one
    line saying what to install or log in to, never a traceback."""
    repo = _fresh_copy(tmp_path / "spotbench")
    (tmp_path / "home").mkdir()
    env = _user_env(tmp_path / "home")
    ran: list[str] = []

    def step(line: str) -> tuple[int, str]:
        import os
        import signal

        shell = f". .venv/bin/activate && {line}" if line.startswith("spotbench") else line
        proc = subprocess.Popen(["bash", "-c", shell], cwd=repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=1800)  # an install on a loaded machine is slow
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # make, pip, spotbench run: nothing left behind
            proc.communicate()
            raise
        ran.append(line)
        assert "Traceback" not in out, f"`{line}`:\n{out}"
        return proc.returncode, out

    def ok_or_one_line(line: str) -> str:
        """It works, or it says in one line (preflight: one line per problem) what to install."""
        code, out = step(line)
        lines = [x for x in out.splitlines() if x.strip()]
        said = "make setup CLOUD=" in out and (len(lines) == 1 or all(x.startswith("✗ ") for x in lines))
        assert code == 0 or said, f"`{line}` exited {code}:\n{out}"
        return out

    readme = [line for line in _tour(ROOT / "README.md") if not _is_template(line)]
    assert readme[:3] == ["make demo", "make test", ". .venv/bin/activate"], readme[:3]
    out = ok_or_one_line("make demo")  # the README's first command, on a machine without .venv
    assert "report:" in out and (repo / ".venv/bin/spotbench").exists()
    for line in readme[3:]:
        if not line.startswith(("spotbench run ", ". .venv")):  # the demo just ran the run
            ok_or_one_line(line)
    assert {"spotbench plan examples/osu-local.yaml", "spotbench report results/osu-local"} <= set(ran)

    for cloud, preview in (("gcp", "spotbench preview examples/gcp-osu.yaml"),
                           ("aws", "spotbench preview examples/aws-osu.yaml --cloud aws")):
        guide = [line for line in _tour(ROOT / f"docs/{cloud}.md") if not _is_template(line)]
        assert guide[:2] == [f"make setup CLOUD={cloud}", ". .venv/bin/activate"], guide[:3]
        for line in guide:
            if line.startswith((". .venv", "make images", "make lambda-layer")):
                continue  # the layer has its own test (it downloads the aws extra's wheels)
            if line.startswith("spotbench preflight"):  # the first step that needs an account
                code, out = step(line)
                problems = [x for x in out.splitlines() if x.strip()]
                assert code == 1 and problems and all(x.startswith("✗ ") for x in problems), out
                break
            ok_or_one_line(line)
        else:
            pytest.fail(f"docs/{cloud}.md has no preflight step: {ran}")
        assert preview in ran, ran


def test_make_installs_one_cloud_and_builds_the_layer_without_the_test_toolchain(tmp_path: Path):
    def dry(*args: str) -> str:
        proc = subprocess.run(["make", "-n", *args, f"VENV={tmp_path}/v"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "pip install --quiet -e '.[gcp,infra,ops]'" in dry("setup", "CLOUD=gcp")
    assert "pip install --quiet -e '.[aws,infra,ops]'" in dry("setup", "CLOUD=aws")
    assert "[gcp" not in dry("setup") and "[aws" not in dry("setup")
    layer = dry("lambda-layer")
    assert "[dev]" not in layer and "ensure_boot_tools" not in layer and "ensure_sshd" not in layer
    assert "infra/aws/layer.py" in layer
    bad = subprocess.run(["make", "-n", "setup", "CLOUD=azure"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode != 0 and "choose CLOUD=gcp or CLOUD=aws" in bad.stderr
    # the layer's script needs neither Pulumi nor boto3 in the venv that builds it
    code = ("import runpy, sys\n"
            "for m in ('pulumi', 'pulumi_aws', 'boto3'): sys.modules[m] = None\n"
            "sys.argv = ['layer.py']\n"
            "ns = runpy.run_path('infra/aws/layer.py', run_name='not_main')\n"
            "print(ns['requirements_txt']('aws'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "boto3" in out.stdout, out.stderr
