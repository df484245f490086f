"""A tiny HTTP server on 127.0.0.1 for tests: a handler function per request, run in a
thread, stopped by the test."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (method, path, headers, json body) -> (status, json body)
Handler = Callable[[str, str, dict[str, str], Any], tuple[int, Any]]


class LocalHttp:
    def __init__(self, handle: Handler):
        self.calls: list[tuple[str, str, dict[str, str], Any]] = []
        outer = self

        class _H(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw.strip() else None
                headers = dict(self.headers.items())
                outer.calls.append((self.command, self.path, headers, body))
                status, answer = handle(self.command, self.path, headers, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LocalHttp:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
