"""Every GCP call a deployment makes, checked against the IAM policy `infra/` declares.

Two sweeps (`alpha`, and `beta` named `alpha-gpu`: the other sweep's name starts with
alpha's, the case prefix-matched IAM conditions get wrong) are declared with the Pulumi
program under mocks, in one project. One local Google endpoint (compute, storage, scheduler) serves them, knows which
identity is calling (one listener per identity) and refuses — with GCP's 403 — every call
the declared roles, bindings and IAM conditions do not allow (tests/fidelity/gcp_iam.py).
The real code then runs as each identity, configured from the declared resources:

- function SA: the `start`, `done` and `stop` functions (FunctionConfig from the declared
  function environment) → compute + storage;
- member SA (one per run group): a member's workload (`WorkloadRun` from its cloud-init
  context) → storage;
- scheduler SA and VM SA invoking the functions → `run.routes.invoke` on the Cloud Run
  service behind each function URL;
- operator (`gcp.operators`): `spotbench status`, `report`, `schedule`, `ssh --via iap`.

Least privilege: dropping any permission from a declared custom role denies a recorded
call; alpha's identities are refused on beta's instances and objects, and one group's
account on the other group's objects.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import gcsfs
import pulumi
import pytest
import requests
import yaml
from google.auth.credentials import AnonymousCredentials

from functions.app import FunctionConfig, handle
from spotbench.auth import Caller
from spotbench.clouds.gcp.gce import GcpCloud
from spotbench.member import MemberContext
from spotbench.ops.context import results_for
from spotbench.clouds.gcp.scheduler import GcpSchedule
from spotbench.ops.status import sweep_status
from spotbench.plan import sweep_labels
from infra.preview import install, run_declarations
from spotbench.preview import Declared
from spotbench.results import ResultStore
from spotbench.spec import SweepSpec, load_spec
from tests.clouds.google_endpoint import Call, GoogleEndpoint
from tests.fidelity.gcp_grant_front import GrantFront
from tests.fidelity.gcp_iam import (
    PREDEFINED_ROLES, STS_TOKEN, DeclaredPolicy, Need, UnknownMethod, boundary_allows,
    declared_secrets, permissions_for, sa, signer_of,
)
from tests.fidelity.gcs_grants import GrantApis
from tests.infra.conftest import MOCKS
from workloads.common import WorkloadRun

pytestmark = pytest.mark.fidelity

PROJECT, REGION, ZONE = "proj-1", "us-central1", "us-central1-a"
BETA = "alpha-gpu"  # the other sweep: alpha's name is a prefix of it
OPERATOR = "user:ops@example.com"
INSTANCE = "gcp:compute/instance:Instance"
FUNCTION = "gcp:cloudfunctionsv2/function:Function"
IAP_RANGE = "35.235.240.0/20"


def _spec(name: str, cidr: str = "10.42.0.0/24") -> dict[str, Any]:
    return {"name": name, "cloud": "gcp", "zone": ZONE,
            "gcp": {"project": PROJECT, "operators": [OPERATOR], "network_cidr": cidr},
            "workload": {"name": "osu", "benchmarks": ["latency"]},
            "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 2, "concurrency": 1,
            "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}  # fmt: skip


@dataclass
class Deployment:
    spec: SweepSpec
    declared: list[Declared]
    front: str | None = None  # a local stand-in for the functions' base URL (GrantFront)

    def of_type(self, typ: str) -> list[Declared]:
        return [d for d in self.declared if d.type == typ]

    @property
    def function_sa(self) -> str:
        fn = self.of_type(FUNCTION)[0]
        return sa(fn.inputs["serviceConfig"]["serviceAccountEmail"])

    def function_env(self, entry: str) -> dict[str, str]:
        fn = next(f for f in self.of_type(FUNCTION) if f.inputs["buildConfig"]["entryPoint"] == entry)
        return dict(fn.inputs["serviceConfig"]["environmentVariables"])

    @property
    def instances(self) -> list[dict[str, Any]]:
        return [d.inputs for d in self.of_type(INSTANCE)]

    def vm_sa(self, name: str) -> str:
        inst = next(i for i in self.instances if i["name"] == name)
        return sa(inst["serviceAccount"]["email"])

    def context(self, name: str) -> MemberContext:
        inst = next(i for i in self.instances if i["name"] == name)
        doc = yaml.safe_load(inst["metadata"]["user-data"])
        env_text = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/env"))
        env = dict(line.split("=", 1) for line in env_text.splitlines())
        ctx = MemberContext.from_env(env)
        if self.front and ctx.done_url:  # the member reaches its functions through the front
            ctx = ctx.model_copy(update={"done_url": f"{self.front}/{ctx.done_url.rsplit('/', 1)[1]}"})
        return ctx

    def tunnel(self, name: str, port: int = 22) -> Need:
        """What IAP checks when an operator tunnels to member `name` (`gcloud compute
        start-iap-tunnel`): the tunnel instance (named by the instance's id) and the
        destination, the member's address in the sweep's subnet (GCE assigns it there:
        `index`th of the declared instances here) and the port."""
        names = [i["name"] for i in self.instances]
        base = self.spec.gcp.network_cidr.rsplit(".", 1)[0]
        return Need("iap.tunnelInstances.accessViaIAP",
                    f"projects/{PROJECT}/iap_tunnel/zones/{ZONE}/instances/{zlib.crc32(name.encode())}",
                    "iap.googleapis.com/TunnelInstance",
                    destination={"ip": f"{base}.{10 + names.index(name)}", "port": port})

    def deployed_context(self, name: str) -> MemberContext:
        return replace(self, front=None).context(name)

    @property
    def bucket(self) -> str:
        return self.of_type("gcp:storage/bucket:Bucket")[0].inputs["name"]

    @property
    def jobs(self) -> list[dict[str, Any]]:
        return [d.inputs for d in self.of_type("gcp:cloudscheduler/job:Job")]


def deploy(spec_dict: dict[str, Any]) -> Deployment:
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec(spec_dict)
    install(MOCKS, stack="test")
    MOCKS.reset()
    pulumi.runtime.set_all_config({"gcp:project": PROJECT, "gcp:region": REGION})
    try:
        run_declarations(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))
    finally:
        pulumi.runtime.set_all_config({})
    return Deployment(spec, list(MOCKS.declared))


@dataclass
class Enforcer:
    """The endpoint's authorizer: the needs of every call, checked against `policy`."""

    policy: DeclaredPolicy
    endpoint: GoogleEndpoint | None = None
    needs: list[tuple[Call, list[Need]]] = field(default_factory=list)

    def __call__(self, call: Call) -> str | None:
        assert self.endpoint is not None
        gce, gcs = self.endpoint.gce, self.endpoint.gcs
        if call.path == STS_TOKEN:  # no IAM permission: the subject token is the credential
            return None
        try:
            needs = permissions_for(
                call,
                object_exists=lambda b, n: n in gcs.buckets.get(b, {}),
                instance_account=lambda p, z, i: (gce.instances.get((z, i)) or {}).get("service_account"),
            )
        except UnknownMethod as exc:
            return f"UNKNOWN METHOD ({exc})"
        self.needs.append((call, needs))
        principal, boundary = self.principal(call)
        if boundary == "expired":
            return "the downscoped token has expired"
        try:
            missing = [n.permission for n in needs if not self.policy.allows(principal, n)
                       or (boundary is not None and not boundary_allows(self.policy, boundary, n))]
        except AssertionError as exc:  # e.g. a role missing from the documented table
            return f"UNKNOWN ROLE ({exc})"
        return ", ".join(missing) or None

    def principal(self, call: Call) -> tuple[str, Any]:
        """Whom IAM checks a call as, and the Credential Access Boundary that limits it:
        a downscoped token acts as its source account within its boundary; a POST policy
        upload as the account that signed the policy; anything else as its caller."""
        grants = self.endpoint.grants if self.endpoint else None
        if grants is not None and call.bearer in grants._downscoped:
            boundary, expires = grants._downscoped[call.bearer]
            return sa(grants.function_account), ("expired" if grants.now() >= expires else boundary)
        return signer_of(call) or call.identity, None


def grant_apis(dep: Deployment, endpoint: GoogleEndpoint) -> GrantApis:
    """The APIs behind `dep`'s grant (signBlob, STS, its secret, POST policy uploads) on the
    endpoint, storing into the endpoint's buckets; IAM is the enforcer's (declared roles)."""
    secrets = {k: v.encode() for k, v in declared_secrets(dep.declared, PROJECT).items()}
    apis = GrantApis(dep.function_sa.removeprefix("serviceAccount:"), "function-token",
                     secrets=secrets, objects=endpoint.gcs.buckets, prefix="")
    endpoint.grants = apis
    return apis


def grant_front(dep: Deployment, endpoint: GoogleEndpoint, enforcer: Enforcer) -> GrantFront:
    """The member's way to `dep`'s grant function (tests/fidelity/gcp_grant_front.py); its
    invocation is checked against the declared `run.routes.invoke` bindings."""
    apis = endpoint.grants
    deployed = dep.function_env("grant")

    def invoke(member: str, url: str) -> None:
        call = Call(member, "DECLARED", f"invoke {url}")
        needs = [_invoke_need(url)]
        missing = [n.permission for n in needs if not enforcer.policy.allows(member, n)]
        enforcer.needs.append((replace(call, denied=", ".join(missing) or None), needs))
        assert not missing, f"{member} may not invoke {url}"

    def instance_of(name: str) -> dict[str, Any]:
        inst = next(v for (z, n), v in endpoint.gce.instances.items() if n == name)
        zone = next(z for (z, n) in endpoint.gce.instances if n == name)
        return {**inst, "zone": zone}

    name = dep.instances[0]["name"]
    done = dep.deployed_context(name).done_url
    from spotbench.clouds.gcp.member_grant import grant_url_of

    front = GrantFront(env={**deployed, "SPOTBENCH_GCP_GRANT_TOKEN": apis.function_token},
                       function_url=endpoint.url_for(dep.function_sa),
                       deployed_url=grant_url_of(done), project=PROJECT,
                       instance_of=instance_of, check_invoke=invoke)
    dep.front = front.url
    return front


@dataclass
class World:
    alpha: Deployment
    beta: Deployment
    endpoint: GoogleEndpoint
    enforcer: Enforcer
    front: GrantFront | None = None
    lifecycle: list[tuple[Call, list[Need]]] = field(default_factory=list)

    @contextmanager
    def as_vm(self, dep: Deployment, name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
        """As instance `name`: its account at the endpoint, its metadata server's tokens."""
        import spotbench.clouds.gcp as gcp_settings

        with self.as_identity(dep.vm_sa(name), monkeypatch) as url, monkeypatch.context() as m:
            if self.front is not None:
                m.setattr(gcp_settings, "METADATA_IDENTITY", self.front.metadata_for(name))
            yield url

    @contextmanager
    def as_identity(self, identity: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
        url = self.endpoint.url_for(identity)
        gcsfs.GCSFileSystem.clear_instance_cache()
        with monkeypatch.context() as m:
            m.setenv("STORAGE_EMULATOR_HOST", url)
            m.setenv("SPOTBENCH_GCP_API_ENDPOINT", url)
            yield url
        gcsfs.GCSFileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    alpha, beta = deploy(_spec("alpha")), deploy(_spec(BETA, cidr="10.43.0.0/24"))
    policy = DeclaredPolicy.from_declared(alpha.declared + beta.declared, PROJECT)
    enforcer = Enforcer(policy)
    endpoint = GoogleEndpoint(authorize=enforcer)
    enforcer.endpoint = endpoint
    for dep in (alpha, beta):
        endpoint.gcs.add_bucket(dep.bucket)
        for inst in dep.instances:
            endpoint.gce.add(inst["name"], inst["zone"], labels=inst["labels"],
                             service_account=inst["serviceAccount"]["email"])
        for job in dep.jobs:
            endpoint.scheduler.add(f"projects/{PROJECT}/locations/{REGION}/jobs/{job['name']}",
                                   job["schedule"], job["timeZone"])
    endpoint.gce.project = PROJECT
    grant_apis(alpha, endpoint)
    front = grant_front(alpha, endpoint, enforcer)
    yield World(alpha, beta, endpoint, enforcer, front)
    front.close()
    endpoint.stop()


def _invoke_need(url: str) -> Need:
    """Calling a gen2 function URL (cloudfunctions.net, or its service's run.app URL
    `https://NAME-NUMBER.REGION.run.app`) is `run.routes.invoke` on its Cloud Run service."""
    host, _, path = url.removeprefix("https://").partition("/")
    if host.endswith(".run.app"):
        service, region, _ = host.split(".", 2)
        name = service.rsplit("-", 1)[0]
    else:
        name = path
        region = host.split(".", 1)[0].removesuffix(f"-{PROJECT}")
    return Need("run.routes.invoke", f"projects/{PROJECT}/locations/{region}/services/{name}",
                "run.googleapis.com/Service")


def _declared_call(world: World, identity: str, what: str, needs: list[Need]) -> None:
    """A call made outside the local endpoint (gcloud, Cloud Scheduler, a VM's agents):
    checked and recorded like the endpoint's own calls."""
    call = Call(identity, "DECLARED", what)
    missing = [n.permission for n in needs if not world.enforcer.policy.allows(identity, n)]
    world.enforcer.needs.append((replace(call, denied=", ".join(missing) or None), needs))


def _function(world: World, dep: Deployment, entry: str, caller: Caller, body: dict,
              monkeypatch: pytest.MonkeyPatch) -> dict:  # fmt: skip
    with world.as_identity(dep.function_sa, monkeypatch) as url:
        env = {**dep.function_env(entry), "SPOTBENCH_GCP_API_ENDPOINT": url}
        status, out = handle(entry, body, caller, FunctionConfig(env))
    assert status == 200, out
    return out


# ---- the whole lifecycle, every call permitted ------------------------------------------
def test_gcp_lifecycle_calls_are_granted_by_declared_roles(world, monkeypatch):
    alpha, ep = world.alpha, world.endpoint
    first = len(world.enforcer.needs)
    # Cloud Scheduler → start (OIDC token of the job's service account)
    for job in alpha.jobs:
        caller = sa(job["httpTarget"]["oidcToken"]["serviceAccountEmail"])
        _declared_call(world, caller, f"scheduler job {job['name']}",
                       [_invoke_need(job["httpTarget"]["uri"])])
    scheduler = alpha.jobs[0]["httpTarget"]["oidcToken"]["serviceAccountEmail"]
    out = _function(world, alpha, "start", Caller("scheduler", scheduler),
                    {"sweep": "alpha"}, monkeypatch)
    (group,) = out["started"]
    members = [i["name"] for i in alpha.instances if i["labels"]["spotbench-group"] == group]
    assert all(ep.gce.status(ZONE, m) == "RUNNING" for m in members)

    # each member VM: image pull, logs, its workload storing results, then `done`
    for name in members:
        vm = alpha.vm_sa(name)
        ctx = alpha.context(name)
        image = next(line for line in yaml.safe_load(
            next(i for i in alpha.instances if i["name"] == name)["metadata"]["user-data"]
        )["write_files"][-1]["content"].splitlines() if line.startswith("ExecStart="))
        repo_host, project, repo = image.rsplit(" ", 1)[1].split("/")[:3]
        pull = Need("artifactregistry.repositories.downloadArtifacts",
                    f"projects/{project}/locations/{repo_host.split('-docker')[0]}/repositories/{repo}",
                    "artifactregistry.googleapis.com/Repository")
        logs = Need("logging.logEntries.create", f"projects/{PROJECT}", "cloudresourcemanager.googleapis.com/Project")
        _declared_call(world, vm, f"{name}: image pull, logs, done",
                       [pull, logs, _invoke_need(alpha.deployed_context(name).done_url)])
        if ctx.rank != 0:
            continue
        with world.as_vm(alpha, name, monkeypatch):
            run = WorkloadRun(ctx)
            run.record("latency", 1.5, "us", size=8)
            run.raw("osu_latency.txt", "# OSU\n8 1.5\n")
            assert run.finish()
            # its ssh key, as the boot's `fetch-keys` asks `grant` for it (the sweep's secret)
            from spotbench.clouds.gcp import identity_token
            from spotbench.clouds.gcp.member_grant import grant_url_of

            url = grant_url_of(ctx.done_url)
            resp = requests.post(url, json={"file": "id_ed25519"}, timeout=30,
                                 headers={"Authorization": f"Bearer {identity_token(url)}"})
            assert resp.status_code == 200 and resp.json()["data"], resp.text
    out = _function(world, alpha, "done", Caller("member", members[0]), {"group": group},
                    monkeypatch)
    assert all(ep.gce.status(ZONE, m) == "TERMINATED" for m in members)
    _function(world, alpha, "stop", Caller("scheduler", scheduler), {}, monkeypatch)
    # the next day's tick (a new run): the members have run, so the function asks whether
    # GCE preempted them (zone operations) before starting the group; the stop tick ends it
    out = _function(world, alpha, "start", Caller("scheduler", scheduler),
                    {"sweep": "alpha", "tick": "2026-01-06T03:00:00Z"}, monkeypatch)
    assert out["started"] == [group], out
    _function(world, alpha, "stop", Caller("scheduler", scheduler), {}, monkeypatch)

    # the operator: status, report, schedule control, ssh through IAP
    with world.as_identity(OPERATOR, monkeypatch) as url:
        # no --results: the operator's CLI finds the bucket the stack gave the functions
        store = results_for(alpha.spec)
        assert store.url == alpha.function_env("start")["SPOTBENCH_RESULTS_URL"]
        cloud = GcpCloud(PROJECT, zones=[ZONE], api_endpoint=url)
        status = sweep_status(alpha.spec, cloud, store)
        assert not status.notes, status.notes
        assert [r.value for r in store.read()] == [1.5]
        # `spotbench collect` stores what it fetched over ssh beside the group's records
        run_id = store.runs()[-1].run
        attempt = max(1, len(store.group_files(run_id, group)))
        store.write_raw(run_id, group, "collected/osu.log", "fetched over ssh\n", attempt=attempt)
        control = GcpSchedule.for_spec(alpha.spec, api_endpoint=url,
                                       credentials=AnonymousCredentials())
        control.pause()
        control.resume()
        control.run_now()
        assert control.state()[0] is False
    # `gcloud compute start-iap-tunnel NAME PORT` (ops/remote.py --via iap): it looks the
    # instance up, then IAP checks the tunnel permission on it
    for inst in alpha.instances:
        where = f"projects/{PROJECT}/zones/{ZONE}/instances/{inst['name']}"
        _declared_call(world, OPERATOR, f"iap tunnel {inst['name']}", [
            Need("compute.instances.get", where, "compute.googleapis.com/Instance"),
            alpha.tunnel(inst["name"])])

    world.lifecycle = world.enforcer.needs[first:]
    denied = [(c.identity, c.method, c.path, c.denied) for c, _ in world.lifecycle if c.denied]
    assert denied == []
    callers = {c.identity for c, _ in world.lifecycle}
    assert {alpha.function_sa, alpha.vm_sa(members[0]), OPERATOR} <= callers
    # every call the code made is one whose permission the table knows
    assert all(needs for _, needs in world.lifecycle)
    # the member's grant path ran: `grant` signed (its own account), read the sweep's
    # secret, looked the caller's instance up; the member's records went up by POST policy
    used = {(c.identity, n.permission) for c, needs in world.lifecycle for n in needs}
    assert {(alpha.function_sa, p) for p in ("iam.serviceAccounts.signBlob",
            "secretmanager.versions.access", "compute.instances.get")} <= used, used
    assert any(signer_of(c) == alpha.function_sa and c.path == f"/{alpha.bucket}"
               for c, _ in world.lifecycle)


def test_gcp_dropping_any_custom_role_permission_denies_a_recorded_call(world):
    if not world.lifecycle:
        pytest.skip("needs the lifecycle test's recording")
    policy = DeclaredPolicy.from_declared(world.alpha.declared, PROJECT)  # alpha's grants alone
    roles = list(policy.custom_roles)
    assert roles, "alpha declares no custom role"
    for role in roles:
        for permission in sorted(policy.custom_roles[role]):
            weaker = policy.without(role, permission)
            refused = [(c.identity, n.permission) for c, needs in world.lifecycle for n in needs
                       if not weaker.allows(c.identity, n)]
            assert refused, f"{role} grants {permission}, which no recorded call needs"


# ---- attacks: another sweep's instances and objects ------------------------------------
def test_gcp_function_cannot_stop_another_sweeps_instances(world, monkeypatch):
    beta = world.beta
    victim = beta.instances[0]["name"]
    world.endpoint.gce.instances[(ZONE, victim)]["status"] = "RUNNING"
    try:
        with world.as_identity(world.alpha.function_sa, monkeypatch) as url:
            cloud = GcpCloud(PROJECT, zones=[ZONE], api_endpoint=url, retry_attempts=1)
            results = cloud.stop(sweep_labels(BETA))
        assert results, "alpha's function could not even list instances"
        assert world.endpoint.gce.status(ZONE, victim) == "RUNNING"
        assert all("403" in r.detail for r in results if r.name == victim)
    finally:
        world.endpoint.gce.instances[(ZONE, victim)]["status"] = "TERMINATED"


def test_gcp_sweep_is_not_granted_the_instances_of_a_sweep_its_name_prefixes(world, monkeypatch):
    """`alpha`'s function account calls get/start/stop on `alpha-gpu`'s instances by name:
    each call is refused (the instance condition is exact for the sweep), while the same
    calls on alpha's own instance are granted."""
    from google.api_core.exceptions import Forbidden
    from google.cloud import compute_v1

    alpha, beta, ep = world.alpha, world.beta, world.endpoint
    assert beta.spec.name.startswith(alpha.spec.name + "-")
    caller = alpha.function_sa
    first = len(ep.calls)
    with world.as_identity(caller, monkeypatch) as url:
        client = compute_v1.InstancesClient(
            credentials=AnonymousCredentials(), transport="rest",
            client_options={"api_endpoint": url})
        own = alpha.instances[0]["name"]
        assert client.get(project=PROJECT, zone=ZONE, instance=own).name == own
        for inst in beta.instances:
            for verb in ("get", "start", "stop"):
                with pytest.raises(Forbidden):
                    getattr(client, verb)(project=PROJECT, zone=ZONE, instance=inst["name"])
    # (starting also needs actAs on alpha-gpu's VM account, which alpha's function lacks too)
    refused = {(c.path.split("/instances/")[1], c.denied.split(", ")[0])
               for c in ep.calls[first:] if c.denied}
    expected = {(f"{inst['name']}{suffix}", f"compute.instances.{verb}")
                for inst in beta.instances
                for suffix, verb in (("", "get"), ("/start", "start"), ("/stop", "stop"))}
    assert refused == expected
    assert all(ep.gce.status(ZONE, i["name"]) == "TERMINATED" for i in beta.instances)


def test_gcp_vm_cannot_touch_instances_or_other_prefixes(world, monkeypatch):
    alpha, beta = world.alpha, world.beta
    name = alpha.instances[0]["name"]
    vm = alpha.vm_sa(name)
    with world.as_identity(vm, monkeypatch) as url:
        cloud = GcpCloud(PROJECT, zones=[ZONE], api_endpoint=url, retry_attempts=1)
        with pytest.raises(Exception, match="403|Permission"):
            cloud.stop(sweep_labels("alpha"))  # no compute permission at all
        fs = ResultStore(f"gs://{alpha.bucket}/alpha").fs
        # beta's bucket: no binding at all
        with pytest.raises(OSError, match="Forbidden"):
            fs.pipe_file(f"{beta.bucket}/{BETA}/runs/x/evil.1.jsonl", b"{}")
        # its own bucket, outside its sweep's prefix (a sweep sharing the bucket; the
        # functions' source archive under _spotbench/): the IAM condition refuses
        world.endpoint.gcs.buckets[alpha.bucket]["_spotbench/functions-x.zip"] = b"PK"
        with pytest.raises(OSError, match="Forbidden"):
            fs.cat_file(f"{alpha.bucket}/_spotbench/functions-x.zip")
        with pytest.raises(OSError, match="Forbidden"):
            fs.pipe_file(f"{alpha.bucket}/other-sweep/runs/x/evil.1.jsonl", b"{}")
        with pytest.raises(OSError, match="Forbidden"):
            fs.ls(f"{alpha.bucket}/_spotbench", refresh=True)
    assert not any(k.endswith("evil.1.jsonl") for b in world.endpoint.gcs.buckets.values() for k in b)
    denied = {c.denied for c in world.endpoint.denied() if c.identity == vm}
    assert denied and not any(d.startswith("UNKNOWN") for d in denied), denied


def test_gcp_vm_cannot_overwrite_a_stored_result(world, monkeypatch):
    alpha = world.alpha
    name = next(i["name"] for i in alpha.instances)
    ctx = alpha.context(name)
    path = ctx.results_url.removeprefix("gs://") + f"/runs/r0/{ctx.group}.1.jsonl"
    bucket, key = path.split("/", 1)
    world.endpoint.gcs.buckets[bucket][key] = b"original\n"
    with world.as_identity(alpha.vm_sa(name), monkeypatch):
        fs = ResultStore(ctx.results_url).fs
        with pytest.raises(OSError, match="Forbidden"):
            fs.pipe_file(path, b"forged\n")
    assert world.endpoint.gcs.buckets[bucket][key] == b"original\n"


@pytest.mark.security
def test_gcp_member_cannot_write_another_groups_results_or_the_ledger(world, monkeypatch):
    """A VM of group t1 stores records and raw output under group t2's names, under a name
    group t1 is a prefix of (`…-t1` → `…-t10`), inside t2's raw-output folder, and a forged
    run ledger, straight to the bucket with the sweep's member account (issue #29: one per
    sweep): every write is refused. Its own names are written only with the POST policy the
    `grant` function mints for its group (tests/security/test_gcp_grant.py): the account
    itself writes nothing, not even those."""
    alpha, gcs = world.alpha, world.endpoint.gcs
    by_group: dict[str, list[str]] = {}
    for inst in alpha.instances:
        by_group.setdefault(inst["labels"]["spotbench-group"], []).append(inst["name"])
    mine, other = sorted(by_group)
    assert mine.endswith("-t1") and other.endswith("-t2")
    vm = alpha.vm_sa(by_group[mine][0])
    assert vm == alpha.vm_sa(by_group[other][0]), "one member account per sweep"
    runs = alpha.context(by_group[mine][0]).results_url.removeprefix("gs://") + "/runs"
    attacks = [f"{runs}/r9/{other}.1.jsonl", f"{runs}/r9/{other}.1/osu_latency.txt",
               f"{runs}/r9/{mine}0.1.jsonl", f"{runs}/r9/{other}.1/{mine}.1.jsonl",
               f"{runs}/r9/x/{mine}.1.jsonl", f"{runs}/r9/run.json",
               f"{runs}/r9/launches/{other}.1", f"{runs}//{mine}.1.jsonl",
               f"{runs}/r9/starts/{mine}.2.json",  # the start ledger and the market snapshot
               f"{runs.removesuffix('/runs')}/market/20991231T235959Z.json"]
    own = [f"{runs}/r9/{mine}.1.jsonl", f"{runs}/r9/{mine}.1/osu_latency.txt"]
    with world.as_identity(vm, monkeypatch):
        fs = ResultStore(f"gs://{alpha.bucket}/alpha").fs
        for path in attacks + own:
            with pytest.raises(OSError, match="Forbidden"):
                fs.pipe_file(path, b'{"group": "forged"}\n')
    stored = set(gcs.buckets[alpha.bucket])
    assert not {p.split("/", 1)[1] for p in attacks + own} & stored


def test_gcp_deployed_code_never_probes_the_storage_layout(world):
    """gcsfs's experimental layer calls the Storage Control API (outside the endpoint this
    test checks); the functions and VMs run with it off."""
    alpha = world.alpha
    for entry in ("start", "stop", "done"):
        assert alpha.function_env(entry)["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"
    for inst in alpha.instances:
        doc = yaml.safe_load(inst["metadata"]["user-data"])
        env = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/env"))
        assert "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false" in env.splitlines()


def test_gcp_operator_tunnels_only_to_its_sweeps_instances(world):
    """The operator of both sweeps holds one conditioned tunnel grant per sweep (not one per
    VM): each admits its own sweep's addresses (`gcp.network_cidr`) on its ssh ports only."""
    policy = world.enforcer.policy
    alpha, beta = world.alpha, world.beta
    for dep in (alpha, beta):
        for inst in dep.instances:
            granting = policy.granting(OPERATOR, dep.tunnel(inst["name"]))
            assert [b.title for b in granting] == [f"{dep.spec.name} ssh via IAP"], granting
            assert not policy.allows(OPERATOR, dep.tunnel(inst["name"], port=8080))
    elsewhere = replace(alpha.tunnel(alpha.instances[0]["name"]),
                        destination={"ip": "10.99.0.10", "port": 22})  # no sweep's subnet
    assert not policy.allows(OPERATOR, elsewhere)
    assert not policy.allows(alpha.vm_sa(alpha.instances[0]["name"]),
                             alpha.tunnel(alpha.instances[1]["name"]))  # members: no tunnels


def test_gcp_iap_firewall_reaches_the_ssh_port_of_members_only(world):
    alpha = world.alpha
    fws = [d.inputs for d in alpha.of_type("gcp:compute/firewall:Firewall")]
    iap = [f for f in fws if IAP_RANGE in (f.get("sourceRanges") or [])]
    assert len(iap) == 1, fws
    (rule,) = iap
    assert rule["sourceRanges"] == [IAP_RANGE] and rule["direction"] == "INGRESS"
    ports = {p for a in rule["allows"] for p in a["ports"]}
    assert "22" in ports and all(a["protocol"] == "tcp" for a in rule["allows"])
    tags = {t for i in alpha.instances for t in i["tags"]}
    assert rule["targetTags"] and set(rule["targetTags"]) <= tags
    assert not any("0.0.0.0/0" in (f.get("sourceRanges") or []) for f in fws)


# ---- the deployer: preflight with the documented deployer roles ------------------------
def test_gcp_preflight_runs_with_the_documented_deployer_roles(world, monkeypatch):
    """Every call `spotbench preflight` makes is granted by DEPLOYER_ROLES (docs/gcp.md)."""
    from spotbench.clouds.gcp import BOOTSTRAP_APIS, DEPLOYER_ROLES, REQUIRED_APIS
    from spotbench.preflight import preflight
    from tests.fidelity.gcp_iam import Binding

    deployer = "user:deployer@example.com"
    # the documented roles whose relevant permissions the table in gcp_iam.py lists
    grants = [Binding(f"projects/{PROJECT}", role, deployer) for role in DEPLOYER_ROLES
              if role in PREDEFINED_ROLES]
    project = world.endpoint.project
    project.project = PROJECT
    project.enabled = set(BOOTSTRAP_APIS) | set(REQUIRED_APIS)
    project.machine_types = {ZONE: {"n2-standard-2": 2}}
    project.quotas = {REGION: {"CPUS": (24, 0), "PREEMPTIBLE_CPUS": (24, 0)}}
    saved = world.enforcer.policy
    world.enforcer.policy = replace(saved, bindings=saved.bindings + grants)
    first = len(world.enforcer.needs)
    try:
        with world.as_identity(deployer, monkeypatch):
            assert preflight(world.alpha.spec, None, dict(__import__("os").environ)) == []
    finally:
        world.enforcer.policy = saved
    calls = world.enforcer.needs[first:]
    assert len(calls) >= 4 and not [c for c, _ in calls if c.denied]
    # not vacuous: without the deployer roles every one of those calls is refused
    assert all(not saved.allows(c.identity, n) for c, needs in calls for n in needs)


# ---- the deployer: teardown's orphan sweep with the documented deployer roles ----------
def test_gcp_teardown_runs_with_the_documented_deployer_roles(world, monkeypatch):
    """`spotbench teardown` as the deployer: the orphan sweep (aggregated instance and address
    lists, instance and address deletes, zone and region operation waits) is granted by
    DEPLOYER_ROLES, removes only alpha's VMs and addresses, and is refused without them."""
    from spotbench.clouds import get_provider
    from spotbench.clouds.gcp import DEPLOYER_ROLES
    from spotbench.ops.teardown import teardown
    from tests.fidelity.gcp_iam import Binding

    alpha, beta, ep = world.alpha, world.beta, world.endpoint
    deployer = "user:deployer@example.com"
    grants = [Binding(f"projects/{PROJECT}", role, deployer) for role in DEPLOYER_ROLES
              if role in PREDEFINED_ROLES]
    addresses = {dep.spec.name: [d.inputs for d in dep.of_type("gcp:compute/address:Address")]
                 for dep in (alpha, beta)}
    assert addresses[alpha.spec.name], "alpha declares no static address"
    for inputs in addresses[alpha.spec.name] + addresses[beta.spec.name]:
        ep.gce.addresses[(inputs["region"], inputs["name"])] = dict(inputs["labels"])
    saved_instances = dict(ep.gce.instances)
    saved = world.enforcer.policy
    try:
        with world.as_identity(deployer, monkeypatch):
            # unauthorised first: the sweep cannot even list (and says so)
            refused = teardown(alpha.spec.name, get_provider("gcp").orphans(alpha.spec), yes=True,
                               echo=lambda _: None)
            assert refused.failed and "403" in refused.failed[0][1]
            world.enforcer.policy = replace(saved, bindings=saved.bindings + grants)
            start, ep_start = len(world.enforcer.needs), len(ep.calls)
            report = teardown(alpha.spec.name, get_provider("gcp").orphans(alpha.spec), yes=True,
                              echo=lambda _: None)
        assert not report.failed, report.failed
    finally:
        world.enforcer.policy = saved
        left = {n for (_, n) in ep.gce.addresses}
        left_instances = {n for (_, n) in ep.gce.instances}
        ep.gce.addresses.clear()
        ep.gce.instances.update(saved_instances)
    removed = sorted((r.kind, r.id) for r in report.removed)
    assert removed == sorted([("instance", i["name"]) for i in alpha.instances]
                             + [("address", a["name"]) for a in addresses[alpha.spec.name]])
    # alpha-gpu's VMs and addresses are untouched
    assert left_instances == {i["name"] for i in beta.instances}
    assert left == {a["name"] for a in addresses[beta.spec.name]}
    calls = world.enforcer.needs[start:]
    kinds = {n.permission for _, needs in calls for n in needs}
    assert {"compute.instances.list", "compute.addresses.list", "compute.instances.delete",
            "compute.addresses.delete", "compute.zoneOperations.get",
            "compute.regionOperations.get"} <= kinds, kinds
    assert len(ep.calls) - ep_start == len(calls)
    assert not [(c.method, c.path, c.denied) for c in ep.calls[ep_start:] if c.denied]
    # not vacuous: the sweep's own roles (none for this user) refuse every one of those calls
    assert all(not saved.allows(c.identity, n) for c, needs in calls for n in needs)
