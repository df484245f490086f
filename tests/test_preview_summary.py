"""`spotbench preview` opens with the resources counted by type (VMs by machine type), then
lists them; both tables fit the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotbench.preview import Declared, by_type

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> list[Declared]:
    vms = [Declared("aws:ec2/instance:Instance", f"aws-osu--43eeea-t{t}-{m}",
                    {"instanceType": "c5n.18xlarge"}, True) for t in (1, 2, 3) for m in ("l0", "p0")]
    keys = [Declared("tls:index/privateKey:PrivateKey", f"aws-osu-aws-osu--43eeea-t{t}-mpi-ssh", {}, True)
            for t in (1, 2, 3)]
    return [*keys, *vms, Declared("aws:s3/bucket:Bucket", "aws-osu-results", {}, True)]


def test_by_type_counts_most_numerous_first():
    rows = by_type(_declared())
    assert [(r.kind, r.count) for r in rows] == [("Instance", 6), ("PrivateKey", 3), ("Bucket", 1)]
    assert rows[0].detail == "6 × c5n.18xlarge"
    assert rows[1].detail == "aws-osu-aws-osu--43eeea-t1-mpi-ssh and 2 more"


def test_preview_prints_the_summary_before_the_list(monkeypatch):
    pytest.importorskip("pulumi")
    import infra.preview
    from spotbench.cli import app

    monkeypatch.setattr(infra.preview, "preview", lambda *a, **k: _declared())
    res = CliRunner().invoke(app, ["preview", str(ROOT / "examples" / "aws-osu.yaml")],
                             env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    out = res.output
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80
    summary, listing = out.split("every resource with its key properties below", 1)
    assert "10 resources on aws (offline preview), by type" in summary
    assert "│ Instance   │     6 │ 6 × c5n.18xlarge" in summary
    assert summary.count("aws-osu--43eeea-t") == 1  # one name per type, not every resource
    assert all(f"aws-osu--43eeea-t{t}-l0" in listing for t in (1, 2, 3))
