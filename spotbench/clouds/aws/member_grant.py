"""The member side of AWS's `/grant` (issue #29): how an instance writes its group's records
and checkpoints, for as long as its group runs.

The instance role writes nothing; the sweep's function answers `/grant` (signed with the
instance role, SigV4) with STS credentials narrowed to the group's objects
(functions/aws_grants.py). The function's own credentials are a role session, so these are
role-chained: they last at most 1 h (docs/platform.md), while a group may run until a later
deadline. `grant_session` therefore hands s3fs an aiobotocore session whose credentials are
botocore `RefreshableCredentials`: before they end (`renew_window`: the last 20 % of their
lifetime, at most `RENEW_BEFORE_S`) the next request asks `/grant` again and signs with the
new ones. Every client built on the session (the results store, the checkpoints) renews so.

A `/grant` answer of 5xx, or no answer (connection reset, timeout), is retried with the
project's policy (`spotbench.retries`, bounded); a 4xx (past the group's deadline, not an
instance of the sweep) is final and raised as `GrantRefused` with the function's reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import requests

from spotbench.auth import Forbidden
from spotbench.clouds.aws.identity import function_url_path, signed_post
from spotbench.retries import answer_reason, http_retry

TIMEOUT_S = 30
RENEW_BEFORE_S = 300  # renew at most this long before the credentials end …
RENEW_FRACTION = 0.2  # … and no earlier than the last 20 % of their lifetime
GRANT_ATTEMPTS = 6  # a 5xx or no answer: retried, waits 0.2 s, 0.4 s, … up to 5 s (~8 s)


class GrantRefused(Forbidden):
    """`/grant` answered 4xx: this instance's group has no grant now (final, not retried)."""


class GrantUnavailable(OSError):
    """`/grant` kept failing (5xx, no answer) for every attempt."""


def _post(url: str, credentials: Any) -> dict[str, Any]:
    resp = signed_post(url, {}, TIMEOUT_S, credentials=credentials)
    if resp.status_code >= 500:
        resp.raise_for_status()  # requests.HTTPError: retried (spotbench.retries.transient)
    if resp.status_code >= 400:
        raise GrantRefused(f"{url.rsplit('/', 1)[-1]} refused this instance "
                           f"({resp.status_code}) at {url}: {answer_reason(resp)}")
    return resp.json()


def fetch_grant(done_url: str, action: str = "grant", *, credentials: Any = None) -> dict[str, Any]:
    """This instance's group's answer to `action` (`grant`, `keys`) from the sweep's function,
    signed with the instance role (or `credentials`). 5xx and connection errors are retried
    (`GRANT_ATTEMPTS`), then `GrantUnavailable`; a 4xx raises `GrantRefused`."""
    url = function_url_path(done_url, action)
    try:
        return http_retry(GRANT_ATTEMPTS, 5)(_post)(url, credentials)
    except requests.RequestException as exc:
        raise GrantUnavailable(f"the sweep's function at {url} did not answer after "
                               f"{GRANT_ATTEMPTS} attempts ({exc}); the group's results cannot "
                               "be written until it does") from exc


def _metadata(answer: dict[str, Any]) -> dict[str, str]:
    creds = answer["credentials"]
    return {"access_key": creds["AccessKeyId"], "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"], "expiry_time": creds["Expiration"]}


def renew_window(lifetime_s: float) -> float:
    """How long before credentials of `lifetime_s` end the next request renews them."""
    return max(0.0, min(RENEW_BEFORE_S, RENEW_FRACTION * lifetime_s))


def _set_windows(creds: Any, expiry: str) -> None:
    lifetime = (datetime.fromisoformat(expiry) - datetime.now(UTC)).total_seconds()
    window = renew_window(lifetime)
    creds._advisory_refresh_timeout = window  # botocore: try to renew, keep the old on error
    creds._mandatory_refresh_timeout = window / 2  # …: must renew, raise on error


def grant_session(done_url: str, answer: dict[str, Any] | None = None,
                  fetch: Callable[[], dict[str, Any]] | None = None) -> Any:
    """An aiobotocore session (s3fs `session=`) whose credentials are the group's grant,
    renewed through `/grant` before they end. `answer`: a grant already fetched."""
    from aiobotocore.credentials import AioRefreshableCredentials
    from aiobotocore.session import AioSession

    fetch = fetch or (lambda: fetch_grant(done_url))
    holder: list[Any] = []

    async def refresh() -> dict[str, str]:
        # off the event loop: s3fs's other requests (and their loop) go on meanwhile
        metadata = _metadata(await asyncio.to_thread(fetch))
        _set_windows(holder[0], metadata["expiry_time"])
        return metadata

    first = _metadata(answer or fetch())
    creds = AioRefreshableCredentials.create_from_metadata(first, refresh_using=refresh,
                                                           method="spotbench-grant")
    holder.append(creds)
    _set_windows(creds, first["expiry_time"])
    session = AioSession()
    session._credentials = creds  # get_credentials() hands these to every client
    return session
