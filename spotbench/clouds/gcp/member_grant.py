"""The member side of GCP's `grant` (issue #29): how a VM writes its group's records and
checkpoints.

The sweep's member account may read the results but write nothing; a member asks the
sweep's `grant` function (its instance identity token, audience = the grant URL,
`format=full`) for its group's grants. One answer holds both (functions/grant.py): the POST
policy of its records (https://cloud.google.com/storage/docs/xml-api/post-object-forms)
and, when the sweep keeps checkpoints, a downscoped token for them. `MemberGrant` asks once
and keeps the answer: the records' policy until shortly before its expiration (the group's
deadline), the checkpoint token until shortly before it ends (a downscoped token lives no
longer than its source, 1 h); then it asks again. A refused upload asks once more (a new
launch of the group, a new run).

Checkpoints are written through gcsfs with google-auth credentials (`checkpoint_credentials`)
whose refresh takes the next token from the same `MemberGrant` (google-auth refreshes a
token within its refresh threshold of `expiry`).

A `grant` answer of 5xx, or no answer (connection reset, timeout), is retried with the
project's policy (`spotbench.retries`, bounded); a 4xx (refused: past the deadline, not an
instance of the sweep) is final and raised as `GrantRefused` with the function's reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from spotbench.retries import answer_reason, http_retry

TIMEOUT_S = 30
REFRESH_BEFORE_S = 60  # ask for the records' policy again this long before it expires
TOKEN_RENEW_S = 300  # … and for the checkpoint token this long before it ends
GRANT_ATTEMPTS = 6  # a 5xx or no answer: retried, waits 0.2 s, 0.4 s, … up to 5 s (~8 s)


class GrantWriteError(OSError):
    """The group's grant could not be had, or the store refused the upload with it."""


class GrantRefused(GrantWriteError):
    """`grant` answered 4xx: this instance's group has no grant now (final, not retried)."""


def grant_url_of(done_url: str) -> str:
    """The sweep's grant function beside its done function (infra/gcp/functions.py names
    both `<sweep>-<entry>` at one base URL)."""
    if not done_url.endswith("-done"):
        raise ValueError(f"done URL {done_url!r} does not name a `<sweep>-done` function")
    return done_url.removesuffix("-done") + "-grant"


def _post_grant(grant_url: str, token: Callable[[str], str]) -> dict[str, Any]:
    resp = requests.post(grant_url, json={}, timeout=TIMEOUT_S,
                         headers={"Authorization": f"Bearer {token(grant_url)}"})
    if resp.status_code >= 500:
        resp.raise_for_status()  # requests.HTTPError: retried (spotbench.retries.transient)
    if resp.status_code != 200:
        raise GrantRefused(f"grant refused this instance ({resp.status_code}) at {grant_url}: "
                           f"{answer_reason(resp)}")
    return resp.json()


def fetch_grant(grant_url: str, token: Callable[[str], str]) -> dict[str, Any]:
    """The group's grant answer (`functions/grant.py`): `grant`, `records`, `checkpoints`.
    5xx and connection errors are retried (`GRANT_ATTEMPTS`), then `GrantWriteError`."""
    try:
        return http_retry(GRANT_ATTEMPTS, 5)(_post_grant)(grant_url, token)
    except requests.RequestException as exc:
        raise GrantWriteError(f"the sweep's grant function at {grant_url} did not answer after "
                              f"{GRANT_ATTEMPTS} attempts ({exc}); the group's results cannot "
                              "be written until it does") from exc


class MemberGrant:
    """The group's one grant answer, asked once and kept until shortly before it ends."""

    def __init__(self, grant_url: str, token: Callable[[str], str],
                 clock: Callable[[], float] = time.time) -> None:
        self.grant_url = grant_url
        self.token = token
        self.clock = clock
        self._answer: dict[str, Any] | None = None
        self._fetched = 0.0
        self._lock = threading.Lock()

    def answer(self, fresh: bool = False) -> dict[str, Any]:
        with self._lock:
            if fresh or self._answer is None or self.clock() >= self._records_until():
                self._answer = fetch_grant(self.grant_url, self.token)
                self._fetched = self.clock()
            return self._answer

    def _records_until(self) -> float:
        assert self._answer is not None
        expires = datetime.fromisoformat(self._answer["grant"]["expires"]).timestamp()
        return expires - REFRESH_BEFORE_S

    def records(self, fresh: bool = False) -> dict[str, Any]:
        """The POST policy form of the group's records."""
        return self.answer(fresh)["records"]

    def checkpoint_token(self) -> tuple[str, datetime]:
        """The group's downscoped checkpoint token and its expiry (naive UTC, google-auth's
        form), asking `grant` again when the kept one ends within `TOKEN_RENEW_S`."""
        answer = self.answer()
        if _token_left(answer, self._fetched, self.clock()) < TOKEN_RENEW_S:
            answer = self.answer(fresh=True)
        ckpt = answer.get("checkpoints")
        if not ckpt:
            raise GrantWriteError("the group's grant has no checkpoint token "
                                  "(the sweep's workload keeps no checkpoints)")
        expiry = datetime.fromtimestamp(self._fetched, UTC) + timedelta(seconds=int(ckpt["expires_in"]))
        return ckpt["access_token"], expiry.replace(tzinfo=None)


def _token_left(answer: dict[str, Any], fetched: float, now: float) -> float:
    ckpt = answer.get("checkpoints") or {}
    return fetched + int(ckpt.get("expires_in", 0)) - now


def checkpoint_credentials(grant: MemberGrant) -> Any:
    """google.oauth2 credentials for gcsfs (`token=`) holding the group's downscoped
    checkpoint token; on refresh (before it ends) they take the next one from `grant`."""
    from google.oauth2.credentials import Credentials

    def refresh(request: Any, scopes: Any) -> tuple[str, datetime]:
        return grant.checkpoint_token()

    access, expiry = grant.checkpoint_token()
    return Credentials(access, expiry=expiry, refresh_handler=refresh)


class GrantedWriter:
    """`writer(path, data)` for `ResultStore`: `path` is `<bucket>/<key>` (gcsfs's form)."""

    def __init__(self, grant_url: str, token: Callable[[str], str],
                 grant: MemberGrant | None = None) -> None:
        self.grant = grant or MemberGrant(grant_url, token)

    def __call__(self, path: str, data: bytes) -> None:
        key = path.split("/", 1)[1]
        for fresh in (False, True):
            form = self.grant.records(fresh)
            resp = requests.post(form["url"], data={**form["fields"], "key": key},
                                 files={"file": ("data", data)}, timeout=TIMEOUT_S)
            if resp.status_code in (200, 201, 204):
                return
        raise GrantWriteError(f"the store refused {key} with the group's grant "
                              f"({resp.status_code}): {resp.text[:300]}")
