"""Search and matrix values are parameters, never secrets (issue #35): a matrix's `env`
values are shown (plan, records, report rows, group keys), and only what the spec declares
secret (`secret_env`) is masked, everywhere it could appear."""

from __future__ import annotations

import base64
import csv
import sys
from pathlib import Path

import pytest
import yaml

from spotbench.spec import SpecError, load_spec
from tests.test_e2e_local import cli

SECRET = "tok-9b1e44c0d7-SECRET"
BENCH = """
import os
ok = os.environ.get("API_TOKEN") == SECRET_HERE
print("score=%s s" % (float(os.environ["LR"]) * 10 if ok else -1))
"""


def _workload(script: Path) -> dict:
    return {"name": "container", "command": [sys.executable, str(script)],
            "env": {"LR": "${lr}", "API_TOKEN": SECRET}, "secret_env": ["API_TOKEN"]}


def test_search_matrix_env_is_a_parameter_and_a_typo_in_secret_env_is_refused() -> None:
    spec = load_spec({"name": "m", "cloud": "local", "deadline": "2m",
                      "workload": {"name": "container", "command": "echo", "env": {"LR": "${lr}"}},
                      "matrix": {"lr": [0.1, 0.2]}})
    shown = sorted(g.params.model_dump(mode="json")["env"]["LR"] for g in spec.plan())
    assert shown == ["0.1", "0.2"]  # two points, two values shown (not **********)
    assert len({g.id for g in spec.plan()}) == 2
    with pytest.raises(SpecError, match="secret_env.*API_TOKNE.*no such key in env"):
        load_spec({"name": "m", "cloud": "local", "workload": {
            "name": "container", "command": "echo", "env": {"API_TOKEN": "x"}, "secret_env": ["API_TOKNE"]}})


def test_search_two_matrix_env_points_stay_two_report_rows_and_the_declared_secret_is_masked(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text(BENCH.replace("SECRET_HERE", repr(SECRET)))
    spec = {"name": "byo", "cloud": "local", "deadline": "2m", "results": str(tmp_path / "results"),
            "workload": _workload(script), "matrix": {"lr": [0.1, 0.2]}}
    path = tmp_path / "byo.yaml"
    path.write_text(yaml.safe_dump(spec))
    plan = cli(tmp_path, "plan", str(path))
    plan_out, _ = plan.communicate(timeout=60)
    assert plan.returncode == 0, plan_out
    proc = cli(tmp_path, "run", str(path), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out
    status = cli(tmp_path, "status", str(path))
    status_out, _ = status.communicate(timeout=60)

    rows = list(csv.DictReader((tmp_path / "report" / "summary.csv").open()))
    scores = {r["config"]: float(r["value"]) for r in rows
              if r["table"] == "container_score" and r["column"] == "average"}
    assert len(scores) == 2, rows  # two points, two rows, each named by its value
    assert sorted(scores.values()) == [1.0, 2.0]  # the command saw its secret and its LR
    assert [c for c in scores if "LR=0.1" in c] and [c for c in scores if "LR=0.2" in c], scores
    assert all("API_TOKEN=**********" in c for c in scores)

    stored = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    reports = [p for p in (tmp_path / "report").rglob("*") if p.is_file()]
    # the state folder: the runner's and members' logs, the plan it deployed; the instance
    # table (cloud.db, 0600) is where the local cloud keeps a member's environment
    state = [p for p in (tmp_path / "state").rglob("*") if p.is_file() and not p.name.startswith("cloud.db")]
    assert any(p.suffix == ".log" for p in state), sorted(p.name for p in state)
    for p in stored + reports + state:
        assert SECRET.encode() not in p.read_bytes(), f"{p} holds the declared secret"
    for shown in (plan_out, out, status_out):
        assert SECRET not in shown
    assert "**********" in (tmp_path / "report" / "records.csv").read_text()  # masked, not dropped


def _boot_docs(cloud: str, secret: bool) -> tuple[list[str], list]:
    from tests.infra.conftest import snapshot

    env = {"LR": "${lr}", **({"API_TOKEN": SECRET} if secret else {})}
    base = {"name": "byo", "schedule": {"cron": "0 3 * * *"}, "deadline": "20m", "trials": 1,
            "image": "docker.io/library/python:3.12-slim",
            "workload": {"name": "container", "command": ["python", "-c", "print('x=1 s')"], "env": env,
                         **({"secret_env": ["API_TOKEN"]} if secret else {})}}
    if cloud == "gcp":
        from infra.gcp import GcpSweep, GcpSweepArgs

        spec = load_spec({**base, "cloud": "gcp", "zone": "us-central1-a",
                          "matrix": {"machine_type": ["e2-standard-2"], "lr": [0.1, 0.2]}})
        mocks = snapshot(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)),
                         {"gcp:project": "proj-1", "gcp:region": "us-central1"})
        docs = [vm.inputs["metadata"]["user-data"] for vm in mocks.of_type("gcp:compute/instance:Instance")]
    else:
        from infra.aws import AwsSweep, AwsSweepArgs

        spec = load_spec({**base, "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
                          "matrix": {"machine_type": ["c5.large"], "lr": [0.1, 0.2]},
                          "results": "s3://res-bucket/runs/byo"})
        mocks = snapshot(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)), {})
        vms = [*mocks.of_type("aws:ec2/spotInstanceRequest:SpotInstanceRequest"),
               *mocks.of_type("aws:ec2/instance:Instance")]
        docs = [str(vm.inputs["userData"]) for vm in vms]
    return docs, mocks.declared


@pytest.mark.fidelity
@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_search_cloud_boot_documents_show_matrix_env_and_hold_no_declared_secret(cloud: str) -> None:
    docs, _ = _boot_docs(cloud, secret=False)
    assert len(docs) == 2
    decoded = [_readable(d) for d in docs]
    assert sorted("LR=0.1" in d for d in decoded) == [False, True]  # each VM's own value, in clear
    assert sorted("LR=0.2" in d for d in decoded) == [False, True]
    docs, declared = _boot_docs(cloud, secret=True)
    for doc in docs:  # a declared secret: the env file is fetched at boot, never written
        assert SECRET not in _readable(doc) and "LR=0." not in _readable(doc)
    outside = [d for d in declared if d.type not in ("gcp:secretmanager/secretVersion:SecretVersion",
                                                     "aws:ssm/parameter:Parameter")]
    assert not [d.name for d in outside if SECRET in _readable(str(d.inputs))]


def _readable(doc: str) -> str:
    """A boot document as anyone allowed to describe the instance reads it (base64 parts
    decoded too)."""
    out = [doc]
    try:
        out.append(base64.b64decode(doc, validate=True).decode(errors="replace"))
    except ValueError:
        pass
    import re

    for blob in re.findall(r"[A-Za-z0-9+/=]{16,}", "\n".join(out)):
        try:
            out.append(base64.b64decode(blob + "=" * (-len(blob) % 4)).decode(errors="replace"))
        except ValueError:
            continue
    return "\n".join(out)
