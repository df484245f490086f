"""GCP ID-token checks: tokens signed here by a test key, certificates served locally."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import google.auth.transport.requests
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from spotbench.auth import Caller, Forbidden, Unauthorized
from spotbench.clouds.gcp.identity import (
    CachingRequest,
    VerifierUnavailable,
    VmClaims,
    bearer_token,
    caller_from_headers,
    identify,
    identity_from_claims,
)
from spotbench.clouds.gcp.identity import vm_claims as parse_vm_claims

pytestmark = pytest.mark.timeout(60)

AUD = "https://europe-west4-proj.cloudfunctions.net/done"
PROJECT = "proj"
SCHEDULER = "spotbench-scheduler@proj.iam.gserviceaccount.com"
VM_SA = "spotbench-vm@proj.iam.gserviceaccount.com"
KID = "test-key-1"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _cert_pem(key: rsa.RSAPrivateKey) -> str:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test.googleusercontent.com")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


KEY = _key()
OTHER_KEY = _key()


class CertServer:
    """Google's v1 certs endpoint, locally: {kid: x509 PEM}, counting fetches."""

    def __init__(self, certs: dict[str, str]) -> None:
        self.certs, self.hits, self.status = certs, 0, 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                outer.hits += 1
                data = json.dumps(outer.certs).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "public, max-age=19000, must-revalidate")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/oauth2/v1/certs"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def certs() -> Iterator[CertServer]:
    server = CertServer({KID: _cert_pem(KEY), "unused-key": _cert_pem(OTHER_KEY)})
    yield server
    server.close()


def token(claims: dict[str, Any], key: rsa.RSAPrivateKey = KEY, kid: str = KID) -> str:
    now = int(time.time())
    body = {"iss": "https://accounts.google.com", "aud": AUD, "iat": now, "exp": now + 3600,
            "sub": "1234567890", **claims}  # fmt: skip
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


def scheduler_claims() -> dict[str, Any]:
    return {"email": SCHEDULER, "email_verified": True, "azp": "1234567890"}


def vm_claims(project: str = PROJECT) -> dict[str, Any]:
    return {
        "email": VM_SA,
        "email_verified": True,
        "google": {
            "compute_engine": {
                "instance_creation_timestamp": 1700000000,
                "instance_id": "4242424242",
                "instance_name": "s1-g1-launcher-0",
                "project_id": project,
                "project_number": 99,
                "zone": "europe-west4-a",
            }
        },
    }


def check(tok: str | None, certs: CertServer, **kw: Any) -> Caller:
    headers = {} if tok is None else {"Authorization": f"Bearer {tok}"}
    opts = {
        "audience": AUD,
        "scheduler_accounts": [SCHEDULER],
        "project": PROJECT,
        "request": google.auth.transport.requests.Request(),
        "certs_url": certs.url,
    }
    return caller_from_headers(headers, **{**opts, **kw})


def test_valid_scheduler_token(certs):
    assert check(token(scheduler_claims()), certs) == Caller("scheduler", SCHEDULER)


def test_valid_scheduler_token_with_env_style_account_list(certs):
    accounts = f"other@proj.iam.gserviceaccount.com,{SCHEDULER},".split(",")
    caller = check(token({**scheduler_claims(), "iss": "accounts.google.com"}), certs,
                   scheduler_accounts=accounts)  # fmt: skip
    assert caller == Caller("scheduler", SCHEDULER)


def test_valid_vm_token_is_a_member_with_its_zone(certs):
    vm = Caller("member", "s1-g1-launcher-0", zone="europe-west4-a", instance_id="4242424242",
                account=PROJECT)  # the project Google signed: the instance rule's account
    assert check(token(vm_claims()), certs) == vm
    ident = identify(
        {"authorization": f"Bearer {token(vm_claims())}"},  # lower-case header name
        audience=[AUD, AUD + "/"], scheduler_accounts=[SCHEDULER], project=PROJECT,
        request=google.auth.transport.requests.Request(), certs_url=certs.url,
    )  # fmt: skip
    assert ident.caller == vm
    assert (ident.zone, ident.project) == ("europe-west4-a", PROJECT)
    assert ident.instance_id == "4242424242"
    assert ident.email == VM_SA


