"""A small local Cloud Storage JSON API: exactly the calls gcsfs makes for `ResultStore`.

Serves object metadata get, list (prefix / delimiter / pages), media download (with Range),
multipart and simple media upload (honouring `ifGenerationMatch=0`), delete, and bucket get.
It is mounted on a `GoogleEndpoint` (tests/clouds/google_endpoint.py), which records who
called and may refuse calls the declared IAM policy does not allow; point gcsfs at it with
`STORAGE_EMULATOR_HOST=<endpoint url>`.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import base64
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

JSON = "application/json"


@dataclass
class FakeGcs:
    buckets: dict[str, dict[str, bytes]] = field(default_factory=dict)
    _generation: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_bucket(self, name: str) -> None:
        self.buckets.setdefault(name, {})

    def objects(self, bucket: str) -> dict[str, bytes]:
        return self.buckets[bucket]

    # -- request handling ---------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, list[str]], body: bytes,
               headers: dict[str, str]) -> tuple[int, Any, str]:  # fmt: skip
        with self._lock:
            parts = [unquote(p) for p in path.strip("/").split("/")]
            # /storage/v1/b/B[/o[/NAME]], /upload/storage/v1/b/B/o, /download/storage/v1/b/B/o/NAME
            kind = parts[0]
            if kind in ("upload", "download"):
                parts = parts[1:]
            if parts[:3] != ["storage", "v1", "b"] or len(parts) < 4:
                return 404, _error(404, f"fake GCS does not serve {method} {path}"), JSON
            bucket = parts[3]
            if bucket not in self.buckets:
                return 404, _error(404, f"The specified bucket {bucket} does not exist."), JSON
            name = "/".join(parts[5:]) if len(parts) > 5 else None
            q = {k: v[0] for k, v in query.items()}
            if len(parts) == 4:
                return 200, {"kind": "storage#bucket", "name": bucket, "id": bucket}, JSON
            if kind == "upload" and method == "POST":
                return self._upload(bucket, q, body, headers)
            if name is None and method == "GET":
                return 200, self._list(bucket, q), JSON
            if name is None:
                return 400, _error(400, f"unsupported {method} on objects"), JSON
            objs = self.buckets[bucket]
            if name not in objs:
                return 404, _error(404, f"No such object: {bucket}/{name}"), JSON
            if method == "DELETE":
                del objs[name]
                return 204, None, JSON
            if kind == "download" or q.get("alt") == "media":
                data = objs[name]
                rng = headers.get("range") or headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start_s, _, end_s = rng[6:].partition("-")
                    start = int(start_s or 0)
                    end = int(end_s) + 1 if end_s else len(data)
                    return 206, data[start:end], "application/octet-stream"
                return 200, data, "application/octet-stream"
            return 200, self._meta(bucket, name), JSON

    def _meta(self, bucket: str, name: str) -> dict[str, Any]:
        data = self.buckets[bucket][name]
        return {
            "kind": "storage#object", "bucket": bucket, "name": name, "size": str(len(data)),
            "generation": "1", "metageneration": "1", "contentType": "application/octet-stream",
            "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
            "updated": "2026-01-01T00:00:00.000Z", "timeCreated": "2026-01-01T00:00:00.000Z",
            "storageClass": "STANDARD", "id": f"{bucket}/{name}/1",
        }  # fmt: skip

    def _list(self, bucket: str, q: dict[str, str]) -> dict[str, Any]:
        prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
        items, prefixes = [], set()
        for name in sorted(self.buckets[bucket]):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
            if delim and delim in rest:
                prefixes.add(prefix + rest.split(delim, 1)[0] + delim)
            else:
                items.append(self._meta(bucket, name))
        return {"kind": "storage#objects", "items": items, "prefixes": sorted(prefixes)}

    def _upload(self, bucket: str, q: dict[str, str], body: bytes,
                headers: dict[str, str]) -> tuple[int, Any, str]:  # fmt: skip
        ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        if q.get("uploadType") == "multipart":
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                f"Content-Type: {ctype}\r\n\r\n".encode() + body
            )
            meta_part, data_part = list(msg.iter_parts())[:2]
            import json

            name = json.loads(meta_part.get_payload(decode=True))["name"]
            data = data_part.get_payload(decode=True) or b""
        elif q.get("uploadType") == "media":
            name, data = q["name"], body
        else:
            return 400, _error(400, f"fake GCS: uploadType {q.get('uploadType')!r}"), JSON
        objs = self.buckets[bucket]
        if q.get("ifGenerationMatch") == "0" and name in objs:
            return 412, _error(412, "At least one of the pre-conditions you specified did not hold."), JSON
        objs[name] = data
        return 200, self._meta(bucket, name), JSON


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "errors": [{"message": message}]}}
