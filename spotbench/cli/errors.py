"""No traceback reaches a user (issue #39): an error no command handled is one line with
its cause and the fix; `spotbench --debug …` (or SPOTBENCH_DEBUG=1) shows the trace.

The cause is read from the exception chain by class name (the CLI imports no cloud SDK):
an endpoint that cannot be reached or timed out, credentials missing or refused, or
anything else (named by its type). Used by `spotbench.cli.main` around every command.
"""

from __future__ import annotations

import os

DEBUG_ENV = "SPOTBENCH_DEBUG"

# class names (anywhere in an exception's MRO or its chain) → the kind of failure
_UNREACHABLE = {
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
    "ClientConnectorError", "ServerDisconnectedError", "ConnectionError", "ConnectTimeout",
    "ReadTimeout", "Timeout", "TimeoutError", "TransportError", "ServiceUnavailable",
    "RetryError", "gaierror", "ProxyConnectionError", "NewConnectionError", "MaxRetryError",
}
_CREDENTIALS = {
    "NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError", "RefreshError",
    "InvalidClientTokenId", "Unauthenticated", "PermissionDenied", "Forbidden", "Unauthorized",
}
_AUTH_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidClientTokenId",
               "UnrecognizedClientException", "AccessDenied", "AuthFailure", "invalid_grant",
               "UNAUTHENTICATED", "PERMISSION_DENIED", "401", "403")


# loggers of the SDKs and filesystems that log their own retries and tracebacks (gcsfs
# `logger.exception`s a failed token request) on top of the error the command explains
_NOISY = ("gcsfs", "s3fs", "fsspec", "google", "google_auth_httplib2", "urllib3", "botocore",
          "boto3", "aiobotocore", "aiohttp", "asyncio")


def quiet_libraries(args: list[str] | None) -> None:
    """Before a command: the libraries' own log lines (retries, tracebacks) stay out of the
    user's terminal unless `--debug`; gcsfs's storage-layout probe (the experimental
    zonal/HNS support, 2 × 30 s against an unreachable endpoint before the first request)
    is off — spotbench's buckets are flat (docs/platform.md)."""
    import logging

    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    if debug_requested(args):
        return
    for name in _NOISY:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def debug_requested(args: list[str] | None) -> bool:
    return bool(os.environ.get(DEBUG_ENV)) or "--debug" in (args or [])


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        todo += [e.__cause__, e.__context__]
        todo += list(getattr(e, "exceptions", ()) or ())  # ExceptionGroup
    return out


def _names(exc: BaseException) -> set[str]:
    return {c.__name__ for c in type(exc).__mro__}


def kind(exc: BaseException) -> str:
    """`unreachable`, `credentials` or `other`, from the whole chain (the innermost cause
    is often the telling one: an aiohttp connect error under an s3fs OSError)."""
    chain = _chain(exc)
    if any(_names(e) & _CREDENTIALS for e in chain):
        return "credentials"
    text = " ".join(str(e) for e in chain)
    if any("ClientError" in _names(e) for e in chain) and any(code in text for code in _AUTH_CODES):
        return "credentials"
    if any(_names(e) & _UNREACHABLE for e in chain):
        return "unreachable"
    return "other"


def _cause(exc: BaseException) -> str:
    """The most telling message of the chain: the outermost network or credentials error
    (botocore's names the URL; the socket error under it does not), else the error itself."""
    chain = _chain(exc)
    for e in chain:
        text = " ".join(str(e).split())
        if text and (_names(e) & (_UNREACHABLE | _CREDENTIALS) or "ClientError" in _names(e)):
            return f"{type(e).__name__}: {text[:300]}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def one_line(exc: BaseException, command: str, cloud: str | None = None) -> str:
    """What went wrong and what to do, in one line (no trace)."""
    k = kind(exc)
    cause = _cause(exc)
    where = f"{cloud} " if cloud else ""
    if k == "unreachable":
        fix = (f"the {where}endpoint could not be reached or timed out ({cause}): check the network, "
               "a proxy and any endpoint override (AWS_ENDPOINT_URL, SPOTBENCH_GCP_API_ENDPOINT), "
               f"then run `spotbench {command}` again")
    elif k == "credentials":
        fix = (f"the {where}credentials are missing or were refused ({cause}): `gcloud auth "
               "application-default login` (GCP) or `aws configure` / `aws sso login` (AWS), "
               f"then run `spotbench {command}` again")
    else:
        fix = f"{command} failed ({cause})"
    return fix + f"; `spotbench --debug {command} …` shows the trace"
