"""One retry policy for HTTP calls between spotbench's own parts (a member's `done`, the
local scheduler's ticks): connection errors, timeouts and 5xx answers are retried with
exponential backoff; 4xx answers are final. (Cloud SDK calls keep their SDK's transient
errors: see `spotbench.clouds.gce`.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import requests
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

F = TypeVar("F", bound=Callable)


def transient(exc: BaseException) -> bool:
    """Worth another try: the server was unreachable, slow, or answered 5xx."""
    if isinstance(exc, requests.ConnectionError | requests.Timeout):
        return True
    return isinstance(exc, requests.HTTPError) and exc.response is not None and exc.response.status_code >= 500


def http_retry(attempts: int, max_wait_s: float) -> Callable[[F], F]:
    """Retry a function raising requests errors up to `attempts` times (waits 0.2 s, 0.4 s, …
    up to `max_wait_s`); the last error is raised as itself."""
    return retry(retry=retry_if_exception(transient), stop=stop_after_attempt(attempts),
                 wait=wait_exponential(multiplier=0.2, max=max_wait_s), reraise=True)
