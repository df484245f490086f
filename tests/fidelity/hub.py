"""The lab's hub (`python -m tests.fidelity.hub DIR` inside the hub network namespace): what a
member reaches besides its peers.

- `http://10.255.255.254:8080/done`: stands in for the sweep's `done` function; records
  each call (path, Authorization, body) in DIR/done.jsonl and answers 200 JSON.
- `http://169.254.169.254/` (also `metadata.google.internal` in the VMs' /etc/hosts): the
  GCE metadata identity endpoint (needs `Metadata-Flavor: Google`) and EC2's IMDSv2 (token
  PUT, instance-profile credentials) — what `spotbench.done_client` and botocore ask.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HUB_IP = "10.255.255.254"
DONE_PORT = 8080
METADATA_IP = "169.254.169.254"
GCP_TOKEN = "sim-gcp-identity-token"
IMDS_TOKEN = "sim-imds-token"
ROLE = "sim-instance-role"
CREDS = {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "ASIASIMULATEDKEY0001",
         "SecretAccessKey": "simulated-secret", "Token": "simulated-session-token",
         "Expiration": "2099-01-01T00:00:00Z", "LastUpdated": "2025-01-01T00:00:00Z"}


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

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def main(out: Path) -> None:
    servers = [ThreadingHTTPServer((HUB_IP, DONE_PORT), handler(out)),
               ThreadingHTTPServer((METADATA_IP, 80), handler(out))]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    (out / "hub.ready").write_text("ok")
    threading.Event().wait()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
