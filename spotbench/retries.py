"""One retry policy for HTTP calls between spotbench's own parts (a member's `done`, the
local scheduler's ticks): connection errors, timeouts and 5xx answers are retried with
exponential backoff; 4xx answers are final. (Cloud SDK calls keep their SDK's transient
errors: see `spotbench.clouds.gcp.gce`.)

`SPOTBENCH_RETRY_SCALE` (default 1) multiplies every retry wait here and the workloads'
result-store retries: the fault tests set it below 1 so a store that keeps failing is
retried just as often, without seconds of real pauses. Never needed in use."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import requests
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

F = TypeVar("F", bound=Callable)
RETRY_SCALE_ENV = "SPOTBENCH_RETRY_SCALE"


def retry_scale() -> float:
    """The factor on retry waits from `SPOTBENCH_RETRY_SCALE` (1 when unset)."""
    raw = os.environ.get(RETRY_SCALE_ENV, "").strip()
    try:
        value = float(raw) if raw else 1.0
    except ValueError:
        raise ValueError(f"{RETRY_SCALE_ENV}={raw!r}: give a number >= 0 (1 = the normal waits)") from None
    if value < 0:
        raise ValueError(f"{RETRY_SCALE_ENV}={raw!r}: give a number >= 0 (1 = the normal waits)")
    return value


def transient(exc: BaseException) -> bool:
    """Worth another try: the server was unreachable, slow, or answered 5xx."""
    if isinstance(exc, requests.ConnectionError | requests.Timeout):
        return True
    return isinstance(exc, requests.HTTPError) and exc.response is not None and exc.response.status_code >= 500


def http_retry(attempts: int, max_wait_s: float) -> Callable[[F], F]:
    """Retry a function raising requests errors up to `attempts` times (waits 0.2 s, 0.4 s, …
    up to `max_wait_s`); the last error is raised as itself."""
    scale = retry_scale()
    return retry(retry=retry_if_exception(transient), stop=stop_after_attempt(attempts),
                 wait=wait_exponential(multiplier=0.2 * scale, max=max_wait_s * scale), reraise=True)


def answer_reason(resp: requests.Response) -> str:
    """What a refusing answer says, for people: its JSON `error` (every spotbench HTTP
    surface answers one), else its text; at most 300 characters."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:300]
    return str(body.get("error") if isinstance(body, dict) and "error" in body else body)[:300]
