"""The `tf-mnist` workload: distributed TensorFlow training of the MNIST CNN, parameter
server (chief + ps + workers) or all-reduce (workers). Members talk TF's gRPC, one port per
TF task (a worker VM runs `processes_per_vm` of them: GRPC_PORT, GRPC_PORT + 1, …).
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
    processes_per_vm: int = Field(
        1, ge=1, le=64,
        description="TF worker tasks per worker VM, each its own TF_CONFIG task index and port "
                    "(the member starts the others and stops them when it ends): the cluster "
                    "has workers × processes_per_vm worker tasks, the batch split over them all",
    )
    steps: int = Field(1000, ge=1, description="training steps (unless `epochs` is given)")
    epochs: int | None = Field(
        None, ge=1, le=1000,
        description="passes over the training split: steps = epochs × (training examples ÷ "
                    "batch_size), and validation accuracy is recorded at each epoch's end; "
                    "None: `steps`, validated once at the end",
    )
    warmup_steps: int = Field(10, ge=0, description="steps excluded from throughput")
    batch_size: int = Field(64, ge=1, description="global batch size")
    learning_rate: float = Field(0.01, gt=0, le=10)
    filters: int = Field(32, ge=1, le=1024, description="filters of the first conv layer (the second has twice as many)")
    kernel_size: int = Field(5, ge=1, le=28, description="side of both conv layers' square kernels")
    dense_units: int = Field(1024, ge=1, le=16384, description="units of the dense layer")
    dropout: float = Field(0.4, ge=0, lt=1, description="dropout rate after the dense layer (training only)")
    validation_fraction: float = Field(
        0.1, ge=0, lt=1,
        description="share of the training data held out as the validation split (fixed "
                    "seed): what a search optimizes (`val_accuracy`); the test set is "
                    "reported (`test_accuracy`), never trained or searched on",
    )
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
    report="workloads.tf_mnist.report:section",
    history=(
        Tracked("steps_per_s", "TF steps/s", "higher"),
        Tracked("train_time_s", "TF time to train", "lower"),
    ),
    description=TfMnistParams.__doc__ or "",
    local_modules=("tensorflow", "sklearn"),  # the `tf` extra
    checkpoints=lambda params: params.checkpoint_every > 0,
    member_ports=lambda params: params.processes_per_vm,
)
