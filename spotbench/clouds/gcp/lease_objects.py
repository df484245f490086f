"""The control lease's objects on GCS: generation-matched requests through the results
store's own gcsfs session (its credentials and endpoint), handed to `spotbench.lease` by
`GcpProvider.lease_objects` (the lease itself knows no cloud).

GCS preconditions (docs/platform.md): `ifGenerationMatch=0` writes only when no live object
has the name, `ifGenerationMatch=<generation>` only when it is still at that generation;
otherwise 412 Precondition Failed (gcsfs raises it as `FileExistsError`). The write is the
JSON API's simple upload (`POST <endpoint>/upload/storage/v1/b/<bucket>/o?uploadType=media
&name=<key>`), addressed from gcsfs's public `base` (its endpoint's `.../storage/v1/`), so an
emulator or private endpoint the store is configured with is the lease's too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from spotbench.lease import Stored

__all__ = ["GcsObjects"]

_API = "storage/v1/"


class GcsObjects:
    """`spotbench.lease.ConditionalObjects` on GCS, through gcsfs's public `call` and `base`,
    addressed as the store's `bucket/key` paths."""

    def __init__(self, fs: Any):
        self.fs = fs

    def _split(self, path: str) -> tuple[str, str]:
        bucket, key, _ = self.fs.split_path(path)
        return bucket, key

    def upload_url(self) -> str:
        base = str(self.fs.base)  # "<endpoint>/storage/v1/"
        if not base.endswith(_API):
            raise ValueError(f"gcsfs base URL {base!r} does not end in {_API!r}: cannot address "
                             "the upload endpoint; pin a gcsfs release that has it")
        return f"{base.removesuffix(_API)}upload/{_API}b/{{}}/o"

    def _upload(self, path: str, body: bytes, generation: str) -> str | None:
        bucket, key = self._split(path)
        try:
            out = self.fs.call("POST", self.upload_url(), bucket, uploadType="media", name=key,
                               ifGenerationMatch=generation, data=body, json_out=True,
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
