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

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

log = logging.getLogger("spotbench.tf_mnist")


class CheckpointStore:
    def __init__(self, results_url: str, group: str, run: str, **storage_options: Any):
        self.url = f"{results_url.rstrip('/')}/checkpoints/{group}/{run}"
        local = "://" not in self.url or self.url.startswith(("file://", "local://"))
        # object stores: list afresh (another attempt's files), with this store's own client;
        # `storage_options`: the group's grant where the cloud grants per group (AWS: its
        # STS session; GCP: its downscoped token, `Provider.group_storage`)
        options = {} if local else {"use_listings_cache": False, "skip_instance_cache": True,
                                    **storage_options}
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **options)
        self.root = self.root.rstrip("/")
        self._local = isinstance(self.fs, LocalFileSystem)
        self._tmp = tempfile.TemporaryDirectory(prefix="spotbench-ckpt-")

    def _p(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _stored(self) -> dict[str, str]:
        """name → path of every file stored in this group-run's folder (one listing)."""
        parent, base = self.root.rsplit("/", 1)
        try:  # `prefix`: only this folder is listed (s3fs, gcsfs; others list the parent)
            found = self.fs.find(parent, prefix=base + "/")
        except FileNotFoundError:
            return {}
        return {p[len(self.root) + 1:]: p for p in found if p.startswith(self.root + "/")}

    def _read_json(self, name: str) -> dict[str, Any] | None:
        if name not in self._stored():
            return None
        return json.loads(self.fs.cat_file(self._p(name)))

    def _write_json(self, name: str, data: dict[str, Any]) -> None:
        self._makedirs()
        self.fs.pipe_file(self._p(name), json.dumps(data).encode())

    def _makedirs(self) -> None:
        if self._local:  # object stores have no folders (and makedirs asks for the bucket)
            self.fs.makedirs(self.root, exist_ok=True)

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
            self._makedirs()
            for f in files:
                self.fs.put_file(str(f), self._p(f.name))
            previous = self.latest()
            self._write_json("latest.json", {"step": step, "prefix": prefix})
            if previous and previous["prefix"] != prefix:
                self._remove(self._files_of(previous["prefix"]))
            log.info("checkpoint at step %d stored in %s", step, self.url)
        for f in files:
            f.unlink()

    def restore(self, checkpoint: Any) -> int:
        """Load the latest stored checkpoint into `checkpoint`; its step, or 0 if none."""
        latest = self.latest()
        if latest is None:
            return 0
        prefix = latest["prefix"]
        remote = self._files_of(prefix)
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
        self._remove(sorted(self._stored().values()))
        if self._local and self.fs.exists(self.root):  # the emptied folder
            self.fs.rm(self.root, recursive=True)

    def _remove(self, paths: list[str]) -> None:
        """One delete per file: a bulk delete (s3fs `rm` of a list) drops the keys the
        store refused without a word, and AWS judges each key on its own anyway."""
        for path in paths:
            self.fs.rm_file(path)

    def _files_of(self, prefix: str) -> list[str]:
        """The stored files of checkpoint `prefix` (`ckpt-<step>.index`, `.data-*`)."""
        return sorted(p for n, p in self._stored().items() if n.startswith(prefix + "."))


def steps_redone(progress: int | None, resumed_from: int) -> int:
    """Steps the previous attempt completed after its last checkpoint (done again now)."""
    return max(0, progress - resumed_from) if progress is not None else 0
