"""A torch run's checkpoints in the group's folder of the results store (shared layout and
grants: `workloads.checkpoint_store`).

The writer process saves `ckpt-<step>.pt` into the member's local folder (whole, then
renamed); the leader member uploads the newest one it finds (`Uploader.poll`, every second
and once more when training ends or is stopped) with its own — renewed — grant, and
before starting torchrun downloads the latest stored one for the writer to resume from.
"""

from __future__ import annotations

import logging
from pathlib import Path

from workloads.checkpoint_store import GroupCheckpoints
from workloads.torch_cifar.files import CKPT_PREFIX

log = logging.getLogger("spotbench.torch")


def step_of(path: Path) -> int:
    return int(path.name[len(CKPT_PREFIX):].split(".", 1)[0])


class TorchCheckpoints(GroupCheckpoints):
    def resume_file(self, into: Path) -> tuple[int, Path] | None:
        """(step, local file) of the latest stored checkpoint, or None."""
        into.mkdir(parents=True, exist_ok=True)
        fetched = self.fetch(into)
        if fetched is None:
            return None
        latest, files = fetched
        log.info("resuming from the checkpoint at step %d (%s)", latest["step"], self.url)
        return int(latest["step"]), files[0]


class Uploader:
    """Uploads the newest complete `ckpt-<step>.pt` of `folder` once, removes older ones."""

    def __init__(self, store: TorchCheckpoints, folder: Path):
        self.store, self.folder = store, folder
        self.uploaded = -1

    def poll(self) -> int:
        found = sorted(self.folder.glob(f"{CKPT_PREFIX}*.pt"), key=step_of)
        if found and step_of(found[-1]) > self.uploaded:
            newest = found[-1]
            self.store.put([newest], step_of(newest), newest.name[:-len(".pt")])
            self.uploaded = step_of(newest)
        for old in found[:-1]:
            old.unlink(missing_ok=True)
        return self.uploaded
