"""Checkpoints in the results store, so a group restarted after preemption resumes.

Layout: `{results_url}/checkpoints/{group}/{run}/` holding `ckpt-<step>.index`,
`ckpt-<step>.data-*`, `latest.json` ({"step": k, "prefix": "ckpt-k"}, written after the
files, so it never points at a half-uploaded checkpoint) and `progress.json` (the step a
preempted attempt had reached, to count the steps redone). The run id is part of the path:
the next run of the same group starts from scratch.

TensorFlow writes the checkpoint to a local temporary folder; fsspec copies it to any
store (file://, gs://, s3://, memory://).
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import fsspec

log = logging.getLogger("spotbench.tf_mnist")


class CheckpointStore:
    def __init__(self, results_url: str, group: str, run: str):
        self.url = f"{results_url.rstrip('/')}/checkpoints/{group}/{run}"
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        self._tmp = tempfile.TemporaryDirectory(prefix="spotbench-ckpt-")

    def _p(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def _read_json(self, name: str) -> dict[str, Any] | None:
        path = self._p(name)
        if not self.fs.exists(path):
            return None
        return json.loads(self.fs.cat_file(path))

    def _write_json(self, name: str, data: dict[str, Any]) -> None:
        self.fs.makedirs(self.root, exist_ok=True)
        self.fs.pipe_file(self._p(name), json.dumps(data).encode())

    # ---- checkpoints ----------------------------------------------------------------
    def latest(self) -> dict[str, Any] | None:
        return self._read_json("latest.json")

    def save(self, checkpoint: Any, step: int, *, upload: bool = True) -> None:
        """Write `checkpoint` (a tf.train.Checkpoint) at `step`; upload unless this task's
        copy is a throwaway (non-chief multi-worker tasks must still take part in saving)."""
        prefix = f"ckpt-{step}"
        local = Path(self._tmp.name) / prefix
        checkpoint.write(str(local))
        files = sorted(Path(self._tmp.name).glob(f"{prefix}.*"))
        if upload:
            self.fs.makedirs(self.root, exist_ok=True)
            for f in files:
                self.fs.put_file(str(f), self._p(f.name))
            previous = self.latest()
            self._write_json("latest.json", {"step": step, "prefix": prefix})
            if previous and previous["prefix"] != prefix:
                for old in self.fs.glob(self._p(previous["prefix"] + ".*")):
                    self.fs.rm_file(old)
            log.info("checkpoint at step %d stored in %s", step, self.url)
        for f in files:
            f.unlink()

    def restore(self, checkpoint: Any) -> int:
        """Load the latest stored checkpoint into `checkpoint`; its step, or 0 if none."""
        latest = self.latest()
        if latest is None:
            return 0
        prefix = latest["prefix"]
        remote = self.fs.glob(self._p(prefix + ".*"))
        if not remote:
            raise RuntimeError(f"{self.url}/latest.json names {prefix} but its files are missing")
        for path in remote:
            self.fs.get_file(path, str(Path(self._tmp.name) / Path(path).name))
        checkpoint.read(str(Path(self._tmp.name) / prefix)).assert_existing_objects_matched()
        log.info("resumed from checkpoint at step %d (%s)", latest["step"], self.url)
        return int(latest["step"])

    # ---- progress of a preempted attempt --------------------------------------------------
    def write_progress(self, step: int) -> None:
        self._write_json("progress.json", {"step": step})

    def progress(self) -> int | None:
        data = self._read_json("progress.json")
        return int(data["step"]) if data else None

    def clear(self) -> None:
        """Remove this group-run's checkpoints (after a complete run: nothing to resume)."""
        if self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)


def steps_redone(progress: int | None, resumed_from: int) -> int:
    """Steps the previous attempt completed after its last checkpoint (done again now)."""
    return max(0, progress - resumed_from) if progress is not None else 0
