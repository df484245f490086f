"""The `torch` workload: PyTorch training of a Wide ResNet on CIFAR-10-shaped data, data
parallel (DDP) over the processes of each VM and across VMs, or model parallel (two
pipeline stages). Every member (VM) runs `torchrun` with c10d rendezvous at the leader
(member 0) on `RDZV_PORT`; see `workloads/torch_cifar/__init__.py`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from spotbench.workload import Images, Params, Tracked, Workload

RDZV_PORT = 29400  # torchrun's c10d rendezvous on the leader (its default port)


class TorchParams(Params):
    """PyTorch Wide ResNet training: DDP or a 2-stage pipeline, over processes and VMs."""

    name: Literal["torch"] = "torch"
    mode: Literal["ddp", "pipeline"] = Field(
        "ddp", description="ddp: data parallel (DistributedDataParallel); pipeline: the network "
                           "in 2 stages on 2 ranks, activations passed between them over micro-batches")
    workers: int = Field(1, ge=1, le=256, description="VMs (torchrun nodes)")
    processes_per_vm: int = Field(
        0, ge=0, le=64,
        description="training processes per VM (torchrun --nproc-per-node); 0: one per GPU (1 "
                    "without), in mode pipeline the 2 stages over the workers (2 // workers)")
    epochs: int = Field(1, ge=1, le=100_000, description="target epochs")
    steps_per_epoch: int = Field(0, ge=0, description="cap on an epoch's steps; 0: the whole training set")
    batch_size: int = Field(128, ge=1, description="global batch, split over the DDP processes")
    learning_rate: float = Field(0.1, gt=0)
    depth: int = Field(10, ge=10, le=100, description="WRN depth, 6n + 4")
    width: int = Field(1, ge=1, le=16, description="WRN widening factor k")
    microbatches: int = Field(4, ge=1, le=256, description="micro-batches per batch (pipeline)")
    dataset: Literal["cifar10", "synthetic"] = "cifar10"
    dataset_url: str | None = Field(
        None, description="folder (path or file://) with CIFAR-10's binary files; default: the image's copy")
    train_examples: int = Field(0, ge=0, description="use only the first N training images; 0: all")
    val_examples: int = Field(0, ge=0, description="validate on the first N test images; 0: all")
    checkpoint_every: int = Field(0, ge=0, description="steps between checkpoints; 0 = off")
    seed: int = 0

    @model_validator(mode="after")
    def _shape(self) -> TorchParams:
        if (self.depth - 4) % 6:
            raise ValueError(f"depth {self.depth}: a Wide ResNet has depth 6n + 4 (10, 16, 22, 28, …)")
        if self.mode == "pipeline":
            if self.workers * (self.processes_per_vm or 2 // self.workers) != 2:
                raise ValueError(
                    f"mode pipeline runs 2 stages on 2 processes: workers × processes_per_vm is "
                    f"{self.workers} × {self.processes_per_vm}; use workers: 2 (one process each) "
                    "or workers: 1 with processes_per_vm: 2")
            if self.batch_size % self.microbatches:
                raise ValueError(f"batch_size {self.batch_size} does not split into "
                                 f"{self.microbatches} micro-batches")
        return self


def roles(params: TorchParams) -> list[tuple[str, int]]:
    """One member per VM; worker 0 is the leader (rendezvous host, records, calls done)."""
    return [("worker", i) for i in range(params.workers)]


WORKLOAD = Workload(
    name="torch",
    params=TorchParams,
    module="workloads.torch_cifar",
    roles=roles,
    role_codes={"worker": "w"},
    port=RDZV_PORT,
    images=Images(cpu="torch-cpu", gpu="torch-gpu"),
    metrics=("images_per_s", "epoch_time_s", "epochs_per_min", "train_time_s", "epochs",
             "val_accuracy", "val_loss"),
    report="workloads.torch_cifar.report:section",
    history=(
        Tracked("images_per_s", "torch images/s", "higher"),
        Tracked("epochs_per_min", "torch epochs/min", "higher"),
    ),
    description=TorchParams.__doc__ or "",
    checkpoints=lambda params: params.checkpoint_every > 0,
)
