"""Cloud Run's front end, in front of the real functions (gen2 functions are Cloud Run services).

What Google does to a request before it reaches a gen2 function's container, as its docs say
(sources: docs/platform.md, "Front ends and auth headers"):

- ingress: the function's declared `ingressSettings`; the front has two listeners, `url`
  (internal: the project's VPC networks, Cloud Scheduler of the same project) and
  `internet_url` (anything else). `ALLOW_INTERNAL_ONLY` answers the internet 404 and
  forwards nothing;
- the token: of `X-Serverless-Authorization` when the request has it, else of
  `Authorization` (only that one is checked; the other is forwarded untouched). It must be a
  Google-signed ID token (here: signed by the test's Google key, certificates served by
  `CertServer`), unexpired, with `aud` = the service's URL. The cloudfunctions.net URL is
  derived from the function the program declares (region, project, name), as Google names it;
  no token, or a bad one → 401;
- `run.routes.invoke` (roles/run.invoker) on the function's Cloud Run service for the token's
  account, from the bindings the program declares (`DeclaredPolicy`, nothing restated
  here) → 403 otherwise;
- then the checked token's signature is replaced by `SIGNATURE_REMOVED_BY_GOOGLE`;
  `X-Google-*` and hop-by-hop request headers are dropped, `X-Forwarded-For`,
  `X-Forwarded-Proto`, `X-Cloud-Trace-Context` and `traceparent` added; a body over 32 MiB
  is refused (413).

Each function runs as its own functions-framework process (`FunctionProcess`: the deployed
entry point, the declared environment plus the test's endpoints), like one Cloud Run service
per function. `CloudScheduler` sends what a declared job sends; `call_done_as` runs the
member's real `done` call (`spotbench.done_client`) with its metadata server's token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import google.auth.exceptions
import google.auth.transport.requests
import pulumi
import requests
import yaml
from google.oauth2 import id_token

from infra.preview import install, run_app_url, run_declarations
from spotbench.localrun.server import FUNCTIONS_SOURCE, FunctionsServer, _die_with_parent
from spotbench.member import MemberContext
from spotbench.preview import Declared
from spotbench.spec import SweepSpec, load_spec
from tests.auth.test_gcp import token as signed_token
from tests.fidelity.gcp_iam import DeclaredPolicy, Need, sa
from tests.infra.conftest import MOCKS

FUNCTION = "gcp:cloudfunctionsv2/function:Function"
INSTANCE = "gcp:compute/instance:Instance"
JOB = "gcp:cloudscheduler/job:Job"
SIGNATURE_REMOVED = "SIGNATURE_REMOVED_BY_GOOGLE"
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # Cloud Run: HTTP/1 request size limit
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authorization", "proxy-authenticate", "te",
              "trailer", "transfer-encoding", "upgrade", "host", "content-length"}  # fmt: skip


# ---- what the program declares ---------------------------------------------------------
@dataclass
class Deployment:
    spec: SweepSpec
    project: str
    declared: list[Declared]

    def of_type(self, typ: str) -> list[Declared]:
        return [d for d in self.declared if d.type == typ]

    def function(self, entry: str) -> dict[str, Any]:
        return next(f.inputs for f in self.of_type(FUNCTION)
                    if f.inputs["buildConfig"]["entryPoint"] == entry)

    def service_url(self, entry: str) -> str:
        """The function's URL as Google names gen2 functions (REGION-PROJECT.cloudfunctions.net)."""
        fn = self.function(entry)
        project = fn.get("project") or self.project
        return f"https://{fn['location']}-{project}.cloudfunctions.net/{fn['name']}"

    def run_app_url(self, entry: str) -> str:
        """The function's Cloud Run service URL (`serviceConfig.uri`, as the mocks answer it)."""
        fn = self.function(entry)
        return run_app_url(fn["name"], fn.get("project") or self.project, fn["location"])

    def entry_at(self, url: str) -> str | None:
        """The entry point answering at `url` (its cloudfunctions.net or run.app URL)."""
        url = url.rstrip("/")
        return next((e for e in (f.inputs["buildConfig"]["entryPoint"]
                                 for f in self.of_type(FUNCTION))
                     if url in (self.service_url(e), self.run_app_url(e))), None)

    def invoke_need(self, entry: str) -> Need:
        fn = self.function(entry)
        return Need("run.routes.invoke", f"projects/{fn.get('project') or self.project}/locations/"
                    f"{fn['location']}/services/{fn['name']}", "run.googleapis.com/Service")

    @property
    def instances(self) -> list[dict[str, Any]]:
        return [d.inputs for d in self.of_type(INSTANCE)]

    def instance(self, name: str) -> dict[str, Any]:
        return next(i for i in self.instances if i["name"] == name)

    def context(self, name: str) -> MemberContext:
        doc = yaml.safe_load(self.instance(name)["metadata"]["user-data"])
        env_text = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/env"))
        return MemberContext.from_env(dict(line.split("=", 1) for line in env_text.splitlines()))

    def job(self, action: str) -> dict[str, Any]:
        return next(j.inputs for j in self.of_type(JOB) if j.inputs["name"].endswith(f"-{action}"))

    @cached_property
    def policy(self) -> DeclaredPolicy:
        return DeclaredPolicy.from_declared(self.declared, self.project)


