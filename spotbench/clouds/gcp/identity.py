"""GCP callers: Google-signed OIDC/ID tokens, verified with google-auth.

Two kinds of callers reach the functions:

* the Cloud Scheduler jobs, with an OIDC token of the sweep's scheduler service account
  (`email` claim, `email_verified`) → `Caller("scheduler", email)`;
* a member VM calling `done`, with the token its metadata server issues for
  `audience=<function URL>&format=full`; Google adds the VM's identity under
  `google.compute_engine` (instance_name, zone, project_id, …) → `Caller("member", name)`.

Every token is checked for signature (Google's certificates), audience, expiry and issuer —
or, behind Cloud Run's front end (the deployed functions), which checks the signature and
`run.invoker` and then strips the signature, for audience, expiry and issuer only
(`spotbench.clouds.gcp.front`). A missing or invalid token raises `Unauthorized` (401); a
valid token of someone who may not call (another project's VM, an unknown account) raises
`Forbidden` (403). Whether a member VM belongs to the sweep is the control logic's check (it
looks the instance up by labels).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import google.auth.exceptions
import google.auth.transport
import google.auth.transport.requests
from google.oauth2 import id_token

try:  # google-auth verifies JWK-set certificates with pyjwt, which raises its own errors
    from jwt import PyJWTError
except ImportError:  # pragma: no cover - pyjwt absent: only x509 certificate dicts work
    PyJWTError = ValueError  # type: ignore[misc,assignment]

from spotbench.auth import Caller, Forbidden, Unauthorized, Unavailable
from spotbench.clouds.gcp.front import (
    CLOCK_SKEW_S,
    CLOUD_RUN,
    FRONT_ENV,
    GOOGLE_ISSUERS,
    bearer,
    checked_token,
    forwarded_claims,
    signature_removed,
)

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
_MAX_CERTS_AGE_S = 3600.0


class VerifierUnavailable(Unavailable):
    """Google's signing certificates could not be fetched: answer 503 so callers retry."""


@dataclass(frozen=True)
class VmClaims:
    """What Google says about the VM of a `format=full` identity token
    (`google.compute_engine`): which instance, where, in which project. Control matches them
    with the sweep's own instance (`control.done`); they identify the VM, whatever account
    it runs as."""

    instance_id: str
    instance_name: str
    zone: str
    project_id: str
    created: int | None = None  # instance_creation_timestamp (s)


def vm_claims(claims: Mapping[str, Any]) -> VmClaims | None:
    """The VM claims of a token; None for a token without them (not a VM's, or not
    format=full); `Forbidden` when they are incomplete."""
    google = claims.get("google")
    engine = google.get("compute_engine") if isinstance(google, Mapping) else None
    if not engine:
        return None
    if not isinstance(engine, Mapping):
        raise Forbidden("VM identity token with unreadable google.compute_engine claims")
    fields = {k: engine.get(k) for k in ("instance_id", "instance_name", "zone", "project_id")}
    missing = sorted(k for k, v in fields.items() if v in (None, ""))
    if missing:
        raise Forbidden(f"VM identity token lacks {'/'.join(missing)}; request format=full")
    created = engine.get("instance_creation_timestamp")
    return VmClaims(*(str(v) for v in fields.values()),
                    created=created if isinstance(created, int) else None)


@dataclass(frozen=True)
class GcpIdentity:
    """A verified caller plus what its token said about it (zone etc. only for VMs)."""

    caller: Caller
    email: str
    project: str | None = None
    zone: str | None = None
    instance_id: str | None = None
    vm: VmClaims | None = None


def caller_from_headers(
    headers: Mapping[str, str],
    *,
    audience: str | Sequence[str],
    scheduler_accounts: Collection[str],
    project: str,
    request: google.auth.transport.Request | None = None,
    certs_url: str | None = None,
) -> Caller:
    """The verified caller of a request, from its `Authorization: Bearer <ID token>`."""
    return identify(
        headers,
        audience=audience,
        scheduler_accounts=scheduler_accounts,
        project=project,
        request=request,
        certs_url=certs_url,
    ).caller


def identify(
    headers: Mapping[str, str],
    *,
    audience: str | Sequence[str],
    scheduler_accounts: Collection[str],
    project: str,
    request: google.auth.transport.Request | None = None,
    certs_url: str | None = None,
    member_accounts: Collection[str] | Mapping[str, str] | None = None,
    front: str | None = None,
) -> GcpIdentity:
    """Like `caller_from_headers`, also returning the VM's zone/project/instance id.

    `member_accounts`, when given: instance name → the only service account that VM may run
    as (its group's), or a collection of accounts any member VM may run as. `front`: the
    deployment's `SPOTBENCH_GCP_FRONT` — `cloud-run` when the function runs behind Cloud
    Run's front end, the only case a token whose signature Google removed is taken.
    """
    if not audience or not project:
        raise ValueError(
            "GCP token verification needs the expected audience (the function URL, "
            "SPOTBENCH_AUDIENCE) and the project (SPOTBENCH_GCP_PROJECT)"
        )
    token = checked_token(headers)
    if not signature_removed(token):
        claims = verify_claims(token, audience=audience, request=request, certs_url=certs_url)
    elif front == CLOUD_RUN:
        claims = forwarded_claims(token, audience=audience)
    else:
        raise Unauthorized(
            "the ID token's signature was removed (Cloud Run's front end does that once it "
            f"has checked it), but this function is not deployed behind it ({FRONT_ENV})")
    return identity_from_claims(
        claims, scheduler_accounts=scheduler_accounts, project=project,
        member_accounts=member_accounts,
    )  # fmt: skip