@pytest.mark.parametrize(
    ("tok", "why"),
    [
        (lambda: token({**scheduler_claims(), "aud": "https://evil.example/start"}), "udience"),
        (lambda: token({**scheduler_claims(), "iat": int(time.time()) - 7200,
                        "exp": int(time.time()) - 3600}), "xpired"),  # fmt: skip
        (lambda: token(scheduler_claims(), key=OTHER_KEY), "signature"),  # forged, same kid
        (lambda: token(scheduler_claims(), kid="no-such-key"), "unknown signing key"),
        (lambda: token({**scheduler_claims(), "iss": "https://evil.example"}), "issuer"),
        (lambda: jwt.encode({**scheduler_claims(), "aud": AUD, "exp": int(time.time()) + 60,
                             "iat": int(time.time()), "iss": "accounts.google.com"},
                            None, algorithm="none"), "invalid ID token"),  # fmt: skip
        (lambda: "not-a-jwt", "invalid ID token"),
    ],
    ids=["wrong-audience", "expired", "forged", "unknown-kid", "wrong-issuer", "alg-none",
         "garbage"],  # fmt: skip
)
def test_invalid_tokens_are_unauthorized(certs, tok, why):
    with pytest.raises(Unauthorized, match=why):
        check(tok(), certs)


def test_vm_token_with_wrong_audience_is_unauthorized(certs):
    with pytest.raises(Unauthorized):
        check(token({**vm_claims(), "aud": "https://europe-west4-proj.cloudfunctions.net/start"}),
              certs)  # fmt: skip


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
    ],
)
def test_missing_or_malformed_header_is_unauthorized(certs, headers):
    with pytest.raises(Unauthorized, match="Authorization"):
        caller_from_headers(headers, audience=AUD, scheduler_accounts=[SCHEDULER],
                            project=PROJECT, certs_url=certs.url)  # fmt: skip


def test_foreign_project_vm_is_forbidden(certs):
    with pytest.raises(Forbidden, match="other-proj"):
        check(token(vm_claims(project="other-proj")), certs)


def test_unknown_account_is_forbidden(certs):
    claims = {"email": "someone@example.com", "email_verified": True}
    with pytest.raises(Forbidden, match="someone@example.com"):
        check(token(claims), certs)


def test_vm_token_without_format_full_is_forbidden(certs):
    # format=standard: a VM's token has only its service account email
    with pytest.raises(Forbidden, match="format=full"):
        check(token({"email": VM_SA, "email_verified": True}), certs)


def test_unverified_scheduler_email_is_forbidden(certs):
    with pytest.raises(Forbidden, match="not verified"):
        check(token({**scheduler_claims(), "email_verified": False}), certs)


def test_vm_is_never_the_scheduler_and_member_accounts_are_enforced(certs):
    as_scheduler = {**vm_claims(), "email": SCHEDULER}
    assert check(token(as_scheduler), certs).kind == "member"
    with pytest.raises(Forbidden, match="runs as"):
        identify({"Authorization": f"Bearer {token(vm_claims())}"}, audience=AUD,
                 scheduler_accounts=[SCHEDULER], project=PROJECT, certs_url=certs.url,
                 request=google.auth.transport.requests.Request(),
                 member_accounts=["other@proj.iam.gserviceaccount.com"])  # fmt: skip


def test_missing_configuration_is_a_clear_error(certs):
    with pytest.raises(ValueError, match="SPOTBENCH_AUDIENCE"):
        check(token(scheduler_claims()), certs, audience="")


def test_certificates_are_cached_and_outages_are_not_401(certs):
    cached = CachingRequest()
    before = certs.hits
    for _ in range(3):
        assert check(token(vm_claims()), certs, request=cached).kind == "member"
    assert certs.hits == before + 1
    certs.status = 500
    try:
        with pytest.raises(VerifierUnavailable, match="certificates"):
            check(token(vm_claims()), certs)
    finally:
        certs.status = 200


