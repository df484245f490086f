"""AWS Lambda entry point for `start`, `stop` and `done`: a thin adapter over `app.handle`.

One handler (`functions.lambda_handler.handler`) serves all three Lambdas; each Lambda's
`SPOTBENCH_ACTION` env says which action it is. Two kinds of events arrive:

- Function URL requests (`done`, `AWS_IAM` auth): the URL has verified the SigV4 signature;
  the caller comes from `requestContext.authorizer.iam` (`Provider.authenticate_event`): an instance
  role session of this account → `Caller("member", <instance id>)`. Unsigned → 401, another
  account / not an instance → 403, a body that is not a JSON object → 400. The answer is an
  HTTP response (`statusCode`, JSON `body`).
- Direct invocations (EventBridge Scheduler for `start`/`stop`): `{"schedule": ARN,
  "body": {...}}` → `Caller("scheduler", ARN)` (`Provider.authenticate_event` too). A 5xx
  outcome raises, so the scheduler's retry policy retries (actions are idempotent); other outcomes are returned as a dict.

Environment: as `functions/app.py` (SPOTBENCH_CLOUD=aws, SPOTBENCH_SPEC,
SPOTBENCH_RESULTS_URL) plus SPOTBENCH_ACTION and SPOTBENCH_SECRET_FILES (`keys`). Only
instance sessions of the sweep's one member role (`member_role_name`) may call the URL; the
instance's group comes from the sweep's own records: `done` stops only that group, and the
URL's `/grant` and `/keys` paths answer for that group only (functions/aws_grants.py).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from functions.app import BadBody, ConfigError, FunctionConfig, handle, parse_body
from spotbench.auth import Caller, Forbidden, Unauthorized
from functions import aws_grants

log = logging.getLogger("spotbench.functions")
log.setLevel(logging.INFO)

_config: FunctionConfig | None = None


class InvocationFailed(RuntimeError):
    """Raised for a 5xx outcome of a direct invocation, so the scheduler retries it."""


def _get_config() -> FunctionConfig:
    global _config  # one per Lambda execution environment: spec and EC2 client reused
    if _config is None:
        _config = FunctionConfig(env=dict(os.environ))
    return _config


def _response(status: int, payload: Mapping[str, Any]) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if "retry_after_s" in payload:  # busy (the control lock is held): when to come back
        headers["Retry-After"] = str(payload["retry_after_s"])
    return {"statusCode": status, "headers": headers, "body": json.dumps(payload)}


def _action(config: FunctionConfig) -> str:
    action = config.env.get("SPOTBENCH_ACTION")
    if not action:
        raise ConfigError("environment variable SPOTBENCH_ACTION is not set (start|stop|done)")
    return action


def is_function_url_event(event: Any) -> bool:
    return isinstance(event, Mapping) and "http" in (event.get("requestContext") or {})


def _url_body(event: Mapping[str, Any]) -> Any:
    raw = event.get("body")
    if raw in (None, ""):
        return None
    if not isinstance(raw, str):
        raise BadBody("the request body is not text")
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(raw, validate=True)
        except ValueError:
            raise BadBody("the request body is not valid base64") from None
    body = parse_body(raw)
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    return body


def _url_path(event: Mapping[str, Any]) -> str:
    """`done`, `grant` or `keys` from the URL's path (`/` is `done`), else the raw path."""
    raw = str(event.get("rawPath") or "/").strip("/")
    return raw or "done"


def handle_function_url(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    method = ((event.get("requestContext") or {}).get("http") or {}).get("method", "POST")
    path = _url_path(event)
    try:
        config = _get_config()
        action = _action(config)
        if path not in ("done", *aws_grants.PATHS):
            return _response(404, {"error": f"no path /{path[:40]} here; use /, /grant or /keys"})
        if method != "POST":
            return _response(405, {"error": f"{path} takes POST with a JSON body"})
        account = config.provider.function_account(config, context)  # the Lambda's own
        caller = config.provider.authenticate_event(event, config, account)
    except Unauthorized as exc:
        return _response(401, {"error": str(exc)})
    except Forbidden as exc:
        log.warning("refused: %s", exc)
        return _response(403, {"error": str(exc)})
    except (ConfigError, ValueError) as exc:
        log.error("configuration: %s", exc)
        return _response(500, {"error": "the function is misconfigured; see its log"})
    try:
        body = _url_body(event)
    except BadBody as exc:
        return _response(exc.status, {"error": str(exc)})
    except ValueError as exc:
        return _response(400, {"error": str(exc)})
    if path != "done":
        return _response(*aws_grants.answer(path, config, caller, account))
    status, payload = handle(action, body, caller, config)
    return _response(status, payload)


def handle_invocation(event: Any, context: Any) -> dict[str, Any]:
    config = _get_config()
    action = _action(config)
    if not isinstance(event, Mapping):
        return {"status": 400, "error": "the event must be a JSON object"}
    caller: Caller = config.provider.authenticate_event(event, config)
    status, payload = handle(action, event.get("body"), caller, config)
    if status >= 500:
        raise InvocationFailed(f"{action} failed ({status}): {payload.get('error')}")
    if status >= 400:
        log.warning("%s refused (%s): %s", action, status, payload.get("error"))
    return {"status": status, **payload}


URL_ACTIONS = frozenset({"done"})  # the Lambdas that have a function URL (infra/aws/functions.py)


def handler(event: Any, context: Any) -> dict[str, Any]:
    """The Lambda entry point (`functions.lambda_handler.handler`).

    `done` answers function-URL events only and `start`/`stop` direct invocations only: a
    URL-shaped event on `start`/`stop` or a direct one on `done` was hand-made by someone
    invoking the Lambda directly (IAM lets members call `done` through its URL only, see
    infra/aws/identity.py), so it is refused whatever it claims.
    """
    via_url = is_function_url_event(event)
    action = os.environ.get("SPOTBENCH_ACTION", "")
    if via_url and action and action not in URL_ACTIONS:
        log.warning("refused a function-URL event on %s, which has no function URL", action)
        return _response(403, {"error": f"{action} has no function URL; it is invoked by its schedule"})
    if not via_url and action in URL_ACTIONS:
        log.warning("refused a direct invocation of %s", action)
        return {"status": 403, "error": f"{action} is called through its function URL only"}
    if via_url:
        return handle_function_url(event, context)
    return handle_invocation(event, context)
