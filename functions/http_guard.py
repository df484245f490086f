"""Bounds and JSON errors on the app functions-framework builds around `functions/main.py`.

functions-framework reads each request's whole body after the function answered (its
`read_request` after-request hook, "to avoid connection errors"), whatever its size and
whatever the answer: a 401 to a 400 MiB body held 400 MiB. `install(app)` wraps the app's
WSGI callable, so before Flask or the function sees a request:

- a declared `Content-Length` over the cap is answered `413` in JSON, the body unread, and
  the connection closed;
- a body without a length (chunked) can be read only up to the cap + 1 byte: the function
  answers 413 (`functions.main._read_body`) and nothing reads the rest into memory;

and Flask's own answers (404 of `/robots.txt`, 405, an unhandled error) are JSON too.

`functions/main.py` installs it when functions-framework imports it (inside the app
context of `create_app`), so the deployed functions (Cloud Functions' own server) and the
local functions server (`spotbench.localrun.http_server`) run with it alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import flask
from werkzeug.exceptions import HTTPException, InternalServerError

CRASH_HEADER = ("X-Google-Status", "crash")  # what functions-framework's 500 handler sets


class CappedInput:
    """A WSGI input that yields at most `limit` bytes, then end of body."""

    def __init__(self, inner: Any, limit: int) -> None:
        self.inner, self.left = inner, limit

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.inner.read(size)
        self.left -= len(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.inner.readline(size)
        self.left -= len(data)
        return data

    def __iter__(self):
        return iter(self.readline, b"")


def json_answer(status: str, error: str, start_response: Callable, *,
                close: bool = False) -> list[bytes]:  # fmt: skip
    body = json.dumps({"error": error}).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if close:
        headers.append(("Connection", "close"))
    start_response(status, headers)
    return [body]


class BodyCap:
    """WSGI middleware: requests with bodies over `limit` bytes never reach the app whole."""

    def __init__(self, app: Callable, limit: int) -> None:
        self.app, self.limit = app, limit

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        raw = environ.get("CONTENT_LENGTH") or ""
        try:
            length = int(raw) if raw.strip() else None
        except ValueError:
            return json_answer("400 Bad Request", "invalid Content-Length", start_response,
                               close=True)  # fmt: skip
        if length is not None and length > self.limit:
            return json_answer("413 Request Entity Too Large",
                               f"the request body is larger than {self.limit} bytes",
                               start_response, close=True)  # fmt: skip
        environ["wsgi.input"] = CappedInput(environ["wsgi.input"],
                                            self.limit + 1 if length is None else length)
        return self.app(environ, start_response)


def json_errors(app: flask.Flask) -> None:
    """Flask's own answers (functions-framework's /favicon.ico and /robots.txt 404s, a 405,
    an unhandled error) as JSON, never an HTML page or a trace."""

    def answer(exc: Exception) -> flask.Response:
        if not isinstance(exc, HTTPException):
            app.logger.exception("unhandled error", exc_info=exc)
            exc = InternalServerError()
        reply = flask.Response(json.dumps({"error": (exc.name or "error").lower()}),
                               status=exc.code or 500, mimetype="application/json")
        if (exc.code or 500) >= 500:
            reply.headers[CRASH_HEADER[0]] = CRASH_HEADER[1]
        return reply

    app.register_error_handler(HTTPException, answer)
    app.register_error_handler(500, answer)  # replaces functions-framework's text handler
    app.register_error_handler(Exception, answer)


def install(app: flask.Flask, limit: int) -> None:
    """Cap bodies at `limit` bytes and answer errors in JSON, once per app."""
    if getattr(app, "_spotbench_guarded", False):
        return
    app.wsgi_app = BodyCap(app.wsgi_app, limit)  # type: ignore[method-assign]
    json_errors(app)
    app._spotbench_guarded = True  # type: ignore[attr-defined]
