"""What the member and its training processes hand each other (no torch import here)."""

JOB_ENV = "SPOTBENCH_TORCH_JOB"  # the job (JSON) the member gives torchrun's processes
PROGRESS = "progress.json"  # the writer's progress after every step
METRICS = "metrics.json"  # the writer's numbers when training ended
CKPT_PREFIX = "ckpt-"  # ckpt-<step>.pt
