"""What an attempt keeps beside its records, in its group's own keys (`runs/<run>/<group>.<n>/`,
the prefix a member's grant already allows: `runs/<run>/<group>.*`):

    runs/<run>/<group>.<n>/intermediate.jsonl      values reported while the attempt runs
                                                   (per epoch or step: metadata `step`,
                                                   `epoch`), rewritten whole at each report;
                                                   a search's pruner reads them
    runs/<run>/<group>.<n>/artifacts/<path>        the files the workload wrote to its
                                                   artifacts folder ($SPOTBENCH_ARTIFACTS_DIR:
                                                   model weights), at most MAX_ARTIFACT_BYTES
                                                   and MAX_ARTIFACT_FILES per attempt

Like the attempt files, what a group wrote is data: intermediate records that claim another
group or run are rejected, reads are bounded, and only regular files of the artifacts folder
are stored (a symlink out of it is skipped, with a note).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from spotbench.results.model import MAX_ATTEMPT_BYTES, MAX_RECORDS, Result
from spotbench.results.records import AttemptFiles
from spotbench.results.storage import store_errors

ARTIFACTS_ENV = "SPOTBENCH_ARTIFACTS_DIR"
ARTIFACTS = "artifacts"
INTERMEDIATE = "intermediate.jsonl"
MAX_ARTIFACT_BYTES = 256 << 20  # per attempt: what the store keeps of its artifacts folder
MAX_ARTIFACT_FILES = 1000


@dataclass
class ArtifactSelection:
    """The files of an artifacts folder an attempt stores (relative name, local path, size)
    and what it leaves out, one sentence each (the cap named)."""

    files: list[tuple[str, Path, int]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(size for _, _, size in self.files)

    def note(self) -> str | None:
        if not self.left_out:
            return None
        shown = "; ".join(self.left_out[:3])
        more = f" (+{len(self.left_out) - 3} more)" if len(self.left_out) > 3 else ""
        return f"artifacts not stored: {shown}{more}"


def select_artifacts(folder: str | Path, cap_bytes: int = MAX_ARTIFACT_BYTES,
                     cap_files: int = MAX_ARTIFACT_FILES) -> ArtifactSelection:
    """The regular files under `folder` (sorted by name) that fit the caps. Symlinks and
    other special files are left out (a link could name any file on the host)."""
    out = ArtifactSelection()
    root = Path(folder)
    if not root.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                out.left_out.append(f"{rel} is not a regular file (a link or device)")
            elif len(out.files) >= cap_files:
                out.left_out.append(f"{rel}: more than {cap_files} files (MAX_ARTIFACT_FILES)")
            elif out.total_bytes + info.st_size > cap_bytes:
                out.left_out.append(
                    f"{rel} ({info.st_size} bytes) would pass the cap of {cap_bytes} bytes per "
                    "attempt (spotbench.results.MAX_ARTIFACT_BYTES): write smaller files")
            else:
                out.files.append((rel, path, info.st_size))
    return out


class AttemptExtras(AttemptFiles):
    """An attempt's intermediate values and artifacts (see the module's docstring)."""

    def attempt_folder(self, run: str, group: str, attempt: int) -> str:
        return self.path("runs", run, f"{group}.{attempt}")

    def next_attempt(self, run: str, group: str) -> int:
        """The number the group's next attempt file gets (`write_group`'s choice)."""
        stored = {p.rsplit("/", 1)[-1] for p in self.group_files(run, group)}
        return next(n for n in range(1, 1000) if f"{group}.{n}.jsonl" not in stored)

    # ---- intermediate values -------------------------------------------------------
    @store_errors
    def write_intermediate(self, run: str, group: str, attempt: int, records: list[Result]) -> str:
        """Store the attempt's intermediate values so far (the whole list, replacing the last)."""
        body = "".join(r.model_dump_json() + "\n" for r in records[-MAX_RECORDS:]).encode()
        path = f"{self.attempt_folder(run, group, attempt)}/{INTERMEDIATE}"
        self.write_whole(path, body)
        return path

    @store_errors
    def intermediate(self, run: str, group: str, attempt: int | None = None) -> list[Result]:
        """The intermediate values of one attempt (default: the latest that reported any),
        oldest first; records claiming another group or run are left out (noted)."""
        if attempt is None:
            found = self._glob(self.path("runs", run, f"{group}.*", INTERMEDIATE))
            numbers = sorted(int(n) for p in found
                             if (n := p.rsplit("/", 2)[-2].removeprefix(f"{group}.")).isdigit())
            if not numbers:
                return []
            attempt = numbers[-1]
        path = f"{self.attempt_folder(run, group, attempt)}/{INTERMEDIATE}"
        try:
            with self.fs.open(path, "rb") as fh:
                data = fh.read(MAX_ATTEMPT_BYTES + 1)
        except FileNotFoundError:
            return []
        if len(data) > MAX_ATTEMPT_BYTES:
            self._skip("skipped %s: more than %d bytes", path, MAX_ATTEMPT_BYTES)
            return []
        out = []
        for n, line in enumerate(data.splitlines()[:MAX_RECORDS], 1):
            try:
                record = Result.model_validate_json(line)
            except (ValidationError, ValueError):
                self._skip("skipped %s:%d: not a valid record", path, n)
                continue
            if record.group != group or record.run != run:
                self._skip("rejected %s:%d: it claims group %r of run %r", path, n, record.group, record.run)
                continue
            out.append(record)
        return out

    # ---- artifacts ----------------------------------------------------------------------
    @store_errors
    def store_artifacts(self, run: str, group: str, attempt: int, selection: ArtifactSelection) -> list[str]:
        """Upload the selected files beside the attempt; returns their stored paths."""
        stored = []
        for rel, local, _ in selection.files:
            stored.append(self.write_raw(run, group, f"{ARTIFACTS}/{rel}", local.read_bytes(), attempt=attempt))
        return stored

    @store_errors
    def artifacts(self, run: str, group: str, attempt: int) -> dict[str, int]:
        """Stored artifact name (relative) → size in bytes, of one attempt."""
        prefix = f"{self.attempt_folder(run, group, attempt)}/{ARTIFACTS}/"
        try:
            found = self.fs.find(prefix.rstrip("/"), detail=True)
        except FileNotFoundError:
            return {}
        return {p.rstrip("/")[len(prefix):]: int(info.get("size") or 0)
                for p, info in sorted(found.items()) if p.startswith(prefix)}

    @store_errors
    def download_artifacts(self, run: str, group: str, attempt: int, out: Path) -> list[Path]:
        """Copy one attempt's artifacts into `out` (names kept; nothing outside `out`)."""
        written = []
        base = out.resolve()
        for rel in self.artifacts(run, group, attempt):
            target = (base / rel).resolve()
            if base not in target.parents:  # a stored name like ../x never leaves `out`
                self._skip("skipped artifact %r: its name leaves the output folder", rel)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with self.fs.open(f"{self.attempt_folder(run, group, attempt)}/{ARTIFACTS}/{rel}", "rb") as src:
                target.write_bytes(src.read(MAX_ARTIFACT_BYTES + 1)[:MAX_ARTIFACT_BYTES])
            written.append(target)
        return written
