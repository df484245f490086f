"""One training process, started by `torchrun` (`python -m workloads.torch_cifar.train`).

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT; the member that launched
torchrun hands the job in `SPOTBENCH_TORCH_JOB` (JSON: the workload's params, the folder to
write into, whether this node is the group's leader, a checkpoint to resume from).

    ddp       every process holds the whole Wide ResNet (DistributedDataParallel): the global
              batch is split across them, gradients all-reduced (NCCL on GPUs, gloo on CPU)
    pipeline  the network in two stages on two ranks (torch.distributed.pipelining): stage 0
              sends its activations to stage 1, gradients come back, over `microbatches`
              micro-batches per batch (GPipe schedule)

The *writer* (local rank 0 on the leader's node; not necessarily global rank 0, c10d orders
nodes by address) writes `progress.json` after every step, `ckpt-<step>.pt` every
`checkpoint_every` steps (written whole, then renamed) and `metrics.json` at the end.
torch and numpy only: no spotbench import.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from workloads.torch_cifar import data
from workloads.torch_cifar.files import CKPT_PREFIX, JOB_ENV, METRICS, PROGRESS
from workloads.torch_cifar.model import WideResNet, wide_resnet_stages



def write_json(path: Path, value: dict[str, Any]) -> None:
    """Whole or not at all: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


class Job:
    def __init__(self, spec: dict[str, Any]):
        self.params: dict[str, Any] = spec["params"]
        self.out = Path(spec["out"])
        self.leader = bool(spec.get("leader"))
        self.resume: str | None = spec.get("resume")
        self.threads = int(spec.get("threads") or 0)
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        flags: list[Any] = [None] * self.world
        dist.all_gather_object(flags, self.leader and self.local_rank == 0)
        if flags.count(True) != 1:
            raise RuntimeError(f"expected one writer (local rank 0 of the leader), found {flags.count(True)}")
        self.writer_rank = flags.index(True)
        self.writer = self.rank == self.writer_rank

    def p(self, key: str) -> Any:
        return self.params[key]


def device_of(local_rank: int, gpus: int = 0) -> torch.device:
    """This process's GPU, else the CPU; a VM with `gpus` GPUs whose torch sees none is an
    error (not a CPU run measured as a GPU one)."""
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    if gpus:
        raise RuntimeError(
            f"this VM has {gpus} GPU(s) and its NVIDIA driver reaches the container, but torch "
            f"{torch.__version__} sees no CUDA device (its CUDA build: {torch.version.cuda}); "
            "the GPU image (images/torch-gpu) carries a CUDA build")
    return torch.device("cpu")


