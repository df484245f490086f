"""A lease on one object of the results store: mutual exclusion between function calls.

Cloud functions run on many machines at once (two start ticks, a start racing a `done`);
they share only the results bucket. The lease is one object in it, written with the
store's conditional requests, so exactly one caller holds it:

- acquire: create the object only if it does not exist (S3 `If-None-Match: *`, GCS
  `ifGenerationMatch=0`). If it exists and has not been written for `ttl_s` (the server's
  timestamp), its holder died: take it over with a write conditional on the version seen
  (S3 `If-Match: <ETag>`, GCS `ifGenerationMatch=<generation>`), so of two callers that saw
  the same dead lease only one wins.
- hold: a thread rewrites it (conditionally) every `ttl_s / 4`, so a live holder's lease
  never expires, however long the cloud takes; a crashed one expires within `ttl_s`.
- release: delete it, conditional on the version last written (someone who took over an
  expired lease keeps theirs).

- fence: a holder whose lease was taken over (it stalled past `ttl_s`: a paused function,
  a partition) must not act on what it read. `check()` reads the object and raises
  `LeaseLost` (a `Busy`: the call is answered 503 and retried) unless it is still at the
  version this holder last wrote; `fenced(obj, lease.check, methods)` calls it before each
  mutating method of the cloud and the store (spotbench.control's lock).

A caller that cannot get the lease within `wait_s` gets `Busy`, with the seconds after which
a retry makes sense (the functions answer 503 + Retry-After). On a local folder the lease is
an OS file lock (released by the kernel when its holder dies); `memory://` stores (tests)
lock within the process. On an object store the lease is written with the store's
`ConditionalObjects`, which this module does not know how to make: whoever builds the store
hands them over (the cloud's `Provider.lease_objects`: `clouds/aws/lease_objects.py` for S3,
`clouds/gcp/lease_objects.py` for GCS). A store without them gets no lease: a clear error
rather than silently not excluding anyone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("spotbench.lease")

LEASE_TTL_S = 60.0  # a holder that stopped renewing for this long is taken over
LEASE_WAIT_S = 30.0  # how long a caller waits for the lease before answering Busy


@dataclass(frozen=True)
class Stored:
    """The lease object as the store has it."""

    body: bytes
    version: str  # S3 ETag, GCS generation
    written: datetime  # the server's time of the last write


class ConditionalObjects(Protocol):
    """The conditional requests a lease needs from one object store (each cloud answers them
    in its own package, `spotbench.clouds.<cloud>.lease_objects`)."""

    def create(self, path: str, body: bytes) -> str | None:
        """Write `path` only if absent: its new version, or None when it exists."""

    def read(self, path: str) -> Stored | None:
        """The object, or None when absent."""

    def replace(self, path: str, body: bytes, version: str) -> str | None:
        """Overwrite only if still at `version`: the new version, or None."""

    def delete(self, path: str, version: str) -> bool:
        """Delete only if still at `version`; False when it was not."""


class Busy(RuntimeError):
    """Someone else holds the lease; retry after `retry_after_s` seconds."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LeaseLost(Busy):
    """This holder's lease was taken over: it must stop acting (its reads are stale)."""


# ---- the lease ---------------------------------------------------------------------------
class Lease:
    """Held with `with lease:`; raises Busy when another holder keeps it past `wait_s`."""

    def __init__(self, objects: ConditionalObjects, path: str, *, holder: str,
                 ttl_s: float = LEASE_TTL_S, wait_s: float = LEASE_WAIT_S,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        if ttl_s <= 0 or wait_s < 0:
            raise ValueError(f"lease ttl_s must be > 0 and wait_s >= 0 (got {ttl_s}, {wait_s})")
        self.objects, self.path, self.holder = objects, path, holder
        self.ttl_s, self.wait_s, self.clock = ttl_s, wait_s, clock
        self.lost = False  # set when a renewal found the lease taken over
        self._id = uuid.uuid4().hex
        self._version: str | None = None
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "id": self._id, "ttl_s": self.ttl_s,
                           "at": self.clock().isoformat()}).encode()

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        pause = 0.05
        while True:
            seen = self._try()
            if seen is None:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._busy(seen)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.5)
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name=f"lease {self.path}", daemon=True)
        self._renewer.start()

    def _try(self) -> Stored | None:
        """Take the lease (None) or return what holds it."""
        version = self.objects.create(self.path, self._body())
        if version is not None:
            self._version = version
            return None
        current = self.objects.read(self.path)
        if current is None:  # released meanwhile: the next try may create it
            return Stored(b"{}", "", self.clock())
        age = (self.clock() - current.written).total_seconds()
        if age <= self.ttl_s:
            return current
        version = self.objects.replace(self.path, self._body(), current.version)
        if version is None:  # another caller took the dead lease first
            return current
        log.warning("lease %s: took over from %s, silent for %.0f s (its holder died?)",
                    self.path, _holder(current), age)
        self._version = version
        return None

    def _busy(self, seen: Stored) -> Busy:
        age = max(0.0, (self.clock() - seen.written).total_seconds())
        retry = max(1, min(10, math.ceil(self.ttl_s - age)))  # a live holder renews: soon
        return Busy(f"the sweep's control lock {self.path} is held by {_holder(seen)} "
                    f"(waited {self.wait_s:g} s); retry in {retry} s", retry)

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            with self._guard:
                if self._version is None or self._stop.is_set():
                    return
                try:
                    version = self.objects.replace(self.path, self._body(), self._version)
                except OSError as exc:  # transient: the next renewal tries again
                    log.warning("lease %s: renewal failed: %s", self.path, exc)
                    continue
                if version is None:
                    self.lost = True
                    log.error("lease %s: taken over by another caller while held by %s",
                              self.path, self.holder)
                    self._version = None
                    return
                self._version = version

    def check(self) -> None:
        """Raise `LeaseLost` unless this caller still holds the lease: a renewal found it
        taken over, or the object is no longer at the version this holder last wrote."""
        with self._guard:
            version = self._version
            current = self.objects.read(self.path) if version is not None and not self.lost else None
            if version is None or self.lost or current is None or current.version != version:
                self.lost = True
                raise LeaseLost(f"the sweep's control lock {self.path} is no longer held by "
                                f"{self.holder} (taken over after it stalled for its TTL, "
                                f"{self.ttl_s:g} s); nothing more is done, retry", 1)

    def release(self) -> None:
        self._stop.set()
        with self._guard:
            version, self._version = self._version, None
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        if version is None:
            return
        try:
            if not self.objects.delete(self.path, version):
                log.error("lease %s: taken over before release by %s", self.path, self.holder)
        except OSError as exc:  # it expires by itself within ttl_s
            log.warning("lease %s: release failed (%s); it expires in %g s", self.path, exc,
                        self.ttl_s)