def bearer_token(headers: Mapping[str, str]) -> str:
    """The token of an `Authorization: Bearer …` header (header name case-insensitive)."""
    value = headers.get("Authorization") or headers.get("authorization")
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    return bearer(value)


def verify_claims(
    token: str,
    *,
    audience: str | Sequence[str],
    request: google.auth.transport.Request | None = None,
    certs_url: str | None = None,
) -> Mapping[str, Any]:
    """The claims of a Google-signed ID token, checked for signature, audience, expiry and
    issuer; `Unauthorized` otherwise."""
    try:
        claims = id_token.verify_token(
            token,
            request or _default_request(),
            audience=list(audience) if not isinstance(audience, str) else audience,
            certs_url=certs_url or GOOGLE_CERTS_URL,
            clock_skew_in_seconds=CLOCK_SKEW_S,
        )
    except google.auth.exceptions.TransportError as exc:
        raise VerifierUnavailable(f"cannot fetch Google's token certificates: {exc}") from exc
    except (ValueError, google.auth.exceptions.GoogleAuthError, PyJWTError) as exc:
        raise Unauthorized(f"invalid ID token: {_why_invalid(exc)}") from None
    if claims.get("iss") not in GOOGLE_ISSUERS:
        raise Unauthorized(f"ID token issuer {claims.get('iss')!r} is not Google")
    return claims


_WHY = (  # google-auth / pyjwt wording → a short reason that repeats nothing of the token
    (("expired",), "token expired"),
    (("audience",), "wrong audience"),
    (("too early", "not yet valid", "immature"), "token not valid yet"),
    (("key id", "kid"), "signed by an unknown signing key"),
    (("signature",), "signature could not be verified"),
)


def _why_invalid(exc: BaseException) -> str:
    """Why a token was refused, without quoting it: library messages embed the token or its
    claims (`Wrong number of segments in token: b'…'`), and a 401 must not echo credentials."""
    text = str(exc).lower()
    return next((why for needles, why in _WHY if any(n in text for n in needles)),
                "malformed or unverifiable token")


def identity_from_claims(
    claims: Mapping[str, Any],
    *,
    scheduler_accounts: Collection[str],
    project: str,
    member_accounts: Collection[str] | Mapping[str, str] | None = None,
) -> GcpIdentity:
    """Who verified `claims` belong to: a member VM of `project` or a scheduler account.

    `member_accounts`: the accounts member VMs may run as — a mapping instance name → the
    account of its run group (each group has its own), or any of a collection."""
    email = str(claims.get("email") or "")
    vm = vm_claims(claims)
    if vm is not None:  # a VM's identity token (format=full): the VM is the caller, whatever its SA
        name = vm.instance_name
        if vm.project_id != project:
            raise Forbidden(f"instance {name!r} belongs to project {vm.project_id!r}, "
                            f"not {project!r}")
        if isinstance(member_accounts, Mapping):  # instance name → its group's account
            expected = member_accounts.get(name)
            if expected is None:
                raise Forbidden(f"instance {name!r} is not a member of this sweep")
            if email != expected:
                raise Forbidden(f"instance {name!r} runs as {email!r}, not its group's account "
                                f"{expected!r}")
        elif member_accounts is not None and email not in _accounts(member_accounts):
            raise Forbidden(f"instance {name!r} runs as {email!r}, not a sweep VM account")
        return GcpIdentity(
            Caller("member", name, zone=vm.zone, instance_id=vm.instance_id,
                   account=vm.project_id), email,
            project=vm.project_id, zone=vm.zone, instance_id=vm.instance_id, vm=vm,
        )  # fmt: skip
    if email and email in _accounts(scheduler_accounts):
        if claims.get("email_verified") is not True:
            raise Forbidden(f"email {email!r} of the scheduler token is not verified")
        return GcpIdentity(Caller("scheduler", email), email)
    raise Forbidden(
        f"{email or 'this caller'} may not call: not a scheduler account, and not a VM "
        "identity token (VMs must fetch theirs with format=full)"
    )


def _accounts(accounts: Collection[str]) -> set[str]:
    """Configured account emails, tolerating blanks from `"a,b,".split(",")`."""
    return {a.strip() for a in accounts if a and a.strip()}


class CachingRequest:
    """A google-auth transport Request that remembers successful GETs (the certificates)
    for their Cache-Control max-age, at most an hour, so warm functions do not refetch
    Google's certificates on every call."""

    def __init__(
        self,
        inner: google.auth.transport.Request | None = None,
        max_age_s: float = _MAX_CERTS_AGE_S,
    ) -> None:
        self._inner = inner or google.auth.transport.requests.Request()
        self._max_age_s = max_age_s
        self._cache: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, url: str, method: str = "GET", **kwargs: Any) -> Any:
        if method != "GET":
            return self._inner(url, method=method, **kwargs)
        with self._lock:
            hit = self._cache.get(url)
        if hit and hit[0] > time.monotonic():
            return hit[1]
        response = self._inner(url, method=method, **kwargs)
        if response.status == 200:
            ttl = min(_max_age(response.headers), self._max_age_s)
            if ttl > 0:
                with self._lock:
                    self._cache[url] = (time.monotonic() + ttl, response)
        return response


def _max_age(headers: Mapping[str, str]) -> float:
    control = next((v for k, v in headers.items() if k.lower() == "cache-control"), "")
    match = re.search(r"max-age=(\d+)", control)
    return float(match.group(1)) if match else 300.0


_DEFAULT: CachingRequest | None = None


def _default_request() -> CachingRequest:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = CachingRequest()
    return _DEFAULT