class Trainer:
    """What both modes share: data, optimizer steps, checkpoints, timing."""

    def __init__(self, job: Job, device: torch.device):
        self.job, self.device = job, device
        p = job.params
        (self.x, self.y), (self.vx, self.vy) = data.load(
            p["dataset"], p.get("dataset_url"), p["train_examples"], p["val_examples"])
        self.batch = p["batch_size"]
        per_epoch = len(self.x) // self.batch
        if per_epoch < 1:
            raise ValueError(f"batch_size {self.batch} is larger than the {len(self.x)} training images")
        self.steps_per_epoch = min(per_epoch, p["steps_per_epoch"] or per_epoch)
        self.total_steps = self.steps_per_epoch * p["epochs"]
        self.step = 0

    # ---- batches: the same order on every rank (seeded by epoch) ----------------------
    def batch_indices(self, step: int) -> torch.Tensor:
        epoch, i = divmod(step, self.steps_per_epoch)
        order = torch.randperm(len(self.x), generator=torch.Generator().manual_seed(1000 + epoch))
        return order[i * self.batch:(i + 1) * self.batch]

    def lr_at(self, step: int) -> float:
        """Cosine decay from the spec's learning rate over the whole run."""
        base = self.job.p("learning_rate")
        return base * 0.5 * (1 + math.cos(math.pi * step / max(1, self.total_steps)))

    def set_lr(self, optimizer: torch.optim.Optimizer) -> None:
        for group in optimizer.param_groups:
            group["lr"] = self.lr_at(self.step)

    # ---- checkpoints ------------------------------------------------------------------
    def resume(self) -> dict[str, Any] | None:
        """The writer reads the checkpoint it was handed; every rank gets it."""
        box: list[Any] = [None]
        if self.job.writer and self.job.resume:
            box[0] = torch.load(self.job.resume, map_location="cpu", weights_only=True)
        dist.broadcast_object_list(box, src=self.job.writer_rank)
        return box[0]

    def save(self, state: dict[str, Any] | None) -> None:
        if not self.job.writer or state is None:
            return
        path = self.job.out / f"{CKPT_PREFIX}{self.step}.pt"
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)

    def evaluate(self, model: nn.Module) -> tuple[float, float]:
        """(accuracy, mean loss) of `model` on the validation set (the writer's copy)."""
        model.eval()
        correct, loss = 0, 0.0
        with torch.no_grad():
            for i in range(0, len(self.vx), 256):
                x, y = self.vx[i:i + 256].to(self.device), self.vy[i:i + 256].to(self.device)
                out = model(x)
                loss += float(F.cross_entropy(out, y, reduction="sum"))
                correct += int((out.argmax(1) == y).sum())
        model.train()
        return correct / max(1, len(self.vx)), loss / max(1, len(self.vx))

    # ---- the loop -----------------------------------------------------------------------
    def run(self) -> None:
        job = self.job
        resumed = self.restore(self.resume())
        self.step = resumed
        started = time.perf_counter()
        epoch_started, epoch_times, images = started, [], 0
        every = job.p("checkpoint_every")
        while self.step < self.total_steps:
            loss = self.train_step(self.batch_indices(self.step))
            self.step += 1
            images += self.batch
            if self.step % self.steps_per_epoch == 0:
                now = time.perf_counter()
                epoch_times.append(now - epoch_started)
                epoch_started = now
            if every and self.step % every == 0 and self.step < self.total_steps:
                self.save(self.state())
            if job.writer:
                write_json(job.out / PROGRESS, self.progress(started, images, epoch_times, resumed, loss))
        train_time = time.perf_counter() - started
        accuracy, val_loss = self.validate()
        if job.writer:
            result = self.progress(started, images, epoch_times, resumed, loss)
            result.update(train_time_s=train_time, val_accuracy=accuracy, val_loss=val_loss)
            write_json(job.out / METRICS, result)

    def progress(self, started: float, images: int, epoch_times: list[float], resumed: int,
                 loss: float | None) -> dict[str, Any]:
        elapsed = time.perf_counter() - started
        return {"step": self.step, "steps_total": self.total_steps, "resumed_from_step": resumed,
                "steps_per_epoch": self.steps_per_epoch, "epochs_done": self.step / self.steps_per_epoch,
                "elapsed_s": elapsed, "images": images, "epoch_times_s": epoch_times,
                "world_size": self.job.world, "train_loss": loss, "backend": dist.get_backend(),
                "device": self.device.type, "torch_version": torch.__version__}

    # ---- per mode -------------------------------------------------------------------------
    def train_step(self, idx: torch.Tensor) -> float | None:
        raise NotImplementedError

    def state(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def restore(self, state: dict[str, Any] | None) -> int:
        raise NotImplementedError

    def validate(self) -> tuple[float, float]:
        raise NotImplementedError


class DataParallel(Trainer):
    """DDP: each rank trains on its share of every global batch."""

    def __init__(self, job: Job, device: torch.device):
        super().__init__(job, device)
        if self.batch % job.world:
            raise ValueError(f"batch_size {self.batch} does not split over {job.world} processes")
        model = WideResNet(job.p("depth"), job.p("width")).to(device)
        self.model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=job.p("learning_rate"), momentum=0.9,
                                   weight_decay=5e-4, nesterov=True)

    def train_step(self, idx: torch.Tensor) -> float | None:
        share = idx.chunk(self.job.world)[self.job.rank]
        x, y = self.x[share].to(self.device), self.y[share].to(self.device)
        self.set_lr(self.opt)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    def state(self) -> dict[str, Any] | None:
        return {"mode": "ddp", "step": self.step, "model": self.model.module.state_dict(),
                "optimizer": self.opt.state_dict()}

    def restore(self, state: dict[str, Any] | None) -> int:
        if state is None:
            return 0
        self.model.module.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        return int(state["step"])

    def validate(self) -> tuple[float, float]:
        result = self.evaluate(self.model.module) if self.job.writer else (0.0, 0.0)
        dist.barrier()
        return result


