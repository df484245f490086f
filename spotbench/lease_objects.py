"""The objects a lease is written as: the conditional requests of each object store.

`spotbench.lease` needs four requests of a store (`ConditionalObjects`): create if absent,
read with its version and the server's write time, replace at a version, delete at a
version. S3 (through s3fs's own client: `If-None-Match: *`, `If-Match: <ETag>`) and GCS
(through gcsfs's own session: `ifGenerationMatch`) answer them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = ["ConditionalObjects", "GcsObjects", "S3Objects", "Stored"]


@dataclass(frozen=True)
class Stored:
    """The lease object as the store has it."""

    body: bytes
    version: str  # S3 ETag, GCS generation
    written: datetime  # the server's time of the last write


class ConditionalObjects(Protocol):
    """The conditional requests a lease needs from one object store."""

    def create(self, path: str, body: bytes) -> str | None:
        """Write `path` only if absent: its new version, or None when it exists."""

    def read(self, path: str) -> Stored | None:
        """The object, or None when absent."""

    def replace(self, path: str, body: bytes, version: str) -> str | None:
        """Overwrite only if still at `version`: the new version, or None."""

    def delete(self, path: str, version: str) -> bool:
        """Delete only if still at `version`; False when it was not."""


def _precondition_failed(exc: BaseException) -> bool:
    """An S3 answer (through s3fs) saying a condition did not hold (412; 409 when another
    conditional write to the key was in flight)."""
    if isinstance(exc, FileExistsError):
        return True
    response = getattr(exc.__cause__, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


class _BucketObjects:
    """Objects of a bucket filesystem (s3fs, gcsfs), addressed as its `bucket/key` paths."""

    def __init__(self, fs: Any):
        self.fs = fs

    def _split(self, path: str) -> tuple[str, str]:
        bucket, key, _ = self.fs.split_path(path)
        return bucket, key


class S3Objects(_BucketObjects):
    """Conditional requests through s3fs's own client (its credentials and endpoint)."""

    def _put(self, path: str, body: bytes, **condition: str) -> str | None:
        bucket, key = self._split(path)
        try:
            out = self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=body, **condition)
        except OSError as exc:
            if _precondition_failed(exc):
                return None
            raise
        return out["ETag"]

    def create(self, path: str, body: bytes) -> str | None:
        return self._put(path, body, IfNoneMatch="*")

    def replace(self, path: str, body: bytes, version: str) -> str | None:
        try:
            return self._put(path, body, IfMatch=version)
        except FileNotFoundError:  # deleted meanwhile
            return None

    def read(self, path: str) -> Stored | None:
        """Its version and time from a listing of exactly its key: a GET of a missing key is
        a 403, not a 404, for an identity that may list only its prefix (the Lambda role)."""
        bucket, key = self._split(path)
        listed = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=key, MaxKeys=1)
        found = next((o for o in listed.get("Contents", []) if o["Key"] == key), None)
        if found is None:
            return None
        # no GET of the body (who holds it): the object may go before it, and that GET
        # would be a denial in the account's audit log; Busy names the holder's last write
        return Stored(b"", found["ETag"], found["LastModified"])

    def delete(self, path: str, version: str) -> bool:
        bucket, key = self._split(path)
        try:
            self.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=version)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise
        return True


class GcsObjects(_BucketObjects):
    """Conditional requests through gcsfs's own session (its credentials and endpoint)."""

    def _upload(self, path: str, body: bytes, generation: str) -> str | None:
        bucket, key = self._split(path)
        try:
            out = self.fs.call("POST", f"{self.fs._location}/upload/storage/v1/b/{{}}/o", bucket,
                               uploadType="media", name=key, ifGenerationMatch=generation,
                               data=body, json_out=True,
                               headers={"Content-Type": "application/json"})
        except FileExistsError:  # 412: the generation did not match
            return None
        return str(out["generation"])

    def create(self, path: str, body: bytes) -> str | None:
        return self._upload(path, body, "0")

    def replace(self, path: str, body: bytes, version: str) -> str | None:
        return self._upload(path, body, version)

    def read(self, path: str) -> Stored | None:
        bucket, key = self._split(path)
        try:
            meta = self.fs.call("GET", "b/{}/o/{}", bucket, key, json_out=True)
            _, body = self.fs.call("GET", "b/{}/o/{}", bucket, key, alt="media",
                                   generation=meta["generation"])
        except FileNotFoundError:
            return None
        written = datetime.fromisoformat(meta["updated"].replace("Z", "+00:00"))
        return Stored(body, str(meta["generation"]), written)

    def delete(self, path: str, version: str) -> bool:
        bucket, key = self._split(path)
        try:
            self.fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=version)
        except (FileNotFoundError, FileExistsError):
            return False
        return True
