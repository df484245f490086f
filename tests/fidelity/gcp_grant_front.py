"""A member VM's way to the sweep's `grant` function, for the GCP fidelity harness.

What a deployment has and the local endpoint does not: the VM's metadata server (its
identity token, audience = the function URL) and Cloud Run's front end in front of the
function (checks the token, `run.routes.invoke` of the caller's account on the service). One
local HTTP server plays both:

- `GET /metadata/<instance>?audience=…`: an opaque identity token of that instance
  (`spotbench.clouds.gcp.METADATA_IDENTITY` points here, per instance);
- `POST /<sweep>-grant`: the token must be one it issued for this URL; the invoke
  permission is checked against the declared policy (`check_invoke`), then the real
  `grant` action runs (`functions.app.handle`) as the function's account: its Google calls
  go to the endpoint listener of that account (`function_url`), so every one is checked.

The caller's claims (instance id, zone, project) are what Google signs in a `format=full`
token; here the front knows them from the token it issued (the signature checks themselves
are tests/security/test_gcp_grant.py's).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from functions.app import FunctionConfig, handle
from spotbench.auth import Caller


class GrantFront:
    def __init__(self, *, env: dict[str, str], function_url: str, deployed_url: str,
                 project: str, instance_of: Callable[[str], dict[str, Any]],
                 check_invoke: Callable[[str, str], None]) -> None:  # fmt: skip
        self.env = env  # the declared `grant` function's environment (+ local endpoints)
        self.function_url = function_url  # the endpoint listener of the function's account
        self.deployed_url = deployed_url  # the function's https URL in the deployment
        self.project = project
        self.instance_of = instance_of  # name → {"zone", "id", "service_account"}
        self.check_invoke = check_invoke  # (member account, deployed URL) → record the call
        self.tokens: dict[str, tuple[str, str]] = {}  # token → (instance, audience)
        self.answers: list[tuple[int, Any]] = []
        self._lock = threading.Lock()  # one function instance: one request at a time
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                url = urlsplit(self.path)
                name = url.path.removeprefix("/metadata/")
                audience = parse_qs(url.query).get("audience", [""])[0]
                token = f"idt.{name}.{secrets.token_urlsafe(8)}"
                outer.tokens[token] = (name, audience)
                self._send(200, token.encode(), "text/plain")

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
                status, out = outer.serve(self.path, bearer, json.loads(body or b"{}"))
                self._send(status, json.dumps(out).encode(), "application/json")

            def _send(self, status: int, data: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def metadata_for(self, instance: str) -> str:
        return f"{self.url}/metadata/{instance}"

    def serve(self, path: str, bearer: str, body: Any) -> tuple[int, Any]:
        name, audience = self.tokens.get(bearer, ("", ""))
        if not name or audience != self.url + path:
            return 401, {"error": "the front refuses a token not issued for this function"}
        inst = self.instance_of(name)
        self.check_invoke(f"serviceAccount:{inst['service_account']}", self.deployed_url)
        caller = Caller("member", name, zone=inst["zone"], instance_id=inst["id"],
                        account=self.project)
        env = {**self.env, "SPOTBENCH_GCP_API_ENDPOINT": self.function_url,
               "SPOTBENCH_GCP_GRANT_ENDPOINT": self.function_url}
        with self._lock:
            # the function's process: its storage client goes to its account's listener (the
            # member that called waits for the answer, so the switch is not seen by it)
            saved = os.environ.get("STORAGE_EMULATOR_HOST")
            os.environ["STORAGE_EMULATOR_HOST"] = self.function_url
            try:
                status, out = handle("grant", body, caller, FunctionConfig(env))
            finally:
                if saved is None:
                    os.environ.pop("STORAGE_EMULATOR_HOST", None)
                else:
                    os.environ["STORAGE_EMULATOR_HOST"] = saved
        self.answers.append((status, out))
        return status, out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