def test_bearer_token_parsing():
    assert bearer_token({"AUTHORIZATION": "bearer abc.def.ghi"}) == "abc.def.ghi"


# ---- behind Cloud Run's front end: the signature is gone, the claims are still checked ----
def stripped(claims: dict[str, Any]) -> str:
    """A token as Cloud Run's front end forwards it, once it has checked it."""
    head, payload, _ = token(claims).split(".")
    return f"{head}.{payload}.SIGNATURE_REMOVED_BY_GOOGLE"


def behind_front(tok: str, front: str | None = "cloud-run", **headers: str) -> Caller:
    return identify({"Authorization": f"Bearer {tok}", **headers}, audience=AUD,
                    scheduler_accounts=[SCHEDULER], project=PROJECT, front=front,
                    certs_url="http://127.0.0.1:9/unreachable").caller  # fmt: skip


def test_a_function_behind_the_front_takes_the_claims_it_checked():
    assert behind_front(stripped(scheduler_claims())) == Caller("scheduler", SCHEDULER)
    assert behind_front(stripped(vm_claims())).kind == "member"
    with pytest.raises(Forbidden, match="other-proj"):  # the identity checks all still apply
        behind_front(stripped(vm_claims(project="other-proj")))


@pytest.mark.security
def test_a_stripped_token_is_refused_unless_the_deployment_says_it_runs_behind_the_front():
    with pytest.raises(Unauthorized, match="SPOTBENCH_GCP_FRONT"):
        behind_front(stripped(scheduler_claims()), front=None)


@pytest.mark.security
@pytest.mark.parametrize(("claims", "why"), [
    ({"aud": "https://europe-west4-proj.cloudfunctions.net/start"}, "wrong audience"),
    ({"iat": 1, "exp": 2}, "expired"),
    ({"iat": int(time.time()) + 3600}, "not valid yet"),
    ({"iss": "https://evil.example"}, "issuer"),
    ({"exp": "tomorrow"}, "malformed"),
], ids=["audience", "expired", "future", "issuer", "malformed"])
def test_a_stripped_token_is_still_checked_for_what_google_signed(claims, why):
    with pytest.raises(Unauthorized, match=why):
        behind_front(stripped({**scheduler_claims(), **claims}))


@pytest.mark.security
def test_garbage_behind_the_front_is_unauthorized_and_not_echoed():
    with pytest.raises(Unauthorized) as err:
        behind_front("s3cr3t.s3cr3t.SIGNATURE_REMOVED_BY_GOOGLE")
    assert "s3cr3t" not in str(err.value)


@pytest.mark.security
def test_the_token_cloud_run_checked_is_x_serverless_authorization_when_sent():
    """Cloud Run checks only X-Serverless-Authorization when a request has it and forwards
    Authorization untouched: claims there are nobody's word."""
    forged = stripped({**vm_claims(), "email": "victim@proj.iam.gserviceaccount.com"})
    checked = f"Bearer {stripped(scheduler_claims())}"
    caller = behind_front(forged, **{"X-Serverless-Authorization": checked})
    assert caller == Caller("scheduler", SCHEDULER)


def test_vm_claims_are_parsed_whole_for_control():
    """What a VM's token says about the VM (one identity per sweep, issue #29, maps the
    instance to its group from these)."""
    assert parse_vm_claims(vm_claims_dict := vm_claims_of()) == VmClaims(
        "4242424242", "s1-g1-launcher-0", "europe-west4-a", PROJECT, created=1700000000)
    assert parse_vm_claims(scheduler_claims()) is None
    ident = identity_from_claims(vm_claims_dict, scheduler_accounts=[], project=PROJECT)
    assert ident.vm == parse_vm_claims(vm_claims_dict)
    broken = vm_claims_of()
    del broken["google"]["compute_engine"]["instance_id"]
    with pytest.raises(Forbidden, match="instance_id; request format=full"):
        parse_vm_claims(broken)


def vm_claims_of() -> dict[str, Any]:
    return json.loads(json.dumps(vm_claims()))  # a deep copy
