"""The first hour of a new user, as the README tells it (#39), end to end with the real
commands: `make demo` (examples/osu-local.yaml) answers first and its report shows the
answer in the first screen of headless Chromium; the TF example without the `tf` extra is
refused before it runs, naming the install; a user's own container is ranked; `estimate`
prices a cloud sweep with its NAT and functions' CPU; `preflight` against an unreachable
cloud is one line."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.report.test_first_screen import _first_screen, render
from tests.test_e2e_local import BIN

ROOT = Path(__file__).parents[1]
pytestmark = pytest.mark.slow


def cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`spotbench ARGS` as a user types it, in `tmp_path`, its own state folder."""
    env = {**(env or os.environ), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "SPOTBENCH_GRACE_S": "5"}
    env.setdefault("SPOTBENCH_STATE_ROOT", str(tmp_path / "state"))
    return subprocess.Popen([str(BIN / "spotbench"), *args], env=env, cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _example(tmp_path: Path, name: str, **changes) -> Path:
    data = yaml.safe_load((ROOT / "examples" / name).read_text())
    data.update(results=str(tmp_path / "results" / data["name"]), **changes)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_first_hour_readme_commands_are_the_ones_walked_here():
    readme = (ROOT / "README.md").read_text()
    make = (ROOT / "Makefile").read_text()
    assert "make demo" in readme and "spotbench run examples/osu-local.yaml" in make
    assert "spotbench estimate examples/gcp-osu.yaml" in readme
    assert "spotbench preflight examples/gcp-osu.yaml" in readme


def test_first_hour_demo_answers_first_and_in_the_browser(tmp_path):
    spec = _example(tmp_path, "osu-local.yaml")
    proc = cli(tmp_path, "run", str(spec), "--report-dir", str(tmp_path / "report"),
               env={**os.environ, "COLUMNS": "80", "SPOTBENCH_STATE_ROOT": str(tmp_path / "state")})
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert "Best OSU latency @ 8 B (lower is better): local" in out
    assert out.index("Best OSU latency") < out.index("report:")
    assert "Traceback" not in out and "groups complete" in out
    shown = render(tmp_path / "report" / "report.html", tmp_path)
    _first_screen(shown, "summary", "key")
    assert "The answer: OSU latency @ 8 B" in shown["text"]


def test_first_hour_tf_example_without_the_extra_and_a_users_container(tmp_path):
    hide = tmp_path / "no-tf"
    hide.mkdir()  # this machine as after `make demo`: no tensorflow
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['tensorflow'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), os.environ.get("PYTHONPATH", "")]),
           "SPOTBENCH_STATE_ROOT": str(tmp_path / "state"), "COLUMNS": "100"}
    tf = cli(tmp_path, "run", str(_example(tmp_path, "tf-local.yaml")), env=env)
    out, _ = tf.communicate(timeout=120)
    assert tf.returncode == 2, out
    assert "`tf` extra" in out and "pip install -e '.[tf]'" in out and "preempt" not in out

    ops = ["python3", "-c", 'import json; print(json.dumps({"metric": "ops", "value": 5, "unit": "ops/s"}))']
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({
        "name": "mine", "cloud": "local", "deadline": "1m", "results": str(tmp_path / "results" / "mine"),
        "workload": {"name": "container", "command": ops}, "trials": 2}))
    run = cli(tmp_path, "run", str(mine), "--report-dir", str(tmp_path / "mine-report"), env=env)
    out, _ = run.communicate(timeout=240)
    assert run.returncode == 0, out
    assert "Best ops (higher is better): local: 5 ops/s" in out, out


def test_first_hour_estimate_then_preflight_against_an_unreachable_cloud(tmp_path):
    est = subprocess.run([str(BIN / "spotbench"), "estimate", str(ROOT / "examples/aws-osu.yaml")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "120", "PATH": os.environ["PATH"]})
    assert est.returncode == 0, est.stderr
    assert "NAT (gateway)" in est.stdout and "per month" in est.stdout
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="AKIAEXAMPLEEXAMPLE", AWS_SECRET_ACCESS_KEY="x" * 40,
               AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
               AWS_MAX_ATTEMPTS="1", HOME=str(tmp_path))
    pre = subprocess.run([str(BIN / "spotbench"), "preflight", str(ROOT / "examples/aws-osu.yaml")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env=env)
    text = pre.stdout + pre.stderr
    assert pre.returncode == 1 and "Traceback" not in text, text
    assert "credentials" in text and "✗" in text
