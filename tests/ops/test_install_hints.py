"""A command that needs a cloud's extra says which one to install, in one line with no
traceback; without credentials a gcp/aws command fails in seconds with one line; preflight
checks installs and tools first (issue #27, item 2). Run through `spotbench.cli.main` in a
subprocess with the extra's modules blocked, as a base install lacks them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GCP = str(ROOT / "examples/gcp-osu.yaml")
AWS = str(ROOT / "examples/aws-osu.yaml")


def spotbench(args: list[str], *, blocked: tuple[str, ...] = (), env: dict | None = None,
              timeout: float = 60) -> tuple[int, str, float]:
    code = ("import sys\n"
            f"for m in {blocked!r}: sys.modules[m] = None\n"
            f"sys.argv = ['spotbench', *{args!r}]\n"
            "from spotbench.cli import main\nmain()\n")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "COLUMNS": "200", **(env or {})})
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


NO_PULUMI = ("pulumi", "pulumi_gcp", "pulumi_aws", "pulumi_tls")
NO_GCP = ("google", "google.cloud", "google.auth", "gcsfs")
NO_AWS = ("boto3", "botocore", "s3fs")


@pytest.mark.parametrize("args, blocked, cloud", [
    (["preview", GCP], NO_PULUMI, "gcp"),
    (["preview", AWS], NO_PULUMI, "aws"),
    (["status", GCP], NO_GCP, "gcp"),
    (["schedule", "run-now", GCP], NO_GCP, "gcp"),
    (["teardown", AWS], NO_AWS, "aws"),
    (["status", AWS, "--results", "s3://b/aws-osu"], NO_AWS, "aws"),
], ids=["preview-gcp", "preview-aws", "status-gcp", "run-now-gcp", "teardown-aws", "status-aws"])
def test_a_missing_extra_is_one_line_naming_it(args, blocked, cloud):
    code, out, _ = spotbench(args, blocked=blocked, env={"SPOTBENCH_GCP_PROJECT": "demo"})
    assert code == 1, out
    assert "Traceback" not in out and "ModuleNotFoundError" not in out, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert f"make setup CLOUD={cloud}" in lines[0] and "extra" in lines[0], out


def test_preflight_checks_the_extras_first_not_the_credentials(tmp_path):
    code, out, _ = spotbench(["preflight", AWS], blocked=NO_AWS, env={"PATH": str(tmp_path)})
    assert code == 1 and "Traceback" not in out, out
    assert "extras: the `aws` extra is not installed" in out and "make setup CLOUD=aws" in out
    assert "tools: `pulumi` is not on PATH" in out and "tools: `aws` is not on PATH" in out
    assert "credentials" not in out  # not asked of a cloud whose SDK is missing


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith(("GOOGLE_", "AWS_", "CLOUDSDK_")) and key != "AWS_CA_BUNDLE":
            monkeypatch.delenv(key)
    monkeypatch.delenv("SPOTBENCH_GCP_API_ENDPOINT", raising=False)
    return {"HOME": str(tmp_path), "SPOTBENCH_GCP_PROJECT": "demo-project",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}


@pytest.mark.parametrize("args", [["status", GCP], ["schedule", "pause", GCP],
                                  ["status", AWS, "--results", "s3://b/aws-osu"]],
                         ids=["status-gcp", "pause-gcp", "status-aws"])
def test_without_credentials_a_cloud_command_fails_in_seconds_with_one_line(args, no_credentials):
    code, out, took = spotbench(args, env=no_credentials, timeout=40)
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in out, out
    assert "no GCP credentials" in out or "no AWS credentials" in out, out
    assert "gcloud auth application-default login" in out or "aws configure" in out
    assert took < 20, f"took {took:.0f} s"


def test_the_script_twins_say_which_extra_too():
    """scripts/teardown.py (cron's twin of `spotbench teardown`) on an AWS spec without the
    aws extra: the same one line, no traceback (it called the typer app directly before)."""
    code = ("import runpy, sys\n"
            f"for m in {NO_AWS!r}: sys.modules[m] = None\n"
            f"sys.argv = ['teardown.py', {AWS!r}]\n"
            f"runpy.run_path({str(ROOT / 'scripts/teardown.py')!r}, run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out
    assert "make setup CLOUD=aws" in out, out
