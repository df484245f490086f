"""An object-store double for fsspec: a flat namespace of keys, answered as S3 and GCS answer,
every request counted and, optionally, slowed (issue #38).

- `ls(folder)`: a delimiter listing (`ListObjectsV2 Delimiter=/`, GCS `objects.list
  delimiter=/`): the objects directly under `folder/` and one entry per common prefix, 1,000
  entries per page, one request per page;
- `find(folder, prefix=…)`: a listing without delimiter of every key under `folder/<prefix>`,
  one request per 1,000 keys;
- a read, a write (one PUT, whole), a delete, `info`: one request each. A missing key is
  `FileNotFoundError` (after its request).

`latency_s` sleeps that long per request (20 ms models a cloud function's round trip to its
bucket). Register it with `register()`; a store URL `objdouble://<bucket>/<prefix>` then finds
the one instance of that bucket (`ObjectStoreDouble.bucket(name)`).
"""

from __future__ import annotations

import bisect
import io
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any, ClassVar

import fsspec
from fsspec.spec import AbstractFileSystem

PAGE = 1000
PROTOCOL = "objdouble"


class ObjectStoreDouble(AbstractFileSystem):
    protocol = PROTOCOL
    cachable = False
    root_marker = ""
    _buckets: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, *args: Any, latency_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__()
        self.latency_s = latency_s

    # -- the state of every bucket, shared by every instance (as a cloud's is) -----------------
    @classmethod
    def bucket(cls, name: str) -> dict[str, Any]:
        return cls._buckets.setdefault(name, {"objects": {}, "keys": [], "requests": Counter(),
                                              "read": set(), "latency_s": 0.0,
                                              "lock": threading.Lock()})

    @classmethod
    def reset(cls, name: str, latency_s: float = 0.0) -> dict[str, Any]:
        cls._buckets.pop(name, None)
        state = cls.bucket(name)
        state["latency_s"] = latency_s
        return state

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        path = str(path)
        if path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3:]
        return path.rstrip("/")

    def _state(self, path: str) -> tuple[dict[str, Any], str]:
        name, _, key = self._strip_protocol(path).partition("/")
        return self.bucket(name), key

    def _request(self, state: dict[str, Any], kind: str, n: int = 1) -> None:
        state["requests"][kind] += n
        delay = self.latency_s or state["latency_s"]
        if delay:
            time.sleep(delay * n)

    # -- direct access for a test's setup (no request counted) ---------------------------------
    @classmethod
    def put(cls, bucket: str, key: str, data: bytes) -> None:
        state = cls.bucket(bucket)
        with state["lock"]:
            if key not in state["objects"]:
                bisect.insort(state["keys"], key)
            state["objects"][key] = (data, datetime.now(UTC))

    # -- listings ------------------------------------------------------------------------------
    def _under(self, state: dict[str, Any], prefix: str) -> list[str]:
        keys = state["keys"]
        lo = bisect.bisect_left(keys, prefix)
        hi = bisect.bisect_left(keys, prefix + "\U0010ffff")
        return keys[lo:hi]

    def ls(self, path: str, detail: bool = False, **kwargs: Any) -> list[Any]:
        state, key = self._state(path)
        bucket = self._strip_protocol(path).partition("/")[0]
        prefix = f"{key}/" if key else ""
        entries: dict[str, str] = {}
        keys = state["keys"]
        i = bisect.bisect_left(keys, prefix)
        while i < len(keys) and keys[i].startswith(prefix):
            head, slash, _ = keys[i][len(prefix):].partition("/")
            entries.setdefault(head, "directory" if slash else "file")
            # a common prefix is one entry, however many keys it holds (as the stores answer)
            i = bisect.bisect_left(keys, f"{prefix}{head}/\U0010ffff") if slash else i + 1
        self._request(state, "list", max(1, -(-len(entries) // PAGE)))
        if not entries and key:
            raise FileNotFoundError(path)
        names = [f"{bucket}/{prefix}{name}" for name in sorted(entries)]
        if not detail:
            return names
        return [{"name": n, "type": entries[n.rsplit("/", 1)[-1]], "size": 0} for n in names]

    def find(self, path: str, maxdepth: Any = None, withdirs: bool = False, detail: bool = False,
             prefix: str = "", **kwargs: Any) -> Any:
        state, key = self._state(path)
        bucket = self._strip_protocol(path).partition("/")[0]
        base = f"{key}/" if key else ""
        found = self._under(state, base + prefix)
        self._request(state, "list", max(1, -(-len(found) // PAGE)))
        names = [f"{bucket}/{k}" for k in found]
        return {n: {"name": n, "type": "file"} for n in names} if detail else names

    # -- objects -------------------------------------------------------------------------------
    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        state, key = self._state(path)
        self._request(state, "head")
        if key not in state["objects"]:
            raise FileNotFoundError(path)
        data, when = state["objects"][key]
        return {"name": self._strip_protocol(path), "size": len(data), "type": "file",
                "mtime": when}

    def modified(self, path: str) -> datetime:
        return self.info(path)["mtime"]

    def cat_file(self, path: str, start: Any = None, end: Any = None, **kwargs: Any) -> bytes:
        state, key = self._state(path)
        self._request(state, "get")
        state["read"].add(key)
        if key not in state["objects"]:
            raise FileNotFoundError(path)
        return state["objects"][key][0][start:end]

    def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> None:
        state, key = self._state(path)
        self._request(state, "put")
        bucket = self._strip_protocol(path).partition("/")[0]
        self.put(bucket, key, bytes(value))

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        self.pipe_file(path, b"")

    def rm_file(self, path: str) -> None:
        state, key = self._state(path)
        self._request(state, "delete")
        with state["lock"]:
            if state["objects"].pop(key, None) is None:
                raise FileNotFoundError(path)
            state["keys"].remove(key)

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "r" in mode:
            return io.BytesIO(self.cat_file(path))
        fs = self

        class Upload(io.BytesIO):
            def close(self) -> None:
                if not self.closed:
                    fs.pipe_file(path, self.getvalue())
                super().close()

        return Upload()

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        return None

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        return None


def register() -> None:
    fsspec.register_implementation(PROTOCOL, ObjectStoreDouble, clobber=True)


def requests_of(bucket: str) -> Counter:
    return ObjectStoreDouble.bucket(bucket)["requests"]


def read_keys(bucket: str) -> set[str]:
    """Every key read (GET) since the bucket was reset."""
    return ObjectStoreDouble.bucket(bucket)["read"]
