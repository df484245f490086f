"""The member side of GCP's `grant` (issue #29): how a VM writes its group's records.

The sweep's member account may read the results but write nothing; a member asks the
sweep's `grant` function (its instance identity token, audience = the grant URL,
`format=full`) for its group's POST policy and uploads each object with it as a form
(https://cloud.google.com/storage/docs/xml-api/post-object-forms). The policy is cached
until shortly before its expiration (the group's deadline) and asked for again once after
a refusal (a new launch of the group, a new run).

Checkpoints (a sweep with `checkpoint_every`) are written through gcsfs with the grant's
downscoped token (`checkpoint_credentials`): google-auth credentials whose refresh asks
`grant` again, so the token is renewed before it ends (google-auth refreshes a token
within its refresh threshold of `expiry`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

TIMEOUT_S = 30
REFRESH_BEFORE_S = 60


class GrantWriteError(OSError):
    """The group's grant could not be had, or the store refused the upload with it."""


def grant_url_of(done_url: str) -> str:
    """The sweep's grant function beside its done function (infra/gcp/functions.py names
    both `<sweep>-<entry>` at one base URL)."""
    if not done_url.endswith("-done"):
        raise ValueError(f"done URL {done_url!r} does not name a `<sweep>-done` function")
    return done_url.removesuffix("-done") + "-grant"


def fetch_grant(grant_url: str, token: Callable[[str], str]) -> dict[str, Any]:
    """The group's grant answer (`functions/grant.py`): `grant`, `records`, `checkpoints`."""
    resp = requests.post(grant_url, json={}, timeout=TIMEOUT_S,
                         headers={"Authorization": f"Bearer {token(grant_url)}"})
    if resp.status_code != 200:
        raise GrantWriteError(f"grant refused ({resp.status_code}): {resp.text[:300]}")
    return resp.json()


def _checkpoint_token(answer: dict[str, Any]) -> tuple[str, datetime]:
    ckpt = answer.get("checkpoints")
    if not ckpt:
        raise GrantWriteError("the group's grant has no checkpoint token "
                              "(the sweep's workload keeps no checkpoints)")
    expiry = datetime.now(UTC) + timedelta(seconds=int(ckpt["expires_in"]))
    return ckpt["access_token"], expiry.replace(tzinfo=None)  # google-auth: naive UTC


def checkpoint_credentials(grant_url: str, token: Callable[[str], str],
                           answer: dict[str, Any] | None = None) -> Any:
    """google.oauth2 credentials for gcsfs (`token=`) holding the group's downscoped
    checkpoint token; on refresh (before it ends) they ask `grant` for the next one."""
    from google.oauth2.credentials import Credentials

    def refresh(request: Any, scopes: Any) -> tuple[str, datetime]:
        return _checkpoint_token(fetch_grant(grant_url, token))

    access, expiry = _checkpoint_token(answer or fetch_grant(grant_url, token))
    return Credentials(access, expiry=expiry, refresh_handler=refresh)


class GrantedWriter:
    """`writer(path, data)` for `ResultStore`: `path` is `<bucket>/<key>` (gcsfs's form)."""

    def __init__(self, grant_url: str, token: Callable[[str], str]) -> None:
        self.grant_url = grant_url
        self.token = token
        self._form: dict[str, Any] | None = None
        self._until = 0.0

    def _records(self, fresh: bool = False) -> dict[str, Any]:
        if fresh or self._form is None or time.time() >= self._until:
            answer = fetch_grant(self.grant_url, self.token)
            self._form = answer["records"]
            expires = datetime.fromisoformat(answer["grant"]["expires"]).timestamp()
            self._until = expires - REFRESH_BEFORE_S
        return self._form

    def __call__(self, path: str, data: bytes) -> None:
        key = path.split("/", 1)[1]
        for fresh in (False, True):
            form = self._records(fresh)
            resp = requests.post(form["url"], data={**form["fields"], "key": key},
                                 files={"file": ("data", data)}, timeout=TIMEOUT_S)
            if resp.status_code in (200, 201, 204):
                return
        raise GrantWriteError(f"the store refused {key} with the group's grant "
                              f"({resp.status_code}): {resp.text[:300]}")
