"""A small local Cloud Storage JSON API: exactly the calls gcsfs makes for `ResultStore`.

Serves object metadata get, list (prefix / delimiter / pages), media download (with Range),
multipart, simple media and resumable upload (gcsfs's `put_file` of 5 MiB or more: the
session's location comes back as a `Location` header, the bytes follow in `Content-Range`
chunks), delete, and bucket get. Every write gives the object a new
generation and the server's `updated` time; uploads, deletes and reads honour
`ifGenerationMatch` (0: only if absent; N: only at generation N) atomically, as GCS does.
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
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

JSON = "application/json"


@dataclass
class FakeGcs:
    buckets: dict[str, dict[str, bytes]] = field(default_factory=dict)
    _generation: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # (bucket, name) → (the bytes written, generation, updated): tests also put bytes into
    # `buckets` directly; bytes that are not the ones recorded count as a new generation
    _written: dict[tuple[str, str], tuple[bytes, int, str]] = field(default_factory=dict)
    # resumable upload id → (bucket, name, initiation query, bytes received so far)
    _sessions: dict[str, tuple[str, str, dict[str, str], bytearray]] = field(default_factory=dict)

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
            if kind == "upload" and "upload_id" in q:
                return self._resume(method, q["upload_id"], body, headers)
            if kind == "upload" and method == "POST":
                return self._upload(bucket, q, body, headers)
            if name is None and method == "GET":
                return 200, self._list(bucket, q), JSON
            if name is None:
                return 400, _error(400, f"unsupported {method} on objects"), JSON
            objs = self.buckets[bucket]
            if name not in objs or q.get("generation", str(self._gen(bucket, name))) != str(
                    self._gen(bucket, name)):
                return 404, _error(404, f"No such object: {bucket}/{name}"), JSON
            if method == "DELETE":
                if not self._matches(bucket, name, q):
                    return 412, _error(412, _PRECONDITION), JSON
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

    def _record(self, bucket: str, name: str) -> tuple[bytes, int, str]:
        data = self.buckets[bucket][name]
        written = self._written.get((bucket, name))
        if written is None or written[0] is not data:
            self._generation += 1
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            written = self._written[(bucket, name)] = (data, self._generation, now)
        return written

    def _gen(self, bucket: str, name: str) -> int:
        return self._record(bucket, name)[1]

    def _matches(self, bucket: str, name: str, q: dict[str, str]) -> bool:
        """`ifGenerationMatch`: 0 = the object does not exist; N = it is at generation N."""
        wanted = q.get("ifGenerationMatch")
        if wanted is None:
            return True
        if name not in self.buckets[bucket]:
            return wanted == "0"
        return wanted == str(self._gen(bucket, name))

    def _meta(self, bucket: str, name: str) -> dict[str, Any]:
        data, generation, updated = self._record(bucket, name)
        return {
            "kind": "storage#object", "bucket": bucket, "name": name, "size": str(len(data)),
            "generation": str(generation), "metageneration": "1",
            "contentType": "application/octet-stream",
            "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
            "updated": updated, "timeCreated": updated,
            "storageClass": "STANDARD", "id": f"{bucket}/{name}/{generation}",
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
        elif q.get("uploadType") == "resumable":
            upload_id = str(len(self._sessions) + 1)
            self._sessions[upload_id] = (bucket, q["name"], q, bytearray())
            location = f"/upload/storage/v1/b/{bucket}/o?uploadType=resumable&upload_id={upload_id}"
            return 200, None, JSON, {"Location": location}  # type: ignore[return-value]
        else:
            return 400, _error(400, f"fake GCS: uploadType {q.get('uploadType')!r}"), JSON
        if not self._matches(bucket, name, q):
            return 412, _error(412, _PRECONDITION), JSON
        self.buckets[bucket][name] = data
        self._written.pop((bucket, name), None)  # a new generation
        return 200, self._meta(bucket, name), JSON

    def _resume(self, method: str, upload_id: str, body: bytes,
                headers: dict[str, str]) -> tuple[int, Any, str]:  # fmt: skip
        """A chunk of a resumable upload (`Content-Range: bytes a-b/total`); the object is
        stored when the last byte arrives, 308 with the `Range` received until then."""
        if upload_id not in self._sessions:
            return 404, _error(404, f"no upload session {upload_id}"), JSON
        bucket, name, q, received = self._sessions[upload_id]
        if method == "DELETE":  # cancelled
            del self._sessions[upload_id]
            return 499, None, JSON
        span = next((v for k, v in headers.items() if k.lower() == "content-range"), "")
        received += body
        total = span.rsplit("/", 1)[-1]
        if total != "*" and len(received) < int(total):
            return 308, None, JSON, {"Range": f"bytes=0-{len(received) - 1}"}  # type: ignore[return-value]
        del self._sessions[upload_id]
        if not self._matches(bucket, name, q):
            return 412, _error(412, _PRECONDITION), JSON
        self.buckets[bucket][name] = bytes(received)
        self._written.pop((bucket, name), None)
        return 200, self._meta(bucket, name), JSON


_PRECONDITION = "At least one of the pre-conditions you specified did not hold."


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "errors": [{"message": message}]}}
