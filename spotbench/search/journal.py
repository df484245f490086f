"""Optuna's JournalStorage over the results store, so any function instance resumes the
study: the journal is one object, `<root>/search/<sweep>.journal`, control's own (a
member's grant reaches `runs/<run>/<group>.*` only: `clouds/gcp/storage_grant.py`,
`clouds/aws/grants.py`).

- a local folder: Optuna's own `JournalFileBackend`, its appends under Optuna's file lock
  (`JournalFileOpenLock`);
- an object store (gs://, s3://, memory://): `ConditionalJournal`, whose every append is a
  write conditional on the version it read (S3 `If-Match`, GCS `ifGenerationMatch`; created
  only if absent the first time), through the same `ConditionalObjects` as the control
  lease (`spotbench.lease`), retried on a lost race, so two writers never lose a log line.
  Control holds the sweep's lease around every study call anyway; the condition makes the
  journal itself safe without it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from typing import Any

from optuna.storages.journal import BaseJournalBackend, JournalFileBackend, JournalFileOpenLock

from spotbench.lease import MEMORY, ConditionalObjects

log = logging.getLogger("spotbench.search")

APPEND_TRIES = 8
MAX_JOURNAL_BYTES = 32 << 20  # a study of thousands of trials is well under this


class JournalConflict(RuntimeError):
    """Another writer kept changing the journal while this one appended (retry the call)."""


class ConditionalJournal(BaseJournalBackend):
    """One journal object, appended with conditional writes (see the module docstring)."""

    def __init__(self, fs: Any, path: str, objects: ConditionalObjects):
        self.fs, self.path, self.objects = fs, path, objects

    def _body(self) -> tuple[bytes, str | None]:
        stored = self.objects.read(self.path)  # the version first: a body read after it is
        if stored is None:                     # never older than the version written over
            return b"", None
        read_body = getattr(self.objects, "read_body", None)  # S3's read lists: no body
        if not stored.body and read_body is not None:
            stored = read_body(self.path)  # body and version of one GET
            if stored is None:
                return b"", None
        body = stored.body
        if not body:
            try:
                with self.fs.open(self.path, "rb") as fh:
                    body = fh.read(MAX_JOURNAL_BYTES + 1)
            except FileNotFoundError:
                return b"", None
        if len(body) > MAX_JOURNAL_BYTES:
            raise JournalConflict(f"the study journal {self.path} is over {MAX_JOURNAL_BYTES} bytes")
        return body, stored.version

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        body, _ = self._body()
        lines = body.splitlines()
        out = []
        for line in lines[log_number_from:]:
            try:
                out.append(json.loads(line))
            except ValueError:  # only control writes it: a torn line means a bug, say so
                log.error("study journal %s: a line that is not JSON was skipped", self.path)
        return out

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        lines = b"".join(json.dumps(entry, separators=(",", ":")).encode() + b"\n" for entry in logs)
        for _ in range(APPEND_TRIES):
            body, version = self._body()
            written = (self.objects.create(self.path, lines) if version is None
                       else self.objects.replace(self.path, body + lines, version))
            if written is not None:
                return
        raise JournalConflict(f"the study journal {self.path} changed under {APPEND_TRIES} "
                              "appends in a row; retry")


def journal_backend(fs: Any, path: str, objects: ConditionalObjects | None) -> BaseJournalBackend:
    """The journal of `path` on the store's filesystem `fs` (see the module docstring)."""
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if protocols & {"file", "local"}:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return JournalFileBackend(path, lock_obj=JournalFileOpenLock(path + ".lock"))
    if objects is None and "memory" in protocols:
        objects = MEMORY
    if objects is None:
        raise NotImplementedError(
            f"no study journal on this {'/'.join(sorted(protocols))} store: it was built without "
            "its cloud's conditional objects (ResultStore(url, lease_objects=provider.lease_objects))")
    return ConditionalJournal(fs, path, objects)
