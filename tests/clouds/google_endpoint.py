"""One local Google APIs endpoint that knows who is calling and can enforce IAM.

Real Google APIs identify the caller from its OAuth token. Here every identity gets its own
listener (`url_for("serviceAccount:sb-x-fn@p.iam.gserviceaccount.com")`), all serving the
same fake services, so the code under test is configured exactly as in a deployment (an
endpoint and its ambient credentials) and each request is recorded with the identity that
made it:

    endpoint = GoogleEndpoint(gce=FakeGce(), gcs=FakeGcs(), authorize=policy_check)
    url = endpoint.url_for(FUNCTION_SA)      # SPOTBENCH_GCP_API_ENDPOINT / STORAGE_EMULATOR_HOST
    ... run the function ...
    endpoint.calls                           # [Call(identity, method, path, query)]

Paths are routed by prefix: `/compute/v1/` → FakeGce, `/storage/v1/`, `/upload/storage/`,
`/download/storage/` → FakeGcs, `/v1/projects/…/jobs/` → FakeScheduler, `/v1/services/…/skus`
→ FakeBillingCatalog (the Cloud Billing Catalog). `authorize(call)` returns None to allow or the missing
permission to refuse with GCP's 403 PERMISSION_DENIED body, before the fake acts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.clouds.fake_billing import FakeBillingCatalog
from tests.clouds.fake_gce import FakeGce
from tests.clouds.fake_gcs import FakeGcs


@dataclass(frozen=True)
class Call:
    identity: str
    method: str
    path: str
    query: dict[str, list[str]] = field(hash=False, compare=False, default_factory=dict)
    denied: str | None = field(default=None, hash=False, compare=False)
    body: bytes = field(default=b"", hash=False, compare=False, repr=False)
    bearer: str = field(default="", hash=False, compare=False, repr=False)  # its OAuth token
    content_type: str = field(default="", hash=False, compare=False, repr=False)

    def q(self, key: str, default: str = "") -> str:
        return self.query.get(key, [default])[0]


Authorizer = Callable[[Call], "str | None"]


class GoogleEndpoint:
    def __init__(self, *, gce: FakeGce | None = None, gcs: FakeGcs | None = None,
                 scheduler: FakeScheduler | None = None,
                 billing: FakeBillingCatalog | None = None,
                 authorize: Authorizer | None = None, grants: Any = None) -> None:  # fmt: skip
        self.gce = gce or FakeGce()
        self.gcs = gcs or FakeGcs()
        self.scheduler = scheduler or FakeScheduler()
        self.billing = billing or FakeBillingCatalog()
        self.project = FakeProject()
        self.authorize = authorize
        # the APIs behind a GCP group's grant (tests/fidelity/gcs_grants.GrantApis): IAM
        # Credentials signBlob, STS, Secret Manager, POST policy form uploads
        self.grants = grants
        self.calls: list[Call] = []
        self._servers: dict[str, ThreadingHTTPServer] = {}
        self._lock = threading.Lock()

    def url_for(self, identity: str) -> str:
        """The endpoint URL whose requests are made as `identity` (started on first use)."""
        with self._lock:
            server = self._servers.get(identity)
            if server is None:
                handler = type("Handler", (_Handler,), {"endpoint": self, "identity": identity})
                server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
                server.daemon_threads = True
                threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
                self._servers[identity] = server
        host, port = server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        with self._lock:
            for server in self._servers.values():
                server.shutdown()
                server.server_close()
            self._servers.clear()

    def by(self, identity: str) -> list[Call]:
        return [c for c in self.calls if c.identity == identity]

    def denied(self) -> list[Call]:
        return [c for c in self.calls if c.denied]

    def handle(self, identity: str, method: str, path: str, query: dict[str, list[str]],
               body: bytes, headers: dict[str, str]) -> tuple[int, Any, str]:  # fmt: skip
        lower = {k.lower(): v for k, v in headers.items()}
        bearer = lower.get("authorization", "").removeprefix("Bearer ").strip()
        ctype = lower.get("content-type", "")
        call = Call(identity, method, path, query, body=body, bearer=bearer, content_type=ctype)
        reason = self.authorize(call) if self.authorize else None
        with self._lock:
            self.calls.append(replace(call, denied=reason))
        if reason:
            message = f"Permission '{reason}' denied for {identity} on {path}"
            return 403, {"error": {"code": 403, "message": message, "status": "PERMISSION_DENIED",
                                   "errors": [{"message": message, "reason": "forbidden"}]}}, \
                "application/json"  # fmt: skip
        answer = self.project.handle(method, path, query) if method == "GET" else None
        if answer is not None:
            return (*answer, "application/json")
        if path.startswith("/compute/v1/"):
            sent = json.loads(body) if body and "json" in ctype else None
            status, out = self.gce.handle(method, path, query,
                                          sent if isinstance(sent, dict) else None)
            return status, out, "application/json"
        if path.startswith(("/storage/v1/", "/upload/storage/", "/download/storage/")):
            return self.gcs.handle(method, path, query, body, headers)
        if path.startswith("/v1/projects/") and "/jobs/" in path:
            return (*self.scheduler.handle(method, path), "application/json")
        if self.grants is not None and is_grant_api(method, path):
            status, out = self.grants.handle(method, path, query, lower, body)
            return status, (None if status == 204 else out), "application/json"
        if path.startswith("/v1/services/"):
            return (*self.billing.handle(method, path, query), "application/json")
        return 404, {"error": {"code": 404, "message": f"no fake serves {path}"}}, "application/json"


def is_grant_api(method: str, path: str) -> bool:
    """signBlob, STS token exchange, a secret's version access, a POST policy form upload."""
    return (path.endswith(":signBlob") or path == "/v1/token"
            or (method == "GET" and "/secrets/" in path and path.endswith(":access"))
            or (method == "POST" and path.count("/") == 1 and len(path) > 1))


