"""Where a store's files live and how they are read and written: paths under the store's
root, globbing without "folder" requests, whole-file writes (temporary name + rename on a
local disk; one PUT on object stores), bounded reads of control's small files, and
`StoreError` for whatever the filesystem raises."""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from glob import escape as glob_escape
from glob import has_magic
from typing import TYPE_CHECKING, Any, TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem

from spotbench.results.model import StoreError

if TYPE_CHECKING:
    from spotbench.lease import ConditionalObjects

# the store's filesystem → its conditional requests (the control lease's), from the cloud
# the store is on (`Provider.lease_objects`); None: a local folder's file lock
LeaseObjects = Callable[[Any], "ConditionalObjects | None"]

log = logging.getLogger("spotbench.results")

T = TypeVar("T")

_ATTEMPT_FILE = re.compile(r"^(?P<group>[^/]+)\.(?P<n>[0-9]{1,6})\.jsonl$")


def store_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """OSError from the filesystem → StoreError naming the store and the step."""
    @functools.wraps(fn)
    def wrapper(self: Storage, *args: Any, **kwargs: Any) -> T:
        try:
            return fn(self, *args, **kwargs)
        except StoreError:
            raise
        except OSError as exc:
            raise StoreError(f"results store {self.url}: {fn.__name__} failed: {exc}") from exc
    return wrapper


class Storage:
    """The files of one sweep's results under one fsspec URL."""

    def __init__(self, url: str, *, writer: Callable[[str, bytes], None] | None = None,
                 lease_objects: LeaseObjects | None = None, **storage_options: Any):
        """`writer(path, data)`: how objects are written on an object store when this
        identity may only read it (a GCP member writes with its group's POST policy).
        `lease_objects(fs)`: the conditional requests the control lease is written with on
        an object store (`Provider.lease_objects` of the store's cloud; spotbench.lease)."""
        self.url = url.rstrip("/")
        self._writer = writer
        self._lease_objects = lease_objects
        if "://" in self.url and not self.url.startswith(("file://", "local://")):
            # an object store: list afresh every time (a warm function must see what members
            # stored since its last call), with this store's own client
            storage_options.setdefault("use_listings_cache", False)
            storage_options.setdefault("skip_instance_cache", True)
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **storage_options)
        self._local = isinstance(self.fs, LocalFileSystem)

    # ---- paths ------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        """The store's path of `parts` under its root (`path("runs", run)`)."""
        return "/".join([self.root.rstrip("/"), *parts])

    def _glob(self, pattern: str) -> list[str]:
        """Paths matching `pattern` (`*` within one path segment), sorted.

        On object stores: one delimiter listing (`ls`: one level, objects and common
        prefixes) of each folder a magic segment stands in, never a recursive listing, so
        what a group stores under `runs/<run>/<group>.<n>/…` costs a reader of `runs/` or of
        `runs/<run>/launches/` nothing (issue #38; s3fs's own glob also asks for "folder"
        objects, which a prefix-scoped identity is refused). A literal segment after a magic
        one is not checked: the reader of the path finds out."""
        if self._local:
            return sorted(self.fs.glob(pattern))
        parts = pattern.split("/")
        head = next(i for i, part in enumerate(parts) if has_magic(part))
        found = ["/".join(parts[:head])]
        for part in parts[head:]:
            if not has_magic(part):
                found = [f"{base}/{part}" for base in found]
                continue
            found = [f"{base}/{name}" for base in found for name in self.names(base)
                     if fnmatch.fnmatchcase(name, part)]
        return sorted(found)

    def names(self, folder: str) -> list[str]:
        """The names one level below `folder` (objects and "folders"), from one delimiter
        listing on object stores; [] when there is nothing."""
        try:
            entries = self.fs.ls(folder, detail=False)
        except FileNotFoundError:
            return []
        base = folder.rstrip("/")
        return sorted({name for name in (str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries
                                         if str(e).rstrip("/") != base) if name})

    def _exists(self, path: str) -> bool:
        """Whether `path` is stored. On object stores this lists the parent's prefix instead
        of asking for the object: the sweep's identities may list their own prefix, and a
        request for a missing object without a bucket-wide listing grant is refused (403)."""
        if self._local:
            return self.fs.exists(path)
        parent, name = path.rsplit("/", 1)
        try:  # `prefix`: one listing of exactly this name (s3fs, gcsfs; others list the parent)
            found = self.fs.find(parent, prefix=name)
        except FileNotFoundError:
            return False
        return path in {p.rstrip("/") for p in found}

    def prefixed(self, folder: str, prefix: str) -> list[str]:
        """Paths under `folder` whose name starts with `prefix` (`closed.`), from one listing
        of exactly that prefix on object stores (s3fs, gcsfs): for names only control
        writes, whatever else the folder holds."""
        if self._local:
            return sorted(self.fs.glob(f"{folder}/{glob_escape(prefix)}*"))
        try:
            found = self.fs.find(folder, prefix=prefix)
        except FileNotFoundError:
            return []
        head = f"{folder.rstrip('/')}/{prefix}"
        return sorted(p for p in (f.rstrip("/") for f in found)
                      if p.startswith(head) and "/" not in p[len(folder.rstrip("/")) + 1:])

    def write_whole(self, path: str, data: bytes) -> None:
        """Store `data` at `path` whole: a reader sees the old file or the new, never a part."""
        if self._local:  # rename is atomic on one filesystem
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            try:
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, path)
            except OSError:  # e.g. a full disk: leave no partial temporary file behind
                try:
                    self.fs.rm_file(tmp)
                except OSError:
                    pass
                raise
        elif self._writer is not None:  # the group's grant, not this identity, may write
            self._writer(path, data)
        else:  # object stores have no folders: no makedirs (on GCS it needs buckets.get)
            self.fs.pipe_file(path, data)

    def group_files(self, run: str, group: str) -> list[str]:
        """The records files of `group`'s attempts in `run` (one per attempt), sorted."""
        return sorted(self._glob(self.path("runs", run, f"{group}.*.jsonl")))

    @staticmethod
    def _owner(path: str) -> tuple[str, str, int] | None:
        """(run, group, attempt) a records file belongs to, from its path
        `runs/<run>/<group>.<n>.jsonl` (the path is what the group's identity may write, the
        body is not); None for any other name under a group's prefix (`<group>.x.jsonl`)."""
        run_dir, name = path.rsplit("/", 2)[-2:]
        m = _ATTEMPT_FILE.match(name)
        return (run_dir, m["group"], int(m["n"])) if m else None

    @store_errors
    def probe(self) -> None:
        """Write and remove a small file: raises StoreError when results could not be stored."""
        path = self.path(f".spotbench-probe-{uuid.uuid4().hex}")
        self.write_whole(path, b"probe")
        self.fs.rm_file(path)


