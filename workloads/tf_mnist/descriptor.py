"""The `tf-mnist` workload: distributed TensorFlow training of the MNIST CNN, parameter
server (chief + ps + workers) or all-reduce (workers). Members talk TF's gRPC on one port.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from spotbench.workload import Images, Params, Tracked, Workload

GRPC_PORT = 2223


class TfMnistParams(Params):
    """Distributed TensorFlow training of the MNIST CNN."""

    name: Literal["tf-mnist"] = "tf-mnist"
    strategy: Literal["parameter_server", "multi_worker_mirrored"] = "parameter_server"
    workers: int = Field(1, ge=1, le=256)
    ps: int = Field(1, ge=1, le=64, description="parameter servers (parameter_server only)")
    steps: int = Field(1000, ge=1)
    warmup_steps: int = Field(10, ge=0, description="steps excluded from throughput")
    batch_size: int = Field(64, ge=1, description="global batch size")
    learning_rate: float = Field(0.01, gt=0)
    dataset: Literal["mnist", "digits", "synthetic"] = "mnist"
    dataset_url: str | None = Field(None, description="folder/URL with the four MNIST IDX files")
    checkpoint_every: int = Field(0, ge=0, description="steps between checkpoints; 0 = off")
    stall_s: float = Field(
        10.0, ge=0, le=3600,
        description="training taking this much longer between two sync points than its steps "
                    "at the attempt's median pace (a stopped worker, a paused VM), or clocks "
                    "drifting apart by this much, marks the attempt contaminated; 0: off",
    )


def roles(params: TfMnistParams) -> list[tuple[str, int]]:
    """chief, ps…, workers… (parameter server) or workers only (all-reduce)."""
    if params.strategy == "parameter_server":
        return (
            [("chief", 0)]
            + [("ps", i) for i in range(params.ps)]
            + [("worker", i) for i in range(params.workers)]
        )
    return [("worker", i) for i in range(params.workers)]


WORKLOAD = Workload(
    name="tf-mnist",
    params=TfMnistParams,
    module="workloads.tf_mnist",
    roles=roles,
    role_codes={"chief": "c", "ps": "ps", "worker": "w"},
    port=GRPC_PORT,
    images=Images(cpu="tf-cpu", gpu="tf-gpu"),
    metrics=("train_time_s", "steps", "steps_per_s", "examples_per_s", "val_accuracy", "val_loss",
             "test_accuracy", "test_loss"),
    report="spotbench.report.tf:section",
    history=(
        Tracked("steps_per_s", "TF steps/s", "higher"),
        Tracked("train_time_s", "TF time to train", "lower"),
    ),
    description=TfMnistParams.__doc__ or "",
    checkpoints=lambda params: params.checkpoint_every > 0,
)