@dataclass
class FakeScheduler:
    """Cloud Scheduler jobs: get, :pause, :resume, :run (what `spotbench schedule` calls)."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # full name → job
    runs: list[str] = field(default_factory=list)

    def add(self, name: str, schedule: str, time_zone: str = "UTC") -> None:
        self.jobs[name] = {"name": name, "schedule": schedule, "timeZone": time_zone,
                           "state": "ENABLED"}

    def handle(self, method: str, path: str) -> tuple[int, Any]:
        name, _, verb = path.removeprefix("/v1/").partition(":")
        job = self.jobs.get(name)
        if job is None:
            return 404, {"error": {"code": 404, "message": f"no job {name}", "status": "NOT_FOUND"}}
        if method == "POST" and verb in ("pause", "resume"):
            job["state"] = "PAUSED" if verb == "pause" else "ENABLED"
        elif method == "POST" and verb == "run":
            self.runs.append(name)
        elif method != "GET" or verb:
            return 400, {"error": {"code": 400, "message": f"bad call {method} {path}"}}
        return 200, job


class _Handler(BaseHTTPRequestHandler):
    endpoint: GoogleEndpoint
    identity: str
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: see tests/local_http.py (40 ms per answer)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        status, out, ctype, *extra = self.endpoint.handle(
            self.identity, self.command, url.path, parse_qs(url.query), body, dict(self.headers)
        )
        data = out if isinstance(out, bytes) else (b"" if out is None else json.dumps(out).encode())
        self.send_response(status)
        for key, value in (extra[0] if extra else {}).items():  # e.g. a resumable upload's
            if key == "Location":  # session URL, on this identity's listener
                value = f"http://{self.headers['Host']}{value}"
            self.send_header(key, value)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@dataclass
class FakeProject:
    """What preflight asks of a project: the project itself, enabled services (Service
    Usage), machine and accelerator types per zone, and a region's quotas."""

    project: str = "proj"
    exists: bool = True
    enabled: set[str] = field(default_factory=set)
    machine_types: dict[str, dict[str, int]] = field(default_factory=dict)  # zone → {type: cpus}
    accelerators: dict[str, set[str]] = field(default_factory=dict)  # zone → types
    quotas: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # region → metric → (limit, usage)
    # `aggregated/machineTypes` extras: type → {architecture, accelerators} (as GCE answers them)
    machine_details: dict[str, dict[str, Any]] = field(default_factory=dict)
    page_size: int = 2  # machine types per page of `aggregated/machineTypes` (pages tested)
    # project-level quotas (`projects.get`'s `quotas`: GPUS_ALL_REGIONS, CPUS_ALL_REGIONS, …)
    project_quotas: dict[str, tuple[float, float]] = field(default_factory=dict)
    service_accounts: list[dict[str, str]] = field(default_factory=list)  # IAM: {email, displayName}
    roles: list[dict[str, str]] = field(default_factory=list)  # IAM custom roles: {name}
    # region → subnetworks ({name, network (URL), ipCidrRange}): `aggregated/subnetworks`
    subnetworks: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def _machine_page(self, query: dict[str, list[str]] | None) -> dict[str, Any]:
        """One page of `aggregated/machineTypes` (`pageToken` = `page-<n>`)."""
        pages = _machine_types_pages(self)
        token = ((query or {}).get("pageToken") or [""])[0]
        n = int(token.removeprefix("page-")) if token else 0
        return {**pages[n], **({"nextPageToken": f"page-{n + 1}"} if n + 1 < len(pages) else {})}

    def handle(self, method: str, path: str,
               query: dict[str, list[str]] | None = None) -> tuple[int, Any] | None:
        p = f"/compute/v1/projects/{self.project}"
        if path == p:
            return (200, {"name": self.project, "quotas": [
                {"metric": m, "limit": lim, "usage": use}
                for m, (lim, use) in sorted(self.project_quotas.items())]}) if self.exists else (404, _not_found(path))
        if path == f"/v1/projects/{self.project}/services":
            return 200, {"services": [{"name": f"projects/1/services/{s}", "config": {"name": s},
                                       "state": "ENABLED"} for s in sorted(self.enabled)]}
        for listing, key, items in (("serviceAccounts", "accounts", self.service_accounts),
                                    ("roles", "roles", self.roles)):
            if path == f"/v1/projects/{self.project}/{listing}":  # one page: what tests hold
                return 200, {key: list(items)}
        if path == p + "/aggregated/machineTypes":
            return 200, self._machine_page(query)
        if path == p + "/aggregated/subnetworks":  # one page: what tests hold
            return 200, {"items": {f"regions/{r}": {"subnetworks": list(subs)}
                                   for r, subs in self.subnetworks.items()}}
        parts = path.removeprefix(p + "/").split("/")
        if path.startswith(p + "/zones/") and len(parts) == 4 and parts[2] == "machineTypes":
            cpus = self.machine_types.get(parts[1], {}).get(parts[3])
            return (200, {"name": parts[3], "guestCpus": cpus}) if cpus else (404, _not_found(path))
        if path.startswith(p + "/zones/") and len(parts) == 4 and parts[2] == "acceleratorTypes":
            ok = parts[3] in self.accelerators.get(parts[1], set())
            return (200, {"name": parts[3]}) if ok else (404, _not_found(path))
        if path.startswith(p + "/regions/") and len(parts) == 2:
            quotas = self.quotas.get(parts[1])
            if quotas is None:
                return 404, _not_found(path)
            return 200, {"name": parts[1], "quotas": [
                {"metric": m, "limit": lim, "usage": use} for m, (lim, use) in sorted(quotas.items())]}
        return None


def _machine_types_pages(project: FakeProject) -> list[dict[str, Any]]:
    rows = [(zone, name, cpus) for zone, types in sorted(project.machine_types.items())
            for name, cpus in sorted(types.items())]
    pages = []
    for start in range(0, len(rows), project.page_size):
        items: dict[str, Any] = {}
        for zone, name, cpus in rows[start:start + project.page_size]:
            items.setdefault(f"zones/{zone}", {"machineTypes": []})["machineTypes"].append(
                {"name": name, "guestCpus": cpus, "zone": zone, **project.machine_details.get(name, {})})
        pages.append({"items": items})
    return pages or [{"items": {}}]


def _not_found(path: str) -> dict[str, Any]:
    return {"error": {"code": 404, "message": f"The resource '{path}' was not found"}}
