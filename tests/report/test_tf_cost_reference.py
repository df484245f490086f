"""TF table (speedup, efficiency), cost table (normalised to the cent), --reference join."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.costs import annotate, load_catalog
from spotbench.report import cost, write_report
from workloads.tf_mnist import report as tf
from spotbench.report import data as _data
from tests.report.conftest import T0, osu_records, rec

CAT = load_catalog()
TIMES = {1: 200.0, 2: 120.0, 4: 80.0}


def tf_group(workers: int, trial: int, t: float, preempted=False, cloud="gcp", cpu=None,
             cpu_key="cpu_count"):
    members = workers + 2  # chief + ps + workers
    recs = [
        rec(group=f"tf-w{workers}-t{trial}", trial=trial, workload="tf-mnist", metric=m, value=v, unit=u,
            params={"name": "tf-mnist", "workers": workers, "steps": 1000}, cloud=cloud,
            machine_type="n1-standard-2", zone="us-central1-a", preempted=preempted,
            started_at=T0, ended_at=T0 + timedelta(seconds=t),
            metadata={cpu_key: cpu} if cpu else {})
        for m, v, u in (("train_time_s", t, "s"), ("steps", 1000, "steps"), ("steps_per_s", 1000 / t, "steps/s"),
                        ("test_accuracy", 0.9 + workers / 100, "ratio"))
    ]
    return annotate(recs, CAT, members=members) if cloud != "local" else recs


@pytest.fixture
def tf_store(store):
    for w, t in TIMES.items():
        for trial in (1, 2):
            recs = tf_group(w, trial, t)
            store.write_group("r1", recs[0].group, recs)
    recs = tf_group(4, 3, 5000, preempted=True)
    store.write_group("r1", recs[0].group, recs)
    return store


def test_tf_speedup_and_efficiency(tf_store):
    table = tf.summary(_data.frame(tf_store.read()))
    rows = table.loc["n1-standard-2"]
    assert rows.loc[1, "train_time_s"] == pytest.approx(200)
    assert rows.loc[4, "train_time_s"] == pytest.approx(80)  # preempted 5000 s excluded
    assert rows.loc[2, "speedup"] == pytest.approx(200 / 120)
    assert rows.loc[4, "speedup"] == pytest.approx(2.5)
    assert rows.loc[4, "efficiency"] == pytest.approx(0.625)
    assert rows.loc[4, "n"] == 2


def test_cost_normalised_to_the_cent(tf_store):
    table = cost.summary(_data.frame(tf_store.read()), base="workers=1")
    rows = table.loc["n1-standard-2"]
    # cost per run, w=1: 3 VMs × 0.095 $/h × 200 s
    assert round(rows.loc[1, "cost_usd"], 4) == round(0.095 * 3 * 200 / 3600, 4)
    # 10 000 steps: w=1 takes 2000 s on 3 VMs = 0.16 $; w=4 takes 800 s on 6 VMs = 0.13 $
    assert round(rows.loc[1, "work_usd"], 2) == 0.16
    assert round(rows.loc[4, "work_usd"], 2) == 0.13
    assert round(rows.loc[4, "normalised"], 2) == 0.80
    assert rows.loc[4, "preempted"] == 1
    with pytest.raises(ValueError, match="no configuration with workers=9"):
        cost.summary(_data.frame(tf_store.read()), base="workers=9")


def test_full_report_files_and_cli(tf_store, tmp_path):
    paths = write_report(tf_store.url, tmp_path / "out", base="workers=1")
    names = {p.name for p in paths.png}
    assert names == {"tf_speedup.png", "tf_steps_per_s.png", "throughput_vs_vms.png", "cost_vs_time.png"}
    for p in paths.png:
        assert p.stat().st_size > 1000
    md = paths.markdown.read_text()
    assert "| n1-standard-2 | 4 | 80 | 1,000 | 0.94 | 12.5 | 2.5 |" in md  # numbers for people (#27)
    assert "speedup vs 1 worker" in md and "normalised cost" in md
    assert "| n1-standard-2 | 4 | 2 | 1 | 6 |" in md  # cost table: runs, preempted, VMs
    page = paths.html.read_text()
    assert page.count("data:image/png;base64,") == 4
    summary = pd.read_csv(paths.csv)
    assert set(summary["table"]) == {"tf", "cost"}
    res = CliRunner().invoke(app, ["report", tf_store.url, "--out", str(tmp_path / "cli"), "--base", "workers=1"])
    assert res.exit_code == 0, res.output
    assert "report.md" in res.output and "cost_vs_time.png" in res.output
    res = CliRunner().invoke(app, ["report", tf_store.url, "--out", str(tmp_path / "x"), "--base", "oops"])
    assert res.exit_code == 2


@pytest.mark.parametrize("cpu_key", ["cpu_count", "host_cores"])  # host_cores: tf_mnist's key
def test_local_core_note(store, tmp_path, cpu_key):
    recs = tf_group(4, 1, 100, cloud="local", cpu=2, cpu_key=cpu_key)
    store.write_group("r1", recs[0].group, recs)
    md = write_report(store.url, tmp_path / "o").markdown.read_text()
    assert "shared 2 CPU cores" in md and "no speedup is expected" in md


def test_reference_join(store, tmp_path):
    for recs in osu_records("c5n.18xlarge", {1: {"latency": [2.0, 3.0]}, 2: {"latency": [4.0, 5.0]}}):
        store.write_group("r1", recs[0].group, recs)
    ref = tmp_path / "ref.csv"
    ref.write_text(
        "machine_type,metric,value,unit,size_bytes,source\n"
        "c5n.18xlarge,latency,6.0,us,0,published\n"
        "c5n.18xlarge,latency,2.0,us,1,published\n"
        "c5n.18xlarge,latency,9.9,us,64,published\n"
    )
    paths = write_report(store.url, tmp_path / "o", reference=ref)
    md = paths.markdown.read_text()
    assert "2 of 3 reference rows matched" in md
    assert "| c5n.18xlarge | latency | 0 |  | us | 3 | 6 | 0.5 | published |" in md  # numbers for people (#27)
    assert "| c5n.18xlarge | latency | 1 |  | us | 4 | 2 | 2 | published |" in md
