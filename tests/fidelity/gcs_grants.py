"""A double of the Google APIs behind a GCP group's grants, doing what the platform does.

One local HTTP server for:

- IAM Credentials `signBlob` (`/v1/projects/-/serviceAccounts/<email>:signBlob`): only the
  function's own token, only for its own account (the `sign` role is bound on that account
  alone); RSA-SHA256 with that account's key;
- STS token exchange (`/v1/token`): the subject token must be the function's; the answer
  is a new token bound to the `accessBoundary` of the `options` field, living no longer than
  its source (1 h);
- Secret Manager `versions/latest:access`: the function's token only;
- Cloud Storage POST policy uploads (`POST /<bucket>`, multipart form): the policy's
  signature (hex RSA-SHA256 of the base64 policy, the account's public key by
  `x-goog-credential`), its `expiration`, every condition (`{field: value}` exact,
  `["starts-with", "$key", prefix]`), every form field covered by a condition but
  `policy`, `x-goog-signature`, `file` and `x-ignore-*`, and the bucket condition;
- Cloud Storage JSON media uploads (`POST /upload/storage/v1/b/<b>/o?uploadType=media&name=`)
  with a bearer token: the function's (the sweep prefix) or a downscoped one, honoured only
  where its boundary's CEL condition holds for `resource.name` (cel-python).

`now` is a settable clock, so a test can replay a grant after its deadline.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import celpy
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SOURCE_TOKEN_S = 3600
IGNORED_FIELDS = ("policy", "x-goog-signature", "file")


@dataclass
class GrantApis:
    function_account: str
    function_token: str
    secrets: dict[str, bytes] = field(default_factory=dict)  # resource name → payload
    objects: dict[str, dict[str, bytes]] = field(default_factory=dict)  # bucket → name → bytes
    prefix: str = ""  # what the function's own token may write: the sweep's prefix
    clock: float | None = None  # None: time.time()
    refusals: list[str] = field(default_factory=list)
    _keys: dict[str, rsa.RSAPrivateKey] = field(default_factory=dict)
    _downscoped: dict[str, tuple[dict[str, Any], float]] = field(default_factory=dict)

    def now(self) -> float:
        return time.time() if self.clock is None else self.clock

    def key(self, account: str) -> rsa.RSAPrivateKey:
        if account not in self._keys:
            self._keys[account] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self._keys[account]

    # -- the APIs -----------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str],
               body: bytes) -> tuple[int, dict[str, Any]]:  # fmt: skip
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if method == "POST" and path.endswith(":signBlob"):
            return self._sign(path, bearer, body)
        if method == "POST" and path == "/v1/token":
            return self._exchange(body)
        if method == "GET" and path.endswith("/versions/latest:access"):
            return self._secret(path, bearer)
        if method == "POST" and path.startswith("/upload/storage/v1/b/"):
            return self._media(path, query, bearer, body)
        if method == "POST" and path.count("/") == 1:
            return self._post_object(path.strip("/"), headers, body)
        return 404, {"error": f"double does not serve {method} {path}"}

    def _refuse(self, status: int, why: str) -> tuple[int, dict[str, Any]]:
        self.refusals.append(why)
        return status, {"error": {"code": status, "message": why}}

    def _sign(self, path: str, bearer: str, body: bytes) -> tuple[int, dict[str, Any]]:
        account = unquote(path.split("/serviceAccounts/", 1)[1].removesuffix(":signBlob"))
        if bearer != self.function_token:
            return self._refuse(401, "signBlob: not the function's token")
        if account != self.function_account:  # iam.serviceAccounts.signBlob on itself only
            return self._refuse(403, f"signBlob: permission denied on {account}")
        payload = base64.b64decode(json.loads(body)["payload"])
        signed = self.key(account).sign(payload, padding.PKCS1v15(), hashes.SHA256())
        return 200, {"keyId": "k1", "signedBlob": base64.b64encode(signed).decode()}

    def _exchange(self, body: bytes) -> tuple[int, dict[str, Any]]:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if form.get("subject_token") != self.function_token:
            return self._refuse(401, "sts: the subject token is not valid")
        boundary = json.loads(unquote(form.get("options", "")))["accessBoundary"]
        token = "cab." + secrets.token_urlsafe(16)
        self._downscoped[token] = (boundary, self.now() + SOURCE_TOKEN_S)
        return 200, {"access_token": token, "expires_in": SOURCE_TOKEN_S,
                     "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}

    def _secret(self, path: str, bearer: str) -> tuple[int, dict[str, Any]]:
        name = path.removeprefix("/v1/").removesuffix("/versions/latest:access")
        if bearer != self.function_token:
            return self._refuse(403, f"secret {name}: permission denied")
        if name not in self.secrets:
            return self._refuse(404, f"secret {name} not found")
        return 200, {"payload": {"data": base64.b64encode(self.secrets[name]).decode()}}

    def _media(self, path: str, query: dict[str, list[str]], bearer: str,
               body: bytes) -> tuple[int, dict[str, Any]]:  # fmt: skip
        bucket = unquote(path.removeprefix("/upload/storage/v1/b/").split("/", 1)[0])
        name = query.get("name", [""])[0]
        resource = f"projects/_/buckets/{bucket}/objects/{name}"
        if bearer == self.function_token:
            allowed = name.startswith(self.prefix)
        elif bearer in self._downscoped:
            boundary, expires = self._downscoped[bearer]
            if self.now() >= expires:
                return self._refuse(401, "downscoped token expired")
            allowed = any(rule_allows(rule, bucket, resource, "storage.objects.create")
                          for rule in boundary.get("accessBoundaryRules", []))
        else:
            return self._refuse(401, "unknown token")
        if not allowed:
            return self._refuse(403, f"storage.objects.create denied on {resource}")
        self.objects.setdefault(bucket, {})[name] = body
        return 200, {"bucket": bucket, "name": name}

    def _post_object(self, bucket: str, headers: dict[str, str],
                     body: bytes) -> tuple[int, dict[str, Any]]:  # fmt: skip
        fields, data = _form(headers.get("content-type", ""), body)
        policy_b64 = fields.get("policy", "")
        try:
            policy = json.loads(base64.b64decode(policy_b64))
            signature = bytes.fromhex(fields.get("x-goog-signature", ""))
        except ValueError:
            return self._refuse(400, "malformed policy or signature")
        account = fields.get("x-goog-credential", "").split("/", 1)[0]
        if account not in self._keys:
            return self._refuse(403, f"no key of {account!r} signed this")
        try:
            self.key(account).public_key().verify(signature, policy_b64.encode(),
                                                  padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return self._refuse(403, "SignatureDoesNotMatch")
        expiration = datetime.strptime(policy["expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        if self.now() >= expiration.timestamp():
            return self._refuse(400, "Invalid according to Policy: Policy expired")
        refused = post_refusal(policy, fields, bucket, len(data))
        if refused is not None:
            return self._refuse(*refused)
        self.objects.setdefault(bucket, {})[fields["key"]] = data
        return 204, {}


def post_refusal(policy: dict[str, Any], fields: dict[str, str], bucket: str,
                 size: int) -> tuple[int, str] | None:
    """GCS's check of a POST policy document's `conditions` on an upload's form `fields`
    and file `size` (https://cloud.google.com/storage/docs/authentication/signatures#policy-document):
    `{field: value}` exact, `["eq"|"starts-with", "$field", value]`, `["content-length-range",
    min, max]` (400 EntityTooLarge / too small); every form field but `policy`,
    `x-goog-signature`, `file`, `x-ignore-*` and `bucket` must be covered by a condition.
    (status, reason) of the refusal, None when the upload passes. A condition of another
    kind raises: a new one in the grant cannot pass untested."""
    covered = set()
    for cond in policy.get("conditions", []):
        if isinstance(cond, dict):
            (k, v), = cond.items()
            have = bucket if k == "bucket" else fields.get(k)
            if have != v:
                return 403, f"Invalid according to Policy: {k} must be {v!r}"
            covered.add(k)
        elif cond[0] == "starts-with":
            k = cond[1].lstrip("$")
            if not fields.get(k, "").startswith(cond[2]):
                return 403, f"Invalid according to Policy: {k} must start with {cond[2]!r}"
            covered.add(k)
        elif cond[0] == "eq":
            k = cond[1].lstrip("$")
            if fields.get(k) != cond[2]:
                return 403, f"Invalid according to Policy: {k}"
            covered.add(k)
        elif cond[0] == "content-length-range":
            if not int(cond[1]) <= size <= int(cond[2]):
                return 400, f"EntityTooLarge: {size} bytes outside [{cond[1]}, {cond[2]}]"
        else:
            raise AssertionError(f"POST policy condition {cond!r} is not modelled")
    loose = [k for k in fields if k not in covered and k not in IGNORED_FIELDS
             and not k.startswith("x-ignore-") and k != "bucket"]
    if loose:
        return 403, f"Invalid according to Policy: extra fields {loose}"
    return None


def rule_allows(rule: dict[str, Any], bucket: str, resource: str, permission: str) -> bool:
    if rule.get("availableResource") != f"//storage.googleapis.com/projects/_/buckets/{bucket}":
        return False
    roles = rule.get("availablePermissions", [])
    if not any(r in ("inRole:roles/storage.objectUser", "inRole:roles/storage.objectCreator",
                     "inRole:roles/storage.objectAdmin") for r in roles):
        return False
    expression = (rule.get("availabilityCondition") or {}).get("expression")
    if not expression:
        return True
    return bool(_cel(expression, resource))


def _cel(expression: str, resource: str) -> Any:
    """The boundary's CEL condition for an object `resource` (no list prefix: an upload)."""
    env = celpy.Environment()
    program = env.program(env.compile(expression.replace(
        "api.getAttribute('storage.googleapis.com/objectListPrefix', '')", "list_prefix")))
    return program.evaluate({"resource": celpy.json_to_cel({"name": resource}),
                             "list_prefix": celpy.celtypes.StringType("\x00")})


def _form(content_type: str, body: bytes) -> tuple[dict[str, str], bytes]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields, data = {}, b""
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name == "file":
            data = part.get_payload(decode=True) or b""
        else:
            fields[name] = part.get_content().strip() if part.get_content_maintype() == "text" \
                else (part.get_payload(decode=True) or b"").decode()
    return fields, data


class GrantApiServer:
    def __init__(self, apis: GrantApis) -> None:
        self.apis = apis
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                url = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = outer.apis.handle(
                    self.command, url.path, parse_qs(url.query),
                    {k.lower(): v for k, v in self.headers.items()}, body)
                raw = json.dumps(answer).encode() if status != 204 else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = _serve  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
