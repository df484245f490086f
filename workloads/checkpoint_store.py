"""A group's checkpoints in the results store, whatever writes them (TF, PyTorch).

Layout: `{results_url}/checkpoints/{group}/{run}/` holding the checkpoint's files,
`latest.json` ({"step": k, "prefix": "ckpt-k"}, written after the files, so it never points
at a half-uploaded checkpoint) and `progress.json` (the step a preempted attempt had
reached, to count the steps redone). The run id is part of the path: the next run of the
same group starts from scratch. The clouds' member grants (issue #29) allow exactly this
folder; fsspec copies to any store (file://, gs://, s3://, memory://).

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

log = logging.getLogger("spotbench.checkpoints")


class GroupCheckpoints:
    """The folder and its bookkeeping; a workload adds how its checkpoint is written."""

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

    def put(self, files: list[Path], step: int, prefix: str) -> None:
        """Upload `files` (named `<prefix>.*`) as the checkpoint at `step`, then point
        `latest.json` at it and remove the one before."""
        self._makedirs()
        for f in files:
            self.fs.put_file(str(f), self._p(f.name))
        previous = self.latest()
        self._write_json("latest.json", {"step": step, "prefix": prefix})
        if previous and previous["prefix"] != prefix:
            self._remove(self._files_of(previous["prefix"]))
        log.info("checkpoint at step %d stored in %s", step, self.url)

    def fetch(self, into: Path) -> tuple[dict[str, Any], list[Path]] | None:
        """Download the latest checkpoint's files into `into`: (latest.json, local paths),
        or None when there is none."""
        latest = self.latest()
        if latest is None:
            return None
        remote = self._files_of(latest["prefix"])
        if not remote:
            raise RuntimeError(f"{self.url}/latest.json names {latest['prefix']} but its files are missing")
        local = [into / Path(path).name for path in remote]
        for path, target in zip(remote, local, strict=True):
            self.fs.get_file(path, str(target))
        return latest, local

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
