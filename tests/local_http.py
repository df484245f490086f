"""A threaded HTTP server on 127.0.0.1 (a free port) that hands every request to one
function: the scaffolding of the tests' fronts (the EC2 spot front, the IAM-enforcing
account) that sit between a client and moto_server."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from typing import Any


class LocalServer:
    def __init__(self, handle: Callable[[http.server.BaseHTTPRequestHandler], None]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
