"""The local functions server: functions-framework's app on its own gunicorn, with bounds.

    python -m spotbench.localrun.http_server --source functions/main.py --target router \\
        --host 127.0.0.1 --port N      # or --fd N: a socket the caller bound (localrun/server.py)

The same app `functions-framework` serves (its public `create_app`) on gunicorn, started
through gunicorn's public custom-application API (`gunicorn.app.base.BaseApplication`,
https://gunicorn.org/custom) with functions-framework's own settings (`ServerApp`), and
what a server reachable by every local user needs:

- a request is read whole in the worker's event loop before a thread takes it, and must
  arrive within `REQUEST_READ_S` of its connection, or it gets a JSON 408 and is closed; a
  local user holds at most `prefetch.PER_USER` connections (more: JSON 503). Slow-loris
  clients hold no thread, and one user's flood no slot another needs (`prefetch`);
- request line, header count and header size are limited (functions-framework turns the
  line limit off): too large → JSON 414/431;
- gunicorn's own error pages (400, 414, 431, …) are JSON `{"error": …}` like every answer
  of the functions, and never repeat what the client sent (a header may hold a token);
- a declared body over `MAX_BODY_BYTES` is answered 413 before the app runs, unread, and
  the connection closed (the app's own guard, functions/http_guard.py, caps lower and also
  bounds chunked bodies; functions-framework would otherwise read every body whole).

On Cloud Functions Google's front end does this before the request reaches the function.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from typing import Any

from gunicorn import util as gunicorn_util
from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import ThreadWorker

from spotbench.localrun.prefetch import PrefetchMixin

REQUEST_READ_S = 5.0  # from a request's first byte to its last
WRITE_S = 30.0  # a client that does not read its answer
THREADS = 16
# The server's own bound on a declared body, whatever the app: refused before the app runs
# (the functions cap theirs lower, functions/http_guard.py; Cloud Run's is 32 MiB).
MAX_BODY_BYTES = 1024 * 1024
LIMITS = {"limit_request_line": 4094, "limit_request_fields": 50, "limit_request_field_size": 8190}

_REASONS = {
    400: "malformed HTTP request",
    403: "request refused",
    408: "the request did not arrive in time",
    413: "request too large",
    414: "request line too long",
    417: "expectation failed",
    431: "request headers too large",
    500: "internal server error",
    501: "unsupported transfer coding",
    503: "too many connections from this user: retry later",
}


class RequestTimeout(Exception):
    """The client did not send its whole request within REQUEST_READ_S."""


def write_json_error(sock: socket.socket, status: int, reason: str, mesg: str = "") -> None:
    """gunicorn's `util.write_error`, answering JSON and never echoing the request.

    An unknown transfer coding is the client's error: 400, not gunicorn's 501 (a request
    must never be able to make the server answer 5xx)."""
    if status == 501:
        status, reason = 400, "Bad Request"
        body = json.dumps({"error": _REASONS[501]}).encode()
    else:
        body = json.dumps({"error": _REASONS.get(status, reason.lower())}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    gunicorn_util.write_nonblock(sock, head.encode("latin-1") + body)


class BoundedSocket(socket.socket):
    """A client socket whose reads for one request share one deadline."""

    started: float | None = None

    @classmethod
    def adopt(cls, sock: socket.socket) -> BoundedSocket:
        blocking = sock.getblocking()
        new = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        new.setblocking(blocking)
        return new

    def new_request(self) -> None:
        self.started = None

    def _arm(self) -> None:
        if self.gettimeout() == 0:  # the poller's non-blocking peek: not a request read
            return
        now = time.monotonic()
        if self.started is None:
            self.started = now
        left = self.started + REQUEST_READ_S - now
        if left <= 0:
            raise RequestTimeout(f"no complete request within {REQUEST_READ_S:g}s")
        super().settimeout(left)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._arm()
        try:
            return super().recv(bufsize, flags)
        except TimeoutError:
            raise RequestTimeout(f"no complete request within {REQUEST_READ_S:g}s") from None

    def recv_into(self, buffer, nbytes: int = 0, flags: int = 0) -> int:
        self._arm()
        try:
            return super().recv_into(buffer, nbytes, flags)
        except TimeoutError:
            raise RequestTimeout(f"no complete request within {REQUEST_READ_S:g}s") from None

    def sendall(self, data, flags: int = 0) -> None:
        if self.gettimeout() != 0:
            super().settimeout(WRITE_S)
        super().sendall(data, flags)

    def send(self, data, flags: int = 0) -> int:
        if self.gettimeout() != 0:
            super().settimeout(WRITE_S)
        return super().send(data, flags)


class BoundedThreadWorker(PrefetchMixin, ThreadWorker):
    """gunicorn's threaded worker with requests read whole before a thread takes them
    (`prefetch`), connections bounded per local user, per-request read deadlines and JSON
    error pages."""

    read_s = REQUEST_READ_S

    def init_process(self) -> None:
        gunicorn_util.write_error = write_json_error  # this worker process only
        self.init_prefetch()
        super().init_process()

    @staticmethod
    def refuse(sock: socket.socket, status: int, reason: str) -> None:
        try:
            write_json_error(sock, status, reason)
        except OSError:
            pass

    def handle(self, conn):
        if not isinstance(conn.sock, BoundedSocket):
            conn.sock = BoundedSocket.adopt(conn.sock)
        conn.sock.new_request()
        self.replay(conn)
        return super().handle(conn)

    def handle_request(self, req, conn):
        length = next((v for k, v in req.headers if k == "CONTENT-LENGTH"), "")
        if length.strip().isdigit() and int(length) > MAX_BODY_BYTES:
            self.log.info("refused a %s-byte body from %s", length.strip(),
                          (conn.client or ("?",))[0])
            write_json_error(conn.sock, 413, "Request Entity Too Large")
            return False  # closed, the body unread
        return super().handle_request(req, conn)

    def handle_error(self, req, client, addr, exc) -> None:
        if isinstance(exc, RequestTimeout):
            self.log.info("closed a connection from %s: %s", (addr or ("?",))[0], exc)
            try:
                write_json_error(client, 408, "Request Timeout")
            except OSError:
                pass
            return
        super().handle_error(req, client, addr, exc)


class ServerApp(BaseApplication):
    """gunicorn serving `app` with functions-framework's settings (bind, `WORKERS`,
    `GUNICORN_LOG_LEVEL`, `CLOUD_RUN_TIMEOUT_SECONDS`, what its `GunicornApplication`
    reads), overridden by `options` (the bounded worker, threads and the limits)."""

    def __init__(self, app: Any, host: str, port: int, **options: Any):
        self.options = {
            "bind": f"{host}:{port}",
            "workers": int(os.environ.get("WORKERS", 1)),
            "loglevel": os.environ.get("GUNICORN_LOG_LEVEL", "error"),
            "timeout": int(os.environ.get("CLOUD_RUN_TIMEOUT_SECONDS", 0)),
            **options,
        }
        self.app = app
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self.app


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int)
    where.add_argument("--fd", type=int, help="serve on this inherited, bound, listening socket")
    args = ap.parse_args(argv)

    from functions_framework import create_app

    app = create_app(args.target, args.source, "http")  # functions/main.py adds its guard:
    # bodies capped before anything reads them, Flask's own errors in JSON (functions/http_guard.py)
    bind = {"bind": f"fd://{args.fd}"} if args.fd is not None else {}
    ServerApp(app, args.host, args.port, worker_class="spotbench.localrun.http_server.BoundedThreadWorker",
              threads=THREADS, keepalive=0, **LIMITS, **bind).run()  # a request per connection


if __name__ == "__main__":
    main()
