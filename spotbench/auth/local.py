"""Local cloud identity: bearer tokens derived from the sweep's secret with HMAC.

A member's token is `<member-name>.<hmac(secret, member-name)>`, the scheduler's is
`scheduler.<hmac(secret, "scheduler")>`; the function recomputes the HMAC, so a token
names its holder and cannot be made for another name without the secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from spotbench.auth import Caller, Unauthorized

SCHEDULER = "scheduler"


def _sign(secret: str, name: str) -> str:
    return hmac.new(secret.encode(), name.encode(), hashlib.sha256).hexdigest()


def member_token(secret: str, member: str) -> str:
    return f"{member}.{_sign(secret, 'member:' + member)}"


def scheduler_token(secret: str) -> str:
    return f"{SCHEDULER}.{_sign(secret, 'scheduler')}"


def bearer(headers: Mapping[str, str]) -> str:
    """The token of an `Authorization: Bearer …` header, or Unauthorized."""
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing 'Authorization: Bearer <token>' header")
    return token.strip()


def caller_from_headers(headers: Mapping[str, str], secret: str) -> Caller:
    token = bearer(headers)
    name, _, mac = token.rpartition(".")
    if not name or not mac or not token.isascii():  # compare_digest takes ASCII str only
        raise Unauthorized("malformed bearer token")
    if name == SCHEDULER and hmac.compare_digest(token, scheduler_token(secret)):
        return Caller("scheduler", SCHEDULER)
    if hmac.compare_digest(token, member_token(secret, name)):
        return Caller("member", name)
    raise Unauthorized("invalid bearer token")