def _holder(stored: Stored) -> str:
    try:
        data = json.loads(stored.body)
        return f"{data['holder']} since {data['at']}"
    except (ValueError, KeyError, TypeError):
        return f"another call (renewed at {stored.written:%H:%M:%S} UTC)"


class _Fenced:
    """`target` whose `methods` first call `check` (see `fenced`)."""

    def __init__(self, target: Any, check: Callable[[], None], methods: frozenset[str]):
        self._target, self._check, self._methods = target, check, methods

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name not in self._methods or not callable(value):
            return value

        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._check()
            return value(*args, **kwargs)

        return guarded


def fenced(target: Any, check: Callable[[], None], methods: frozenset[str] | set[str]) -> Any:
    """`target` (a Cloud, a ResultStore) whose mutating `methods` call `check` (a lease's
    `check`) before they act: a holder that lost the lease stops at its next action."""
    return _Fenced(target, check, frozenset(methods))


# ---- per store -----------------------------------------------------------------------------
def lease_for(fs: Any, path: str, *, holder: str, objects: ConditionalObjects | None = None,
              ttl_s: float = LEASE_TTL_S,
              wait_s: float = LEASE_WAIT_S) -> contextlib.AbstractContextManager:
    """The lease on `path` of the fsspec filesystem `fs` (see the module's docstring): a file
    lock on a local folder, in-process on memory://, else written with `objects` (the
    store's conditional requests, from its cloud's provider)."""
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if protocols & {"file", "local"}:
        return _file_lock(path, wait_s)
    if objects is None and "memory" in protocols:
        objects = MEMORY
    if objects is None:
        raise NotImplementedError(
            f"no control lock on this {'/'.join(sorted(protocols))} store: it was built without "
            "its cloud's conditional objects (ResultStore(url, lease_objects="
            "provider.lease_objects)); keep results on the sweep's cloud (gs://, s3://) or a "
            "local folder")
    return Lease(objects, path, holder=holder, ttl_s=ttl_s, wait_s=wait_s)


@contextlib.contextmanager
def _file_lock(path: str, wait_s: float) -> Iterator[None]:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Busy(f"the sweep's control lock {path} is held (waited {wait_s:g} s); "
                               "retry in 5 s", 5) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


class MemoryObjects:
    """In-process objects with versions (memory:// stores, and tests of the lease itself)."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.clock = clock
        self.objects: dict[str, Stored] = {}
        self._lock = threading.Lock()
        self._n = 0

    def _write(self, path: str, body: bytes) -> str:
        self._n += 1
        self.objects[path] = Stored(body, str(self._n), self.clock())
        return str(self._n)

    def create(self, path: str, body: bytes) -> str | None:
        with self._lock:
            return None if path in self.objects else self._write(path, body)

    def read(self, path: str) -> Stored | None:
        with self._lock:
            return self.objects.get(path)

    def replace(self, path: str, body: bytes, version: str) -> str | None:
        with self._lock:
            current = self.objects.get(path)
            if current is None or current.version != version:
                return None
            return self._write(path, body)

    def delete(self, path: str, version: str) -> bool:
        with self._lock:
            current = self.objects.get(path)
            if current is None or current.version != version:
                return False
            del self.objects[path]
            return True


MEMORY = MemoryObjects()
