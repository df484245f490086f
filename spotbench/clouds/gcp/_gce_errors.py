"""How the gcp driver types a refused API call (google-api-core's exceptions), shared by
its verbs (gce.py) and the created lifecycle's bulkInsert (created.py)."""

from __future__ import annotations

from google.api_core import exceptions as gexc

from spotbench.clouds.base import ErrorKind
from spotbench.clouds.gcp._gce_status import error_kind_of_codes


def exception_kind(exc: BaseException) -> ErrorKind:
    if isinstance(exc, gexc.NotFound):
        return ErrorKind.GONE
    if isinstance(exc, gexc.GoogleAPICallError):
        reasons = [str(e.get("reason", "")) for e in (exc.errors or []) if isinstance(e, dict)]
        return error_kind_of_codes([*reasons, exc.message or ""])
    return ErrorKind.API


def describe(exc: BaseException) -> str:
    if isinstance(exc, gexc.GoogleAPICallError):
        return f"HTTP {exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
