"""HTTP entry points for functions-framework (Cloud Functions gen2, and the local cloud).

Deployed as three functions with entry points `start`, `stop`, `done`; the local cloud
serves `router`, which dispatches on the path (`/start`, `/stop`, `/done`). Every request
is authenticated first, its body validated, and answered with JSON — never a stack trace.
"""

from __future__ import annotations

import json
import logging

import flask
import functions_framework

from functions._app import ConfigError, FunctionConfig, authenticate, handle
from spotbench.auth import Forbidden, Unauthorized, Unavailable

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
log = logging.getLogger("spotbench.functions")

_config: FunctionConfig | None = None


def _get_config() -> FunctionConfig:
    global _config  # one per server process: the spec and the cloud client are reused
    if _config is None:
        _config = FunctionConfig()
    return _config


def _reply(status: int, payload: dict) -> flask.Response:
    return flask.Response(json.dumps(payload), status=status, mimetype="application/json")


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
    body = None
    if request.get_data():
        body = request.get_json(silent=True)
        if body is None:
            return _reply(400, {"error": "the request body is not valid JSON"})
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
def router(request: flask.Request) -> flask.Response:
    action = request.path.strip("/").split("/")[0]
    if action not in ("start", "stop", "done"):
        return _reply(404, {"error": "use POST /start, /stop or /done"})
    return _serve(action, request)
