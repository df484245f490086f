"""The control lease's objects on S3: conditional writes through the results store's own
s3fs client (its credentials and endpoint), handed to `spotbench.lease` by
`AwsProvider.lease_objects` (the lease itself knows no cloud).

S3 conditional writes (docs/platform.md): `PutObject` with `If-None-Match: *` writes only
when the key is absent, with `If-Match: <ETag>` only when the object is still at that ETag;
otherwise 412 Precondition Failed (409 ConditionalRequestConflict while another conditional
write to the key is in flight). `DeleteObject` takes `If-Match` too.
"""

from __future__ import annotations

from typing import Any

from spotbench.lease import Stored

__all__ = ["S3Objects"]


def _precondition_failed(exc: BaseException) -> bool:
    """An S3 answer (through s3fs) saying a condition did not hold (412; 409 when another
    conditional write to the key was in flight)."""
    if isinstance(exc, FileExistsError):
        return True
    response = getattr(exc.__cause__, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


class S3Objects:
    """`spotbench.lease.ConditionalObjects` on S3, through s3fs's public `call_s3` (botocore's
    `put_object`, `list_objects_v2`, `delete_object`), addressed as the store's
    `bucket/key` paths."""

    def __init__(self, fs: Any):
        self.fs = fs

    def _split(self, path: str) -> tuple[str, str]:
        bucket, key, _ = self.fs.split_path(path)
        return bucket, key

    def _put(self, path: str, body: bytes, **condition: str) -> str | None:
        bucket, key = self._split(path)
        try:
            out = self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=body, **condition)
        except OSError as exc:
            if _precondition_failed(exc):
                return None
            raise
        return str(out["ETag"])

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

    def read_body(self, path: str) -> Stored | None:
        """The object with its body, in one GET (its ETag is the body's: a search's journal
        appends conditionally on it, `spotbench.search.journal`); None when absent."""
        bucket, key = self._split(path)
        try:
            out = self.fs.call_s3("get_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None
        from fsspec.asyn import sync

        stream = out["Body"]  # aiobotocore's: read on s3fs's own loop
        body = sync(self.fs.loop, stream.read) if hasattr(self.fs, "loop") else stream.read()
        return Stored(body, str(out["ETag"]), out["LastModified"])

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
