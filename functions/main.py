"""HTTP entry points for functions-framework (Cloud Functions gen2, and the local cloud).

Deployed as four functions with entry points `start`, `stop`, `done`, `grant` (GCP: a
member's own group's storage grants and files, functions/grant.py); the local cloud serves
`router`, which dispatches on the path (`/start`, `/stop`, `/done`). Every request
is authenticated first, its body validated, and answered with JSON — never a stack trace.
Bodies over the cap never reach the app whole, on any server (`functions/http_guard.py`).
"""

from __future__ import annotations

import json
import logging

import flask
import functions_framework

from functions import http_guard
from functions.app import (
    MAX_BODY_BYTES,
    BadBody,
    ConfigError,
    FunctionConfig,
    authenticate,
    handle,
    parse_body,
)
from spotbench.auth import Forbidden, Unauthorized, Unavailable

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
log = logging.getLogger("spotbench.functions")

if flask.has_app_context():  # functions-framework imports this module inside create_app's
    http_guard.install(flask.current_app, MAX_BODY_BYTES)  # app: cap bodies, JSON errors

_config: FunctionConfig | None = None


def _get_config() -> FunctionConfig:
    global _config  # one per server process: the spec and the cloud client are reused
    if _config is None:
        _config = FunctionConfig()
    return _config


def _reply(status: int, payload: dict) -> flask.Response:
    reply = flask.Response(json.dumps(payload), status=status, mimetype="application/json")
    if "retry_after_s" in payload:  # busy (the control lock is held): when to come back
        reply.headers["Retry-After"] = str(payload["retry_after_s"])
    return reply


def _read_body(request: flask.Request) -> bytes:
    """At most MAX_BODY_BYTES + 1 bytes of the body (a chunked body has no length to check)."""
    if (request.content_length or 0) > MAX_BODY_BYTES:
        raise BadBody(f"the request body is larger than {MAX_BODY_BYTES} bytes", 413)
    chunks, size = [], 0
    try:
        while size <= MAX_BODY_BYTES:
            chunk = request.stream.read(MAX_BODY_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except Exception as exc:  # noqa: BLE001 - a client gone or too slow (the server's deadline)
        log.info("could not read a request body: %s", type(exc).__name__)
        raise BadBody("the request body could not be read in time", 408) from None
    return b"".join(chunks)


def _serve(action: str, request: flask.Request) -> flask.Response:
    if request.method != "POST":
        return _reply(405, {"error": f"{action} takes POST with a JSON body"})
    try:
        config = _get_config()
        caller = authenticate(request.headers, config)
    except Unauthorized as exc:
        return _reply(401, {"error": str(exc)})
    except Forbidden as exc:
        return _reply(403, {"error": str(exc)})
    except Unavailable as exc:  # e.g. Google's signing keys unreachable: let the caller retry
        log.warning("cannot verify identity now: %s", exc)
        return _reply(503, {"error": "identity cannot be verified right now; retry"})
    except (ConfigError, ValueError) as exc:
        log.error("configuration: %s", exc)
        return _reply(500, {"error": "the function is misconfigured; see its log"})
    except Exception:  # noqa: BLE001
        log.exception("authentication failed unexpectedly")
        return _reply(500, {"error": "internal error while authenticating; see the log"})
    try:
        body = parse_body(_read_body(request))
    except BadBody as exc:
        return _reply(exc.status, {"error": str(exc)})
    scheduled = request.headers.get("X-CloudScheduler-ScheduleTime")
    if action == "start" and scheduled and caller.kind == "scheduler" and isinstance(body, dict | None):
        body = {**(body or {})}  # Cloud Scheduler's body is fixed; its tick time is a header
        body.setdefault("tick", scheduled)
    status, payload = handle(action, body, caller, config)
    return _reply(status, payload)


@functions_framework.http
def start(request: flask.Request) -> flask.Response:
    return _serve("start", request)


@functions_framework.http
def stop(request: flask.Request) -> flask.Response:
    return _serve("stop", request)


@functions_framework.http
def done(request: flask.Request) -> flask.Response:
    return _serve("done", request)


@functions_framework.http
def grant(request: flask.Request) -> flask.Response:
    return _serve("grant", request)


@functions_framework.http
def router(request: flask.Request) -> flask.Response:
    action = request.path.strip("/").split("/")[0]
    if action not in ("start", "stop", "done", "grant"):
        return _reply(404, {"error": "use POST /start, /stop, /done or /grant"})
    return _serve(action, request)