# ---- reading control's small files (bounded; a bad one is logged, never raised) ----------
_SMALL = 64 << 10


def read_small(fs: Any, path: str) -> bytes:
    """At most 64 KiB + 1 of `path` (b"" when there is no such object)."""
    raw = read_stored(fs, path)
    return b"" if raw is None else raw


def read_stored(fs: Any, path: str) -> bytes | None:
    """At most 64 KiB + 1 of `path`; None when there is no such object."""
    return read_head(fs, path, _SMALL + 1)


def read_head(fs: Any, path: str, limit: int) -> bytes | None:
    """The first `limit` bytes of `path` (None: no such object), in one ranged GET on object
    stores (`bytes=0-<limit-1>`): no HEAD first, as `open` makes (s3fs asks for the object's
    details; a member's object may be of any size, so it is never read whole)."""
    try:
        return bytes(fs.cat_file(path, start=0, end=limit))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a range on an empty object: 416 InvalidRange (S3, GCS)
        if "InvalidRange" in str(exc) or "416" in str(exc):
            return b""
        raise


def json_object(fs: Any, path: str, raw: bytes | None = None) -> dict[str, Any] | None:
    raw = read_small(fs, path) if raw is None else raw
    try:
        if len(raw) > _SMALL:
            raise ValueError(f"more than {_SMALL} bytes")
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("skipped %s: %s", path, exc)
        return None
    return data


def read_time(raw: bytes, path: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(raw.decode().strip())
    except (ValueError, UnicodeDecodeError):
        log.warning("skipped %s: not a time", path)
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)

