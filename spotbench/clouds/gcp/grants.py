"""The Google APIs the `grant` function calls, as the function's own service account.

- IAM Credentials `signBlob` on its own account (it holds `iam.serviceAccounts.signBlob` on
  that account only): signs a group's POST policy;
- Security Token Service `token` (token exchange with an `accessBoundary` option): a
  downscoped copy of its own access token for a group's checkpoints;
- Secret Manager `versions/latest:access` of the sweep's one secret (key seed, env files).

`endpoint` (an `http://` URL, `SPOTBENCH_GCP_GRANT_ENDPOINT`) sends every call to one local
double without Google credentials, with `token` as the function's access token (tests).
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import requests

from spotbench.auth import Unavailable
from spotbench.clouds.gcp.storage_grant import STORAGE_URL, storage_grants
from spotbench.auth.group_keys import KEY_FILES, private_openssh
from spotbench.auth.instance import Grant

IAM_CREDENTIALS = "https://iamcredentials.googleapis.com"
STS = "https://sts.googleapis.com"
SECRET_MANAGER = "https://secretmanager.googleapis.com"
TIMEOUT_S = 30
TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


class GrantApiError(Unavailable):
    """A Google API the grant needs failed (HTTP 503 to the member, who retries)."""


@dataclass
class GoogleGrantApis:
    account: str  # the function's own service account (signer, token source)
    endpoint: str | None = None  # one local double for all three APIs (tests)
    token: str | None = None  # the function's access token at that double (tests)
    _session: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _secret: dict[str, Any] | None = None

    def _http(self) -> Any:
        if self._session is None:
            if self.endpoint:
                self._session = requests.Session()
                self._session.headers["Authorization"] = f"Bearer {self.token or ''}"
            else:
                import google.auth
                from google.auth.transport.requests import AuthorizedSession

                creds, _ = google.auth.default(
                    scopes=["https://www.googleapis.com/auth/cloud-platform"])
                self._session = AuthorizedSession(creds)
        return self._session

    def _url(self, base: str, path: str) -> str:
        return (self.endpoint or base).rstrip("/") + path

    def _post(self, url: str, **kwargs: Any) -> dict[str, Any]:
        try:
            resp = self._http().post(url, timeout=TIMEOUT_S, **kwargs)
        except requests.RequestException as exc:
            raise GrantApiError(f"{url}: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise GrantApiError(f"{url}: HTTP {resp.status_code} {resp.text[:200]}")
        return resp.json()

    def _access_token(self) -> str:
        if self.endpoint:
            return self.token or ""
        session = self._http()
        creds = session.credentials
        if not creds.valid:
            from google.auth.transport.requests import Request

            creds.refresh(Request())
        return creds.token

    def sign(self, payload: bytes) -> bytes:
        """RSA-SHA256 of `payload` with a Google-managed key of the function's account."""
        answer = self._post(
            self._url(IAM_CREDENTIALS, f"/v1/projects/-/serviceAccounts/{self.account}:signBlob"),
            json={"payload": base64.b64encode(payload).decode()})
        return base64.b64decode(answer["signedBlob"])

    def downscope(self, boundary: dict[str, Any]) -> tuple[str, int]:
        """A copy of the function's token limited by `boundary` (token, lifetime s)."""
        form = {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "subject_token_type": TOKEN_TYPE, "requested_token_type": TOKEN_TYPE,
                "subject_token": self._access_token(),
                "options": urllib.parse.quote(json.dumps(boundary))}
        try:  # STS takes no Authorization: the subject token is the credential
            resp = requests.post(self._url(STS, "/v1/token"), data=form, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise GrantApiError(f"STS: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise GrantApiError(f"STS: HTTP {resp.status_code} {resp.text[:200]}")
        answer = resp.json()
        return answer["access_token"], int(answer.get("expires_in", 0))

    def secret(self, name: str) -> dict[str, Any]:
        """The sweep's secret (`projects/P/secrets/S`), read once per function instance."""
        with self._lock:
            if self._secret is None:
                url = self._url(SECRET_MANAGER, f"/v1/{name}/versions/latest:access")
                try:
                    resp = self._http().get(url, timeout=TIMEOUT_S)
                except requests.RequestException as exc:
                    raise GrantApiError(f"Secret Manager: {type(exc).__name__}") from None
                if resp.status_code != 200:
                    raise GrantApiError(f"Secret Manager: HTTP {resp.status_code}")
                data = base64.b64decode(resp.json()["payload"]["data"])
                self._secret = json.loads(data)
            return self._secret


@dataclass
class GcpGrants:
    """What the `grant` function does on GCP for a group the instance rule settled:
    its storage grants (`storage`) and its files (`file`: ssh keys derived from the sweep's
    seed, its secret env), from the sweep's one secret (`secret_name`)."""

    apis: GoogleGrantApis
    secret_name: str
    results_url: str

    def storage(self, grant: Grant) -> dict[str, Any]:
        return storage_grants(grant, self.results_url, self.apis.account, self.apis.sign,
                              self.apis.downscope, storage_url=self.apis.endpoint or STORAGE_URL)

    def file(self, group: str, file_id: str) -> bytes | None:
        """A group's file by id (None: the sweep has no such file for the group)."""
        secret = self.apis.secret(self.secret_name)
        if file_id in KEY_FILES:
            seed = bytes.fromhex(str(secret.get("seed", "")))
            return private_openssh(seed, group, file_id).encode()
        if file_id == ENV_FILE_ID:
            digest = (secret.get("env_of") or {}).get(group)
            text = (secret.get("env") or {}).get(digest) if digest else None
            return text.encode() if isinstance(text, str) else None
        return None


ENV_FILE_ID = "env"
