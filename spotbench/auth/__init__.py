"""Who is calling a function: the scheduler or one member VM of a sweep.

Each cloud proves identity its own way (local: per-member HMAC bearer tokens; GCP:
Google-signed OIDC/ID tokens; AWS: the function URL's IAM caller) and ends in a `Caller`.
Control logic (`spotbench.control`) only ever sees a `Caller`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


class Unauthorized(Exception):
    """No or invalid credentials (HTTP 401)."""


class Forbidden(Exception):
    """Valid credentials, but not allowed to do this (HTTP 403)."""


@dataclass(frozen=True)
class Caller:
    kind: Literal["scheduler", "member", "operator"]
    name: str  # member: the instance name; scheduler/operator: the account name
    # What a member's credential proves beyond its name (GCP ID tokens: zone, id; a
    # per-group identity: its group); `control.done` checks them against the sweep's own
    # instance of that name.
    zone: str | None = None
    instance_id: str | None = None
    group: str | None = None
    account: str | None = None  # the project/account the cloud says the instance is in


class Unavailable(RuntimeError):
    """Identity cannot be checked right now, e.g. signing keys unreachable (HTTP 503: retry)."""
