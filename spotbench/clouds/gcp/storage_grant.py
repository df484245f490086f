"""A group's Cloud Storage grants, as GCS defines them (pure: the signing is a callable).

- Records: a V4 signed POST policy (https://cloud.google.com/storage/docs/authentication/signatures#policy-document,
  https://cloud.google.com/storage/docs/xml-api/post-object-forms): a base64 JSON policy
  document with an `expiration` and `conditions` — the bucket, `["starts-with", "$key",
  "<root>/runs/<run>/<group>."]`, `["content-length-range", 0, <max bytes>]` and the `x-goog-*` fields — signed with RSA-SHA256 by the
  function's account (IAM Credentials signBlob); the signature is the hex of the signed
  policy. GCS refuses an upload whose fields break a condition, whose signature does not
  verify, or that arrives after the expiration.
- Checkpoints: a Credential Access Boundary (https://cloud.google.com/iam/docs/downscoping-short-lived-credentials)
  limiting the function's token to `inRole:roles/storage.objectUser` on the bucket where
  `resource.name.startsWith('projects/_/buckets/<b>/objects/<root>/checkpoints/<group>/')`,
  or the listing of that prefix.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from spotbench.auth.instance import MAX_OBJECT_BYTES, Grant

ALGORITHM = "GOOG4-RSA-SHA256"
STORAGE_URL = "https://storage.googleapis.com"
CHECKPOINT_ROLE = "inRole:roles/storage.objectUser"  # read, list, create, replace, delete


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def post_policy(bucket: str, key_prefix: str, expires: datetime, account: str,
                sign: Callable[[bytes], bytes], *, now: datetime | None = None,
                url: str = STORAGE_URL, max_bytes: int = MAX_OBJECT_BYTES) -> dict[str, Any]:  # fmt: skip
    """The form of a V4 POST policy upload: `url` and `fields` (every form field but `key`
    and `file`, which the uploader adds; `key` must start with `key_prefix`, the file is at
    most `max_bytes`: `content-length-range`, GCS answers 400 EntityTooLarge beyond it)."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    date = _stamp(now)
    credential = f"{account}/{date[:8]}/auto/storage/goog4_request"
    fields = {"x-goog-algorithm": ALGORITHM, "x-goog-credential": credential,
              "x-goog-date": date}
    document = {
        "conditions": [{"bucket": bucket}, ["starts-with", "$key", key_prefix],
                       ["content-length-range", 0, max_bytes],
                       *({k: v} for k, v in fields.items())],
        "expiration": expires.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    policy = base64.b64encode(json.dumps(document, separators=(",", ":")).encode()).decode()
    signature = sign(policy.encode()).hex()
    return {"url": f"{url.rstrip('/')}/{bucket}", "key_prefix": key_prefix,
            "fields": {**fields, "policy": policy, "x-goog-signature": signature}}


def checkpoint_boundary(bucket: str, object_prefix: str) -> dict[str, Any]:
    """The Credential Access Boundary of a group's checkpoints (`object_prefix` ends in `/`)."""
    objects = f"projects/_/buckets/{bucket}/objects/{object_prefix}"
    expression = (f"resource.name.startsWith('{objects}') || "
                  f"api.getAttribute('storage.googleapis.com/objectListPrefix', '')"
                  f".startsWith('{object_prefix}')")
    return {"accessBoundary": {"accessBoundaryRules": [{
        "availableResource": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "availablePermissions": [CHECKPOINT_ROLE],
        "availabilityCondition": {"title": "one group's checkpoints", "expression": expression},
    }]}}


def results_root(results_url: str) -> tuple[str, str]:
    """gs://bucket/prefix → (bucket, 'prefix/'), the root a grant's prefixes are under."""
    if not results_url.startswith("gs://"):
        raise ValueError(f"results {results_url!r} are not in Cloud Storage (gs://…)")
    bucket, _, prefix = results_url.removeprefix("gs://").partition("/")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/" if prefix else ""


def storage_grants(grant: Grant, results_url: str, account: str,
                   sign: Callable[[bytes], bytes],
                   downscope: Callable[[dict[str, Any]], tuple[str, int]], *,
                   now: datetime | None = None,
                   storage_url: str = STORAGE_URL) -> dict[str, Any]:  # fmt: skip
    """What `grant` answers a member: the grant itself, a POST policy for its records and,
    when it keeps checkpoints, a downscoped token (`downscope`: boundary → token, seconds)."""
    bucket, root = results_root(results_url)
    out: dict[str, Any] = {
        "grant": grant.to_json(),
        "records": post_policy(bucket, root + grant.records, grant.expires, account, sign,
                               now=now, url=storage_url, max_bytes=grant.max_bytes),
    }
    if grant.checkpoints:
        token, seconds = downscope(checkpoint_boundary(bucket, root + grant.checkpoints))
        out["checkpoints"] = {"access_token": token, "expires_in": seconds,
                              "prefix": f"gs://{bucket}/{root}{grant.checkpoints}"}
    return out
