"""Local cloud identity: bearer tokens derived from the sweep's secret with HMAC.

A member's token is `<member-name>.<hmac(secret, member-name)>`, the scheduler's is
`scheduler.<run>.<expires>.<hmac(secret, "scheduler:<run>:<expires>")>`: scoped to one
`spotbench run` (`<run>`: a random session id the runner's functions server is started
with, `SPOTBENCH_SCHEDULER_SESSION`, and refuses every other), minted for each tick and good
for `SCHEDULER_TOKEN_S` (a token caught on the way, e.g. by whoever answered on the
server's port, starts and stops nothing for long, and nothing once its run is over: issue
38); the function recomputes the HMAC, so a token names its holder and cannot be made for
another name or run without the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Mapping

from spotbench.auth import Caller, Unauthorized

SCHEDULER = "scheduler"
SCHEDULER_TOKEN_S = 300  # how long a scheduler token is good for (each tick mints its own)
SESSION_ENV = "SPOTBENCH_SCHEDULER_SESSION"  # the run whose scheduler tokens a server takes
_SESSION = re.compile(r"^[0-9a-f]{16}$")


def _sign(secret: str, name: str) -> str:
    return hmac.new(secret.encode(), name.encode(), hashlib.sha256).hexdigest()


def member_token(secret: str, member: str) -> str:
    return f"{member}.{_sign(secret, 'member:' + member)}"


def new_session() -> str:
    """A fresh run (session) id for one `spotbench run`'s functions server."""
    return secrets.token_hex(8)


def scheduler_token(secret: str, session: str, now: float | None = None) -> str:
    """A scheduler token of run `session`, good for `SCHEDULER_TOKEN_S` from `now` (default:
    the clock)."""
    if not _SESSION.match(session):
        raise ValueError(f"scheduler session {session!r} is not 16 hex digits: use new_session()")
    expires = int(now if now is not None else time.time()) + SCHEDULER_TOKEN_S
    return f"{SCHEDULER}.{session}.{expires}.{_sign(secret, f'scheduler:{session}:{expires}')}"


def _scheduler(token: str, secret: str, session: str | None, now: float | None) -> Caller:
    _, run, expires, _mac = token.split(".", 3) if token.count(".") == 3 else ("", "", "", "")
    if not (_SESSION.match(run) and expires.isdigit()) or not hmac.compare_digest(
            token, scheduler_token(secret, run, int(expires) - SCHEDULER_TOKEN_S)):
        raise Unauthorized("invalid bearer token")
    if not session or not hmac.compare_digest(run, session):
        raise Unauthorized("scheduler token of another run of the sweep (that `spotbench run` is "
                           "over): mint one for the run this server serves")
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


def caller_from_headers(headers: Mapping[str, str], secret: str, session: str | None = None,
                        now: float | None = None) -> Caller:
    """Who sent HEADERS: a member, or the scheduler of run `session` (the server's own; a
    server told no run takes no scheduler token)."""
    token = bearer(headers)
    name, _, mac = token.rpartition(".")
    if not name or not mac or not token.isascii():  # compare_digest takes ASCII str only
        raise Unauthorized("malformed bearer token")
    if name.startswith(SCHEDULER + "."):
        return _scheduler(token, secret, session, now)
    if hmac.compare_digest(token, member_token(secret, name)):
        return Caller("member", name)
    raise Unauthorized("invalid bearer token")
