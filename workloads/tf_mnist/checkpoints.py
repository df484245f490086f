"""Checkpoints in the results store, so a group restarted after preemption resumes.

Layout: `{results_url}/checkpoints/{group}/{run}/` holding `ckpt-<step>.index`,
`ckpt-<step>.data-*`, `latest.json` ({"step": k, "prefix": "ckpt-k"}, written after the
files, so it never points at a half-uploaded checkpoint) and `progress.json` (the step a
preempted attempt had reached, to count the steps redone). The run id is part of the path:
the next run of the same group starts from scratch.

TensorFlow writes the checkpoint to a local temporary folder; fsspec copies it to any
store (file://, gs://, s3://, memory://).

On object stores the member's identity is scoped to the sweep's prefix (on AWS: objects
under it, listings with `s3:prefix`): the store finds its files with one listing of its own
folder and never asks for a missing object (a 403 without a bucket-wide listing grant), a
"folder" (s3fs's `exists`/`glob`/recursive `rm` do) or the bucket (`makedirs`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from workloads.checkpoint_store import GroupCheckpoints, steps_redone

__all__ = ["CheckpointStore", "steps_redone"]

log = logging.getLogger("spotbench.tf_mnist")


class CheckpointStore(GroupCheckpoints):
    """A tf.train.Checkpoint's files (`ckpt-<step>.index`, `.data-*`) in the group's folder."""

    def save(self, checkpoint: Any, step: int, *, upload: bool = True) -> None:
        """Write `checkpoint` (a tf.train.Checkpoint) at `step`; upload unless this task's
        copy is a throwaway (non-chief multi-worker tasks must still take part in saving)."""
        prefix = f"ckpt-{step}"
        local = Path(self._tmp.name) / prefix
        checkpoint.write(str(local))
        files = sorted(Path(self._tmp.name).glob(f"{prefix}.*"))
        if upload:
            self.put(files, step, prefix)
        for f in files:
            f.unlink()

    def restore(self, checkpoint: Any) -> int:
        """Load the latest stored checkpoint into `checkpoint`; its step, or 0 if none."""
        fetched = self.fetch(Path(self._tmp.name))
        if fetched is None:
            return 0
        latest, _ = fetched
        checkpoint.read(str(Path(self._tmp.name) / latest["prefix"])).assert_existing_objects_matched()
        log.info("resumed from checkpoint at step %d (%s)", latest["step"], self.url)
        return int(latest["step"])
