"""`examples/torch-local.yaml` end to end on the local cloud (`spotbench run`): DDP on 1 and
2 workers (2 torchrun agents, c10d rendezvous at worker 0, gloo) and the 2-stage pipeline on
one worker's 2 processes and on 2 workers, trained on CIFAR-10 binary files this test
writes; then the report's torch section: speedup, efficiency, epochs/min."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from spotbench.results import ResultStore
from tests.test_e2e_local import cli
from tests.workloads.torch_cifar.cifar_files import make_cifar

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
ROOT = Path(__file__).resolve().parents[3]


def test_torch_local_example_ddp_pipeline_multinode_and_report(tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "examples" / "torch-local.yaml").read_text())
    assert spec["matrix"] == {"mode": ["ddp", "pipeline"], "workers": [1, 2]}
    data = make_cifar(tmp_path / "cifar", train=spec["workload"]["train_examples"],
                      test=spec["workload"]["val_examples"])
    spec["workload"].update(dataset="cifar10", dataset_url=str(data))
    spec["results"] = str(tmp_path / "results")
    path = tmp_path / "torch-local.yaml"
    path.write_text(yaml.safe_dump(spec))
    started = time.monotonic()
    proc = cli(tmp_path, "run", str(path), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=360)
    assert proc.returncode == 0, out
    took = time.monotonic() - started

    records = ResultStore(f"file://{tmp_path}/results").read()
    assert records and not any(r.preempted for r in records), out
    by = {(r.params["mode"], r.params["workers"], r.metric): r for r in records}
    steps = spec["workload"]["steps_per_epoch"]
    for mode in ("ddp", "pipeline"):
        for workers in (1, 2):
            images = by[(mode, workers, "images_per_s")]
            meta = images.metadata
            assert meta["backend"] == "gloo" and meta["device"] == "cpu"
            assert meta["step"] == meta["steps_total"] == steps  # the target epochs, all steps
            world = workers if mode == "ddp" else 2  # pipeline: 2 stages on 2 ranks
            assert meta["world_size"] == world and meta["processes_per_vm"] == world // workers
            assert images.value > 0 and by[(mode, workers, "epochs")].value == 1.0
            epoch = by[(mode, workers, "epoch_time_s")].value
            assert by[(mode, workers, "epochs_per_min")].value == pytest.approx(60 / epoch)
            assert 0.0 <= by[(mode, workers, "val_accuracy")].value <= 1.0
            assert by[(mode, workers, "train_time_s")].value >= epoch * 0.99
            # images/s counts every process's share: the global batch per step
            assert images.value == pytest.approx(
                steps * spec["workload"]["batch_size"] / by[(mode, workers, "train_time_s")].value)

    report = (tmp_path / "report" / "report.md").read_text()
    section = report[report.index("## PyTorch Wide ResNet"):]
    header = next(line for line in section.splitlines() if line.startswith("| configuration"))
    for column in ("images/s", "epochs/min", "time to target epochs (s)", "speedup",
                   "parallel efficiency", "processes per VM"):
        assert f"| {column} |" in header
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| local |")]
    assert [(r[1], r[2], r[3]) for r in rows] == [("ddp", "1", "1"), ("ddp", "2", "1"),
                                                  ("pipeline", "1", "2"), ("pipeline", "2", "1")]
    speed = header.split(" | ").index("speedup")
    assert rows[0][speed] == "1"  # the base: DDP with one process
    base = by[("ddp", 1, "train_time_s")].value
    two = by[("ddp", 2, "train_time_s")].value
    assert float(rows[1][speed]) == pytest.approx(base / two, rel=1e-3)
    assert (tmp_path / "report" / "torch_speedup.png").stat().st_size > 1000
    # the spec's scaling axis and work: speedup over workers, the time and cost of 1,000 epochs
    scaled = report[report.index("## Scaling over workers"):]
    assert "time for 1,000 epochs (s)" in scaled and "cost for 1,000 epochs (USD)" in scaled
    epm = {w: by[("ddp", w, "epochs_per_min")].value for w in (1, 2)}
    line = next(row for row in scaled.splitlines() if row.startswith("| local · mode=ddp | 2 |"))
    assert float(line.split(" | ")[3]) == pytest.approx(epm[2] / epm[1], rel=1e-3)
    print(f"torch-local: 4 groups in {took:.0f} s")
