"""A threaded HTTP server on 127.0.0.1 (a free port) that hands every request to one
function: the scaffolding of the tests' fronts (the EC2 spot front, the IAM-enforcing
account) that sit between a client and moto_server."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Mapping
from typing import Any


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A peer that hung up (a client's keep-alive connection closed, an upstream reset: the
        client's SDK retries) is not an error of the test; anything else is printed as usual.
        socketserver prints to `sys.stderr`, which a CliRunner in the same process captures
        into the command's output."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class LocalServer:
    def __init__(self, handle: Callable[[http.server.BaseHTTPRequestHandler], None]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY: the headers and the body are two writes; with Nagle on, the body
            # waits for the client's delayed ACK of the headers (~40 ms on Linux) on every
            # keep-alive request, and the fronts chain (client → IAM front → spot front → moto)
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def read_body(h: http.server.BaseHTTPRequestHandler) -> bytes:
    """The request body: by Content-Length when given (a front before this one forwards a
    de-chunked body with its client's Transfer-Encoding header still on), else chunked."""
    if h.headers.get("Content-Length") is None and \
            h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                h.rfile.readline()
                return b"".join(chunks)
            chunks.append(h.rfile.read(size))
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length else b""


def reply(h: http.server.BaseHTTPRequestHandler, status: int, headers: Mapping[str, str],
           body: bytes) -> None:
    h.send_response(status)
    for key, value in headers.items():
        h.send_header(key, value)
    if not any(k.lower() == "content-length" for k in headers):
        h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)
