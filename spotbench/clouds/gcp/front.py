"""What a Cloud Functions gen2 function receives from Cloud Run's front end, and how it reads it.

Gen2 functions are Cloud Run services. Cloud Run's front end checks the caller before the
request reaches the container: the Google-signed ID token (signature, `aud` = one of the
service's URLs, expiry) and `run.invoker` on the service for the token's account. It then
replaces the token's signature with `SIGNATURE_REMOVED_BY_GOOGLE` and forwards it
(https://cloud.google.com/run/docs/authenticating/service-to-service). A function can no
longer verify that token itself: the front end is the verifier.

Which header carries the checked token: `X-Serverless-Authorization` when the request has
it (Cloud Run then checks only that one and forwards `Authorization` untouched), else
`Authorization`. A function must read the header the front end checked, never the other
one: a caller holding `run.invoker` could otherwise put anyone's forged claims in the
unchecked header.

A function takes a stripped token only when its deployment says it runs behind Cloud Run
(`SPOTBENCH_GCP_FRONT=cloud-run`, set by infra/gcp/functions.py, never by a request); it
still checks the claims Google signed: issuer, audience (its own URL), expiry, and the
caller's identity (`spotbench.clouds.gcp.identity.identity_from_claims`). Anywhere else a stripped
token is refused (401).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from spotbench.auth import Unauthorized

SIGNATURE_REMOVED = "SIGNATURE_REMOVED_BY_GOOGLE"
SERVERLESS_HEADER = "X-Serverless-Authorization"
FRONT_ENV = "SPOTBENCH_GCP_FRONT"  # set by the deployment, never by a request
CLOUD_RUN = "cloud-run"
GOOGLE_ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
CLOCK_SKEW_S = 10  # tolerated clock difference for iat/exp


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name.lower()), None)
    return value


def bearer(value: str | None, name: str = "Authorization") -> str:
    """The token of a `<name>: Bearer …` header value."""
    if not value:
        raise Unauthorized(f"missing {name} header: send '{name}: Bearer <ID token>'")
    match = re.fullmatch(r"\s*Bearer\s+(\S+)\s*", value, flags=re.IGNORECASE)
    if not match:
        raise Unauthorized(f"{name} header must be 'Bearer <ID token>'")
    return match.group(1)


def checked_token(headers: Mapping[str, str]) -> str:
    """The token of the header Cloud Run's front end checks: `X-Serverless-Authorization`
    when present (then `Authorization` is the application's, unchecked), else
    `Authorization`."""
    serverless = _header(headers, SERVERLESS_HEADER)
    if serverless is not None:
        return bearer(serverless, SERVERLESS_HEADER)
    return bearer(_header(headers, "Authorization"))


def signature_removed(token: str) -> bool:
    return token.count(".") == 2 and token.rsplit(".", 1)[1] == SIGNATURE_REMOVED


def _segment(text: str) -> Any:
    padded = text + "=" * (-len(text) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


def forwarded_claims(token: str, *, audience: str | Sequence[str],
                     now: float | None = None) -> Mapping[str, Any]:  # fmt: skip
    """The claims of a token Cloud Run's front end checked and stripped, checked again for
    what Google signed: issuer, audience, issue and expiry times. `Unauthorized` otherwise."""
    parts = token.split(".")
    try:
        header, claims = _segment(parts[0]), _segment(parts[1])
    except (ValueError, IndexError, UnicodeError, binascii.Error):
        raise Unauthorized("invalid ID token: malformed or unverifiable token") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise Unauthorized("invalid ID token: malformed or unverifiable token")
    if claims.get("iss") not in GOOGLE_ISSUERS:
        raise Unauthorized(f"ID token issuer {claims.get('iss')!r} is not Google")
    wanted = {audience} if isinstance(audience, str) else set(audience)
    if claims.get("aud") not in wanted:
        raise Unauthorized("invalid ID token: wrong audience")
    now = time.time() if now is None else now
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or not isinstance(iat, int | float):
        raise Unauthorized("invalid ID token: malformed or unverifiable token")
    if exp < now - CLOCK_SKEW_S:
        raise Unauthorized("invalid ID token: token expired")
    if iat > now + CLOCK_SKEW_S:
        raise Unauthorized("invalid ID token: token not valid yet")
    return claims