class Pipeline(Trainer):
    """Two stages on two ranks, GPipe over micro-batches (torch.distributed.pipelining)."""

    STAGES = 2

    def __init__(self, job: Job, device: torch.device):
        super().__init__(job, device)
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

        if job.world != self.STAGES:
            raise ValueError(f"mode pipeline runs {self.STAGES} stages on {self.STAGES} processes; "
                             f"this run has {job.world} (workers × processes_per_vm must be 2)")
        micro = job.p("microbatches")
        if self.batch % micro:
            raise ValueError(f"batch_size {self.batch} does not split into {micro} micro-batches")
        torch.manual_seed(job.p("seed"))  # the same initial network on both ranks
        self.stages = wide_resnet_stages(job.p("depth"), job.p("width"))
        self.mine = self.stages[job.rank].to(device)
        self.opt = torch.optim.SGD(self.mine.parameters(), lr=job.p("learning_rate"), momentum=0.9,
                                   weight_decay=5e-4, nesterov=True)
        # static shapes: no metadata forward on an empty tensor (it would feed BatchNorm's
        # running statistics garbage)
        mb = self.batch // micro
        between = torch.empty(mb, 32 * job.p("width"), 16, 16, device=device)
        if job.rank == 0:
            shapes = {"input_args": torch.empty(mb, 3, 32, 32, device=device),
                      "output_args": between, "output_grads": between}
        else:
            shapes = {"input_args": between.requires_grad_(), "input_grads": between.detach(),
                      "output_args": torch.empty(mb, 10, device=device)}
        stage = PipelineStage(self.mine, job.rank, self.STAGES, device, **shapes)
        self.schedule = ScheduleGPipe(stage, n_microbatches=micro, loss_fn=F.cross_entropy)
        self.last = job.rank == self.STAGES - 1

    def train_step(self, idx: torch.Tensor) -> float | None:
        self.set_lr(self.opt)
        self.opt.zero_grad(set_to_none=True)
        if not self.last:
            self.schedule.step(self.x[idx].to(self.device))
            loss = None
        else:
            losses: list[torch.Tensor] = []
            self.schedule.step(target=self.y[idx].to(self.device), losses=losses)
            loss = float(torch.stack(losses).detach().mean())
        self.opt.step()
        return loss

    def _gathered(self, part: Any) -> list[Any] | None:
        """Every rank's `part`, in stage order, at the writer (None elsewhere)."""
        parts: list[Any] | None = [None] * self.STAGES if self.job.writer else None
        dist.gather_object(part, parts, dst=self.job.writer_rank)
        return parts

    def state(self) -> dict[str, Any] | None:
        parts = self._gathered({"model": self.mine.state_dict(), "optimizer": self.opt.state_dict()})
        if parts is None:
            return None
        return {"mode": "pipeline", "step": self.step, "stages": parts}

    def restore(self, state: dict[str, Any] | None) -> int:
        if state is None:
            return 0
        if state.get("mode") != "pipeline":
            raise ValueError("the checkpoint is of a ddp run; a pipeline run cannot resume from it")
        mine = state["stages"][self.job.rank]
        self.mine.load_state_dict(mine["model"])
        self.opt.load_state_dict(mine["optimizer"])
        return int(state["step"])

    def validate(self) -> tuple[float, float]:
        """The writer puts both stages together and evaluates the whole network."""
        parts = self._gathered({k: v.cpu() for k, v in self.mine.state_dict().items()})
        result = (0.0, 0.0)
        if parts is not None:
            model = WideResNet(self.job.p("depth"), self.job.p("width"))
            for stage, sd in zip(model.stages, parts, strict=True):
                stage.load_state_dict(sd)
            result = self.evaluate(model.to(self.device))
        dist.barrier()
        return result


def main() -> int:
    spec = json.loads(os.environ[JOB_ENV])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = device_of(local_rank, int(spec.get("gpus") or 0))
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    try:
        job = Job(spec)
        torch.manual_seed(job.p("seed"))
        trainer = (Pipeline if job.p("mode") == "pipeline" else DataParallel)(job, device)
        trainer.run()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
