"""Local cloud identity: bearer tokens derived from the sweep's secret with HMAC.

A member's token is `<member-name>.<hmac(secret, member-name)>`, the scheduler's is
`scheduler.<expires>.<hmac(secret, "scheduler:<expires>")>`, minted for each tick and good
for `SCHEDULER_TOKEN_S` (a token caught on the way, e.g. by whoever answered on the
server's port, starts and stops nothing for long: issue 38); the function recomputes the
HMAC, so a token names its holder and cannot be made for another name without the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

from spotbench.auth import Caller, Unauthorized

SCHEDULER = "scheduler"
SCHEDULER_TOKEN_S = 300  # how long a scheduler token is good for (each tick mints its own)


def _sign(secret: str, name: str) -> str:
    return hmac.new(secret.encode(), name.encode(), hashlib.sha256).hexdigest()


def member_token(secret: str, member: str) -> str:
    return f"{member}.{_sign(secret, 'member:' + member)}"


def scheduler_token(secret: str, now: float | None = None) -> str:
    """A scheduler token good for `SCHEDULER_TOKEN_S` from `now` (default: the clock)."""
    expires = int(now if now is not None else time.time()) + SCHEDULER_TOKEN_S
    return f"{SCHEDULER}.{expires}.{_sign(secret, f'scheduler:{expires}')}"


def _scheduler(token: str, secret: str, now: float | None) -> Caller:
    _, expires, _mac = token.split(".", 2) if token.count(".") == 2 else ("", "", "")
    if not expires.isdigit() or not hmac.compare_digest(token, scheduler_token(secret, int(expires) - SCHEDULER_TOKEN_S)):
        raise Unauthorized("invalid bearer token")
    left = int(expires) - (now if now is not None else time.time())
    if left < 0:
        raise Unauthorized("expired scheduler token")
    if left > SCHEDULER_TOKEN_S + 60:  # minted for a clock far ahead: never good for long
        raise Unauthorized("scheduler token expires too late")
    return Caller("scheduler", SCHEDULER)


def bearer(headers: Mapping[str, str]) -> str:
    """The token of an `Authorization: Bearer …` header, or Unauthorized."""
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing 'Authorization: Bearer <token>' header")
    return token.strip()


def caller_from_headers(headers: Mapping[str, str], secret: str, now: float | None = None) -> Caller:
    token = bearer(headers)
    name, _, mac = token.rpartition(".")
    if not name or not mac or not token.isascii():  # compare_digest takes ASCII str only
        raise Unauthorized("malformed bearer token")
    if name.startswith(SCHEDULER + "."):
        return _scheduler(token, secret, now)
    if hmac.compare_digest(token, member_token(secret, name)):
        return Caller("member", name)
    raise Unauthorized("invalid bearer token")
