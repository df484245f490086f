"""The lab's hub (`python -m tests.fidelity.hub DIR` inside the hub network namespace): what a
member reaches besides its peers.

- `http://10.255.255.254:8080/done`: stands in for the sweep's `done` function; records
  each call (path, Authorization, body) in DIR/done.jsonl and answers 200 JSON.
- `http://169.254.169.254/` (also `metadata.google.internal` in the VMs' /etc/hosts): the
  GCE metadata identity endpoint (needs `Metadata-Flavor: Google`) and EC2's IMDSv2 (token
  PUT, instance-profile credentials) — what `spotbench.done_client` and botocore ask. GCE's
  access-token endpoint answers a token of the service account the calling VM runs as
  (DIR/accounts.json: VM address → account email; none: 404, like a VM without one).
- `http://10.255.255.254:8080/done/grant` and `/done/keys`: AWS's function URL paths (the
  lab's function URL is `/done/`), answered by tests/fidelity/aws_function.py: SigV4 checked,
  the calling instance's own group's grant or entries only.
- `http://10.255.255.254:8080/grant`: stands in for GCP's `grant` function: answers a VM
  (by its address, with the metadata server's identity token) its own group's files
  (DIR/grants.json, written by `boot.Lab`), 403 otherwise.
- `http://10.255.255.254:8081/v1/projects/P/secrets/S/versions/latest:access`: Secret
  Manager (the VMs' curl is pointed here for secretmanager.googleapis.com). It takes only a
  token this hub issued and answers the secret (DIR/secrets.json: name → base64 data and
  the members allowed to read it, from the declared IAM policy) to those members only —
  403 PERMISSION_DENIED otherwise — recording each call in DIR/secrets.jsonl.
"""

from __future__ import annotations

import base64
import json
import socketserver
import sys
import threading
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HUB_IP = "10.255.255.254"
DONE_PORT = 8080
SECRETS_PORT = 8081
METADATA_IP = "169.254.169.254"
GCP_TOKEN = "sim-gcp-identity-token"
IMDS_TOKEN = "sim-imds-token"
ROLE = "sim-instance-role"
CREDS = {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "ASIASIMULATEDKEY0001",
         "SecretAccessKey": "simulated-secret", "Token": "simulated-session-token",
         "Expiration": "2099-01-01T00:00:00Z", "LastUpdated": "2025-01-01T00:00:00Z"}


ACCESS_PREFIX = "sim-gcp-access-"
_TOKENS: dict[str, str] = {}  # access token this hub issued → service account email
_LOCK = threading.Lock()


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def handler(out: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: str | dict, ctype: str = "application/json") -> None:
            data = (json.dumps(body) if isinstance(body, dict) else body).encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path in ("/done/grant", "/done/keys"):  # AWS: the function URL's paths
                from tests.fidelity import aws_function

                url = f"http://{self.headers.get('Host', HUB_IP)}{self.path}"
                return self._send(*aws_function.answer(out, self.path, url, dict(self.headers),
                                                       body, self.client_address[0]))
            if self.path == "/grant":  # GCP's grant function: this VM's own group's files
                files = _json(out / "grants.json").get(self.client_address[0]) or {}
                asked = json.loads(body or b"{}").get("file")
                if self.headers.get("Authorization") != f"Bearer {GCP_TOKEN}" or asked not in files:
                    return self._send(403, {"error": f"no file {asked!r} for this instance"})
                return self._send(200, {"file": asked, "data": files[asked]})
            with open(out / "done.jsonl", "a") as fh:
                fh.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"),
                                     "body": json.loads(body or b"{}"),
                                     "client": self.client_address[0]}) + "\n")
            self._send(200, {"stopped": []})

        def do_PUT(self) -> None:  # noqa: N802
            if self.path == "/latest/api/token":
                return self._send(200, IMDS_TOKEN, "text/plain")
            self._send(404, {"error": "not found"})

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            if self.server.server_address[1] == SECRETS_PORT:
                return self._secret(path)
            if path == "/computeMetadata/v1/instance/service-accounts/default/token":
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self._send(403, {"error": "Missing Metadata-Flavor:Google header"})
                account = _json(out / "accounts.json").get(self.client_address[0])
                if not account:
                    return self._send(404, {"error": "this VM runs as no service account"})
                token = ACCESS_PREFIX + uuid.uuid4().hex
                with _LOCK:
                    _TOKENS[token] = account
                return self._send(200, {"access_token": token, "expires_in": 3599,
                                        "token_type": "Bearer"})
            if path.startswith("/computeMetadata/v1/instance/service-accounts/default/identity"):
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self._send(403, {"error": "Missing Metadata-Flavor:Google header"})
                return self._send(200, GCP_TOKEN, "text/plain")
            if path.startswith("/latest/"):
                if self.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
                    return self._send(401, "", "text/plain")  # IMDSv2 only
                if path == "/latest/meta-data/iam/security-credentials/":
                    return self._send(200, ROLE, "text/plain")
                if path == f"/latest/meta-data/iam/security-credentials/{ROLE}":
                    return self._send(200, CREDS)
                if path == "/latest/meta-data/placement/region":
                    return self._send(200, "us-east-1", "text/plain")
            self._send(404, {"error": f"not found: {path}"})

        def _secret(self, path: str) -> None:
            auth = self.headers.get("Authorization", "")
            with _LOCK:
                account = _TOKENS.get(auth.removeprefix("Bearer "))
            name = path.removeprefix("/v1/").removesuffix("/versions/latest:access")
            secret = _json(out / "secrets.json").get(name)
            if account is None:
                code, body = 401, {"error": {"code": 401, "status": "UNAUTHENTICATED",
                                             "message": "Request had invalid credentials."}}
            elif secret is None or not path.endswith("/versions/latest:access"):
                code, body = 404, {"error": {"code": 404, "status": "NOT_FOUND",
                                             "message": f"Secret [{name}] not found."}}
            elif f"serviceAccount:{account}" not in secret["readers"]:
                code, body = 403, {"error": {"code": 403, "status": "PERMISSION_DENIED",
                                             "message": "Permission 'secretmanager.versions."
                                             f"access' denied for resource '{name}/versions/latest'"}}
            else:
                data = base64.b64decode(secret["data"])
                code, body = 200, {"name": f"{name}/versions/1", "payload": {
                    "data": secret["data"], "dataCrc32c": str(zlib.crc32(data))}}
            with _LOCK, open(out / "secrets.jsonl", "a") as fh:
                fh.write(json.dumps({"client": self.client_address[0], "account": account,
                                     "secret": name, "status": code}) + "\n")
            self._send(code, json.dumps(body, indent=2) + "\n")  # Google's is pretty-printed

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    def server_bind(self) -> None:
        """Without HTTPServer's `socket.getfqdn` of the address: a DNS lookup that, in the
        hub's namespace (a default route, no resolver), waits for seconds per server."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]


def main(out: Path) -> None:
    servers = [_Server((HUB_IP, DONE_PORT), handler(out)),
               _Server((HUB_IP, SECRETS_PORT), handler(out)),
               _Server((METADATA_IP, 80), handler(out))]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    (out / "hub.ready").write_text("ok")
    threading.Event().wait()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