def deploy_gcp(spec_dict: dict[str, Any], project: str, region: str) -> Deployment:
    """The GCP program for `spec_dict` under the Pulumi mocks."""
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec(spec_dict)
    install(MOCKS, stack="test")
    MOCKS.reset()
    pulumi.runtime.set_all_config({"gcp:project": project, "gcp:region": region})
    try:
        run_declarations(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))
    finally:
        pulumi.runtime.set_all_config({})
    return Deployment(spec, project, list(MOCKS.declared))


# ---- one function = one functions-framework process -------------------------------------
class FunctionProcess(FunctionsServer):
    """The local functions server serving one deployed entry point (`start`, `stop`,
    `done`) instead of the local cloud's `router`."""

    def __init__(self, entry: str, env: dict[str, str], log_path: Path):
        super().__init__(env, log_path)
        self.entry = entry

    def launch(self) -> FunctionProcess:
        fd = self.sock.fileno()  # bound by FunctionsServer: the child serves on it (no port race)
        cmd = [sys.executable, "-m", "spotbench.localrun.http_server", "--target", self.entry,
               "--source", str(FUNCTIONS_SOURCE), "--fd", str(fd)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child's lifetime
        self.proc = subprocess.Popen(cmd, env={**_base_env(), **self.env}, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, pass_fds=(fd,),
                                     preexec_fn=_die_with_parent, start_new_session=True)
        log.close()
        return self


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SPOTBENCH_")}


# ---- the front end -------------------------------------------------------------------------
@dataclass
class Decision:
    status: int  # 0: forwarded
    reason: str = ""


@dataclass
class CloudRunFront:
    deployment: Deployment
    certs_url: str
    backends: dict[str, str]  # entry → backend base URL
    # (entry, account, status, reason) of every request
    log: list[tuple[str, str, int, str]] = field(default_factory=list)
    forwarded: list[dict[str, str]] = field(default_factory=list)  # headers the functions got
    _servers: dict[str, ThreadingHTTPServer] = field(default_factory=dict)  # origin → listener
    _session: requests.Session = field(default_factory=requests.Session)

    @property
    def url(self) -> str:
        """The front as the project's VPC networks and Google services reach it (internal)."""
        return f"http://127.0.0.1:{self._servers['internal'].server_address[1]}"

    @property
    def internet_url(self) -> str:
        return f"http://127.0.0.1:{self._servers['internet'].server_address[1]}"

    def url_for(self, service_url: str, *, internal: bool = True) -> str:
        """Where this front answers for a function URL, either of them (the front's own host;
        `internal=False`: the listener of requests that do not count as internal)."""
        entry = self.deployment.entry_at(service_url)
        if entry is None or entry not in self.backends:
            raise KeyError(f"no function answers at {service_url}")
        base = self.url if internal else self.internet_url
        return f"{base}/{self.deployment.function(entry)['name']}"

    def start(self) -> CloudRunFront:
        outer = self
        for origin in ("internal", "internet"):

            class Handler(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                internal = origin == "internal"
                disable_nagle_algorithm = True  # TCP_NODELAY: see tests/local_http.py

                def do_POST(self) -> None:  # noqa: N802 - stdlib name
                    outer._handle(self, internal=self.internal)

                do_GET = do_POST  # noqa: N815

                def log_message(self, *args: Any) -> None:
                    pass

            server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
            self._servers[origin] = server
        return self

    def stop(self) -> None:
        for server in self._servers.values():
            server.shutdown()
            server.server_close()

    # -- what Google checks -----------------------------------------------------------------
    def _entry(self, path: str) -> str | None:
        name = path.lstrip("/").split("/", 1)[0].split("?", 1)[0]
        return next((e for e in self.backends if self.deployment.function(e)["name"] == name), None)

    def authorize(self, entry: str, headers: Mapping[str, str]) -> tuple[Decision, str, str]:
        """(decision, the checked header's name, the account) for a request to `entry`."""
        lower = {k.lower(): v for k, v in headers.items()}
        name = ("X-Serverless-Authorization" if "x-serverless-authorization" in lower
                else "Authorization")
        value = lower.get(name.lower(), "")
        scheme, _, tok = value.partition(" ")
        if scheme.lower() != "bearer" or not tok.strip():
            return Decision(401, "no bearer token"), name, ""
        try:
            claims = id_token.verify_token(tok.strip(), google.auth.transport.requests.Request(),
                                           audience=self.deployment.service_url(entry),
                                           certs_url=self.certs_url, clock_skew_in_seconds=10)
        except (ValueError, google.auth.exceptions.GoogleAuthError) as exc:
            return Decision(401, f"invalid token: {type(exc).__name__}"), name, ""
        except Exception as exc:  # noqa: BLE001 - pyjwt's own errors (unknown kid, signature)
            return Decision(401, f"invalid token: {type(exc).__name__}"), name, ""
        account = str(claims.get("email") or "")
        need = self.deployment.invoke_need(entry)
        principals = (sa(account), "allAuthenticatedUsers", "allUsers")  # as IAM matches them
        if not any(self.deployment.policy.allows(p, need) for p in principals):
            return Decision(403, f"{account} lacks run.routes.invoke"), name, account
        return Decision(0), name, account

    def _handle(self, req: BaseHTTPRequestHandler, *, internal: bool) -> None:
        entry = self._entry(req.path)
        if entry is None:
            return _answer(req, 404, b"no such service")
        config = self.deployment.function(entry)["serviceConfig"]
        ingress = config.get("ingressSettings", "ALLOW_ALL")
        if not internal and ingress != "ALLOW_ALL":
            self.log.append((entry, "", 404, f"ingress {ingress}"))
            return _answer(req, 404, b"not found")
        length = int(req.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            req.close_connection = True
            return _answer(req, 413, b"request too large")
        body = req.rfile.read(length) if length else b""
        headers = dict(req.headers.items())
        decision, checked, account = self.authorize(entry, headers)
        self.log.append((entry, account, decision.status or 200, decision.reason))
        if decision.status:
            return _answer(req, decision.status, decision.reason.encode())
        out = {k: v for k, v in headers.items()
               if k.lower() not in HOP_BY_HOP and not k.lower().startswith("x-google-")}
        key = next(k for k in out if k.lower() == checked.lower())
        head, payload, _sig = out[key].split(" ", 1)[1].strip().split(".")
        out[key] = f"Bearer {head}.{payload}.{SIGNATURE_REMOVED}"
        trace = secrets.token_hex(16)
        out.update({"X-Forwarded-For": req.client_address[0], "X-Forwarded-Proto": "https",
                    "X-Cloud-Trace-Context": f"{trace}/1;o=1",
                    "traceparent": f"00-{trace}-{secrets.token_hex(8)}-01"})
        self.forwarded.append(out)
        rest = req.path.lstrip("/").split("/", 1)
        target = self.backends[entry] + "/" + (rest[1] if len(rest) > 1 else "")
        resp = self._session.request(req.command, target, headers=out, data=body, timeout=120)
        _answer(req, resp.status_code, resp.content, resp.headers.get("Content-Type", "text/plain"),
                {k: v for k, v in resp.headers.items() if k.lower() == "retry-after"})


def _answer(req: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str = "text/plain",
            extra: Mapping[str, str] | None = None) -> None:  # fmt: skip
    req.send_response(status)
    req.send_header("Content-Type", ctype)
    req.send_header("Content-Length", str(len(body)))
    for k, v in (extra or {}).items():
        req.send_header(k, v)
    req.end_headers()
    req.wfile.write(body)


# ---- Google's callers -----------------------------------------------------------------------
def google_token(claims: dict[str, Any]) -> str:
    """An ID token as Google issues it (signed by the test's Google key)."""
    return signed_token(claims)


def service_account_token(email: str, audience: str) -> str:
    """What Google issues a service account for `audience` (Cloud Scheduler's OIDC token)."""
    unique_id = str(int(hashlib.sha256(email.encode()).hexdigest()[:15], 16))
    return google_token({"aud": audience, "email": email, "email_verified": True,
                         "azp": unique_id, "sub": unique_id})


def vm_identity_token(deployment: Deployment, name: str, instance_id: str, audience: str) -> str:
    """The metadata server's `identity?audience=…&format=full` token for instance `name`."""
    inst = deployment.instance(name)
    return google_token({
        "aud": audience, "email": inst["serviceAccount"]["email"], "email_verified": True,
        "google": {"compute_engine": {
            "instance_creation_timestamp": int(time.time()) - 600, "instance_id": instance_id,
            "instance_name": name, "project_id": deployment.project, "project_number": 4242,
            "zone": inst["zone"]}}})


class CloudScheduler:
    """Fires a declared job as Cloud Scheduler does: its URI, method, body and headers, plus
    `User-Agent: Google-Cloud-Scheduler`, `X-CloudScheduler*` and the OIDC token of its
    service account (audience: the job's, else its URI). Cloud Run ingress counts Cloud
    Scheduler's request internal only when it goes to the service's run.app URL
    (https://cloud.google.com/run/docs/securing/ingress): to any other URL of the function
    it arrives as an outside request."""

    def __init__(self, front: CloudRunFront):
        self.front = front

    def fire(self, action: str, schedule_time: str) -> requests.Response:
        job = self.front.deployment.job(action)
        target = job["httpTarget"]
        oidc = target["oidcToken"]
        headers = {**target.get("headers", {}), "User-Agent": "Google-Cloud-Scheduler",
                   "X-CloudScheduler": "true", "X-CloudScheduler-JobName": job["name"],
                   "X-CloudScheduler-ScheduleTime": schedule_time,
                   "Authorization": "Bearer " + service_account_token(
                       oidc["serviceAccountEmail"], oidc.get("audience") or target["uri"])}
        body = base64.b64decode(target.get("body") or b"")
        entry = self.front.deployment.entry_at(target["uri"])
        internal = entry is not None and (
            target["uri"].rstrip("/") == self.front.deployment.run_app_url(entry))
        return requests.request(target.get("httpMethod", "POST"),
                                self.front.url_for(target["uri"], internal=internal),
                                headers=headers, data=body, timeout=120)


@contextmanager
def vm_network(front: CloudRunFront, monkeypatch: Any, deployment: Deployment, name: str,
               instance_id: str) -> Iterator[None]:  # fmt: skip
    """Inside: member `name`'s `done` call reaches the front (the function URL's host
    resolves to it) with the token its metadata server issues for the audience asked."""
    import spotbench.clouds.gcp as gcp_provider

    real_post = requests.post

    def post(url: str, *args: Any, **kw: Any) -> requests.Response:
        return real_post(front.url_for(url), *args, **kw)

    with monkeypatch.context() as m:
        m.setattr(gcp_provider, "identity_token",
                  lambda audience, timeout=10: vm_identity_token(deployment, name, instance_id,
                                                                 audience))
        m.setattr(requests, "post", post)
        yield


def claims_of(bearer_value: str) -> dict[str, Any]:
    payload = bearer_value.split(" ", 1)[1].split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
