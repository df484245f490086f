"""The GCP Pulumi program under mocks: the resource graph a `pulumi up` would create."""

from __future__ import annotations

import re

import copy
import json
from datetime import timedelta
from pathlib import Path

import pulumi
import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cron import CronShiftError, shift_cron
from spotbench.member import MemberContext
from infra.preview import RecordingMocks, run_app_url
from spotbench.spec import load_spec
from tests.infra.conftest import snapshot

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "gcp:compute/instance:Instance"
ADDRESS = "gcp:compute/address:Address"
FUNCTION = "gcp:cloudfunctionsv2/function:Function"
JOB = "gcp:cloudscheduler/job:Job"
CONFIG = {"gcp:project": "proj-1", "gcp:region": "us-central1"}


def _snapshot(config: dict[str, str], fn) -> RecordingMocks:
    return snapshot(fn, config)


def _program(spec_file: str) -> RecordingMocks:
    import runpy

    from infra.preview import PROGRAM

    config = {**CONFIG, "spotbench:spec": spec_file}
    return _snapshot(config, lambda: runpy.run_path(str(PROGRAM), run_name="__main__"))


def _sweep(spec_dict: dict) -> RecordingMocks:
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec(spec_dict)
    return _snapshot(CONFIG, lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))


def _spec(**over) -> dict:
    base = {"name": "t", "cloud": "gcp", "zone": "us-central1-a",
            "workload": {"name": "tf-mnist", "workers": 2},
            "matrix": {"machine_type": ["n2-standard-2"]},
            "schedule": {"cron": "0 3 * * *"}, "deadline": "20m"}
    return {**base, **over}


@pytest.fixture(scope="module")
def osu() -> RecordingMocks:
    return _program("examples/gcp-osu.yaml")


@pytest.fixture(scope="module")
def gpu() -> RecordingMocks:
    return _program("examples/gcp-gpu.yaml")


def _user_data(inst) -> dict:
    text = inst.inputs["metadata"]["user-data"]
    assert text.startswith("#cloud-config\n")
    return yaml.safe_load(text)


def _file(doc: dict, path: str) -> str:
    return next(f["content"] for f in doc["write_files"] if f["path"] == path)


def _env(doc: dict) -> dict[str, str]:
    lines = _file(doc, "/var/lib/spotbench/env").splitlines()
    return dict(line.split("=", 1) for line in lines)


# ---- VMs --------------------------------------------------------------------------------
def test_one_spot_vm_per_member_labelled_spread(osu):
    spec = load_spec(ROOT / "examples/gcp-osu.yaml")
    planned = {m.name: (g, m) for g in spec.plan() for m in g.members}
    vms = osu.of_type(INSTANCE)
    assert {v.inputs["name"] for v in vms} == set(planned) and len(vms) == 18
    for vm in vms:
        group, member = planned[vm.inputs["name"]]
        s = vm.inputs["scheduling"]
        assert (s["provisioningModel"], s["preemptible"], s["instanceTerminationAction"]) == (
            "SPOT", True, "STOP")
        assert s["maxRunDuration"]["seconds"] == 30 * 60
        assert vm.inputs["labels"] == {"managed-by": "spotbench", "spotbench-sweep": "gcp-osu",
                                       "spotbench-group": group.id, "spotbench-role": member.role}
        assert vm.inputs["machineType"] == group.machine_type
        assert vm.inputs["desiredStatus"] == "TERMINATED"
        assert vm.inputs["bootDisk"]["initializeParams"]["image"] == "cos-cloud/cos-stable"
        assert "guestAccelerators" not in vm.inputs
        assert vm.inputs["resourcePolicies"].endswith(f"{group.id}-spread")
        assert s["availabilityDomain"] == member.rank + 1  # the two members on different domains
    policies = osu.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert len(policies) == 9
    assert all(p.inputs["groupPlacementPolicy"] == {"availabilityDomainCount": 2} for p in policies)


def test_no_external_ip_and_static_internal_address(osu):
    addresses = {a.inputs["name"]: a for a in osu.of_type(ADDRESS)}
    for vm in osu.of_type(INSTANCE):
        (nic,) = vm.inputs["networkInterfaces"]
        assert "accessConfigs" not in nic and "ipv6AccessConfigs" not in nic
        addr = addresses[vm.inputs["name"]]
        assert addr.inputs["addressType"] == "INTERNAL"
        assert nic["networkIp"] == MOCKS_IP(addr.name)


def MOCKS_IP(resource_name: str) -> str:
    from infra.preview import _stable_ip

    return _stable_ip(resource_name)


def test_cloud_init_runs_image_with_member_context(osu):
    addresses = {a.inputs["name"]: MOCKS_IP(a.name) for a in osu.of_type(ADDRESS)}
    for vm in osu.of_type(INSTANCE):
        meta = vm.inputs["metadata"]
        assert "gce-container-declaration" not in meta
        doc = _user_data(vm)
        env = _env(doc)
        ctx = MemberContext.model_validate(json.loads(env["SPOTBENCH_CONTEXT"]))
        assert ctx.name == vm.inputs["name"] and ctx.cloud == "gcp" and ctx.spot
        assert ctx.done_url == "https://us-central1-proj-1.cloudfunctions.net/gcp-osu-done"
        assert ctx.results_url == "gs://spotbench-gcp-osu-proj-1/gcp-osu"
        assert ctx.params["max_size"] == 1 << 20
        assert {(p.name, p.host, p.port) for p in ctx.members} == {
            (p.name, addresses[p.name], 2222) for p in ctx.members}
        assert env["SPOTBENCH_ROLE"] == ctx.role and "MPICH_PORT_RANGE" not in env
        unit = _file(doc, "/etc/systemd/system/spotbench.service")
        start = next(l for l in unit.splitlines() if l.startswith("ExecStart="))
        assert "docker run" in start and "--network host" in start
        assert "--env-file /var/lib/spotbench/env" in start
        assert start.endswith(" us-central1-docker.pkg.dev/proj-1/spotbench-gcp-osu/mpi:latest")
        assert "cos-extensions" not in unit
        # the private keys are fetched from the grant function before the handover (issue
        # #29: it answers the instance with its own group's keys; the public halves are the
        # group's own, derived from the sweep's seed)
        assert "PRIVATE KEY" not in vm.inputs["metadata"]["user-data"]
        fetch = _file(doc, "/var/lib/spotbench/fetch-keys")
        assert "https://us-central1-proj-1.cloudfunctions.net/gcp-osu-grant" in fetch
        assert "format=full" in fetch
        for key in ("id_ed25519", "ssh_host_ed25519_key"):
            assert f"fetch {key} /var/lib/spotbench/ssh/{key}" in fetch.splitlines()
        pre = [l.split("=", 1)[1] for l in unit.splitlines() if l.startswith("ExecStartPre=")]
        assert pre.index("/bin/sh /var/lib/spotbench/fetch-keys") < pre.index(
            "/bin/chown -R 1000:1000 /var/lib/spotbench/ssh")
        assert _file(doc, "/var/lib/spotbench/ssh/ssh_host_ed25519_key.pub").startswith("ssh-")
        assert doc["runcmd"][-1] == "systemctl start --no-block spotbench.service"


def test_gpu_vms_terminate_on_maintenance_and_install_driver_first(gpu):
    vms = gpu.of_type(INSTANCE)
    assert len(vms) == 6  # chief, ps, worker × 2 trials
    for vm in vms:
        assert vm.inputs["guestAccelerators"] == [{"type": "nvidia-tesla-t4", "count": 1}]
        s = vm.inputs["scheduling"]
        assert s["onHostMaintenance"] == "TERMINATE" and s["provisioningModel"] == "SPOT"
        assert s["maxRunDuration"]["seconds"] == 45 * 60
        unit = _file(_user_data(vm), "/etc/systemd/system/spotbench.service")
        lines = unit.splitlines()
        install_at = lines.index("ExecStartPre=/usr/bin/cos-extensions install gpu")
        run_at = next(i for i, l in enumerate(lines) if l.startswith("ExecStart="))
        assert install_at < run_at and "--device /dev/nvidia0" in lines[run_at]
        env = _env(_user_data(vm))
        assert json.loads(env["SPOTBENCH_CONTEXT"])["members"][0]["port"] == 2223
        assert "metadata" not in vm.secrets  # no key material for TF
    assert not gpu.of_type("tls:index/privateKey:PrivateKey")


def test_preemptible_and_standard_provisioning():
    """`preemptible` + max_run_duration/termination action is refused by the Compute API
    (those need the SPOT model): preemptible deploys as SPOT, keeping the deadline."""
    pre = _sweep(_spec(provisioning="preemptible"))
    for vm in pre.of_type(INSTANCE):
        s = vm.inputs["scheduling"]
        assert s["provisioningModel"] == "SPOT" and s["preemptible"] is True
        assert s["maxRunDuration"]["seconds"] == 20 * 60 and s["instanceTerminationAction"] == "STOP"
        assert s["onHostMaintenance"] == "TERMINATE" and s["automaticRestart"] is False
    std = _sweep(_spec(provisioning="standard", name="s"))
    for vm in std.of_type(INSTANCE):
        s = vm.inputs["scheduling"]
        assert s["provisioningModel"] == "STANDARD" and s["preemptible"] is False
        assert s["maxRunDuration"]["seconds"] == 20 * 60 and s["instanceTerminationAction"] == "STOP"


def test_vm_options_ignore_desired_status():
    seen: dict[str, pulumi.ResourceOptions] = {}

    def record(args: pulumi.ResourceTransformationArgs):
        if args.type_ == INSTANCE:
            seen[args.name] = args.opts
        return None

    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec(_spec())

    def prog():
        pulumi.runtime.register_stack_transformation(record)
        GcpSweep(spec.name, GcpSweepArgs(spec=spec))

    _snapshot(CONFIG, prog)
    assert len(seen) == 4
    for opts in seen.values():
        assert "desiredStatus" in (opts.ignore_changes or [])


def test_compact_placement():
    snap = _sweep(_spec(placement="compact"))
    (policy,) = snap.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "vmCount": 4}
    with pytest.raises(Exception, match=r"compact.*not supported for machine type 'n1-standard-4'"):
        _sweep(_spec(placement="compact", matrix={"machine_type": ["n1-standard-4"]}))


# ---- identities, functions, scheduler ---------------------------------------------------
def _untagged(role: str) -> str:
    """A custom role id without its per-stack tag (`spotbench_s_1a2b3c.list` → `spotbench_s.list`)."""
    return re.sub(r"_[0-9a-f]{6}(?=\.|$)", "", role)


def test_custom_roles_are_exactly_start_stop_and_list(osu):
    roles = {_untagged(r.inputs["roleId"]): r.inputs
             for r in osu.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")}
    assert sorted(roles["spotbench_gcp_osu"]["permissions"]) == [
        "compute.instances.get", "compute.instances.start", "compute.instances.stop"]
    assert sorted(roles["spotbench_gcp_osu.list"]["permissions"]) == [
        "compute.instances.list", "compute.zoneOperations.get", "compute.zoneOperations.list"]
    bindings = {_untagged(b.inputs["role"]): b.inputs
                for b in osu.of_type("gcp:projects/iAMMember:IAMMember")}
    scoped = bindings["projects/proj-1/roles/spotbench_gcp_osu"]["condition"]["expression"]
    assert scoped == 'resource.name.startsWith("projects/proj-1/zones/us-central1-a/instances/gcp-osu--")'
    assert "condition" not in bindings["projects/proj-1/roles/spotbench_gcp_osu.list"]
    roles = [d.inputs.get("role", "") for d in osu.declared]
    assert not any("compute.instanceAdmin" in r or r in ("roles/owner", "roles/editor")
                   for r in roles)


def test_custom_role_ids_of_two_sweeps_never_collide():
    """Sweep `a-b`'s `list` role and sweep `a-b-list`'s start/stop role once had the same id
    (`spotbench_a_b_list`): one project, two sweeps, and one `pulumi up` took over (or was
    refused) the other's role. Every declared id is distinct, and valid for GCP."""
    ids: dict[str, str] = {}
    ops = {"gcp": {"operators": ["user:ops@example.com"]}}
    for name in ("a-b", "a-b-list", "a-b-ops", "a-b-list-ops"):
        snap = _sweep(_spec(name=name, **ops))
        for role in snap.of_type("gcp:projects/iAMCustomRole:IAMCustomRole"):
            rid = role.inputs["roleId"]
            assert re.fullmatch(r"[a-zA-Z0-9_.]{3,64}", rid), rid
            assert rid not in ids, f"{name} and {ids.get(rid)} both declare role {rid}"
            ids[rid] = name
    assert len(ids) == 4 * 4  # start/stop, list, sign, ops


def test_functions_not_public_and_invokers_scoped(osu):
    for d in osu.declared:
        assert d.inputs.get("member") not in ("allUsers", "allAuthenticatedUsers")
    fns = {f.inputs["name"]: f for f in osu.of_type(FUNCTION)}
    assert set(fns) == {"gcp-osu-start", "gcp-osu-stop", "gcp-osu-done", "gcp-osu-grant"}
    for name, fn in fns.items():
        sc = fn.inputs["serviceConfig"]
        assert sc["ingressSettings"] == "ALLOW_INTERNAL_ONLY"
        env = sc["environmentVariables"]
        assert env["SPOTBENCH_AUDIENCE"] == f"https://us-central1-proj-1.cloudfunctions.net/{name}"
        assert env["SPOTBENCH_CLOUD"] == "gcp" and env["SPOTBENCH_GCP_PROJECT"] == "proj-1"
        assert json.loads(env["SPOTBENCH_SPEC"])["name"] == "gcp-osu"
        assert env["SPOTBENCH_SCHEDULER_ACCOUNTS"].startswith("sb-gcp-osu-sch@")
        # who may call done/grant: the VMs, all running as the sweep's one member account
        # (issue #29: the function tells the groups apart by instance, not by account)
        vms = {i.inputs["labels"]["spotbench-group"]: i.inputs["serviceAccount"]["email"]
               for i in osu.of_type("gcp:compute/instance:Instance")}
        assert len(vms) > 1 and set(vms.values()) == {env["SPOTBENCH_MEMBER_ACCOUNTS"]}
        assert env["SPOTBENCH_GCP_SIGNER"].startswith("sb-gcp-osu-fn@")
        assert env["SPOTBENCH_GCP_SECRET"] == "projects/proj-1/secrets/gcp-osu-spotbench"
        assert fn.inputs["buildConfig"]["entryPoint"] == name.rsplit("-", 1)[1]
    invokers: dict[str, set[str]] = {}
    for d in osu.of_type("gcp:cloudrunv2/serviceIamMember:ServiceIamMember"):
        invokers.setdefault(d.inputs["name"], set()).add(d.inputs["member"])
    assert invokers["gcp-osu-done"] == {f"serviceAccount:{e}" for e in vms.values()}
    assert invokers["gcp-osu-grant"] == invokers["gcp-osu-done"]
    assert {m.split("@")[0] for m in invokers["gcp-osu-start"]} == {"serviceAccount:sb-gcp-osu-sch"}
    assert {m.split("@")[0] for m in invokers["gcp-osu-stop"]} == {"serviceAccount:sb-gcp-osu-sch"}
    roles = {d.inputs["role"] for d in osu.of_type("gcp:cloudrunv2/serviceIamMember:ServiceIamMember")}
    assert roles == {"roles/run.invoker"}


def test_scheduler_pair_with_oidc(gpu):
    jobs = {j.inputs["name"]: j.inputs for j in gpu.of_type(JOB)}
    start, stop = jobs["gcp-gpu-start"], jobs["gcp-gpu-stop"]
    assert start["schedule"] == "30 5 * * 1-5" and stop["schedule"] == "15 6 * * 1-5"
    for job, fn in ((start, "start"), (stop, "stop")):
        url = f"https://us-central1-proj-1.cloudfunctions.net/gcp-gpu-{fn}"
        target = job["httpTarget"]
        # the service's run.app URL (Cloud Run ingress: internal there only, #37); the token
        # is still for the function's URL, which the function checks
        assert target["uri"] == run_app_url(f"gcp-gpu-{fn}", "proj-1", "us-central1")
        assert target["httpMethod"] == "POST"
        assert target["oidcToken"]["audience"] == url
        assert target["oidcToken"]["serviceAccountEmail"].startswith("sb-gcp-gpu-sch@")
        assert job["timeZone"] == "Europe/Berlin" and job["retryConfig"]["retryCount"] >= 1


# ---- network, bucket --------------------------------------------------------------------
def test_firewall_members_only_no_internet(osu):
    fws = {f.inputs["name"]: f.inputs for f in osu.of_type("gcp:compute/firewall:Firewall")}
    groups = {v.inputs["labels"]["spotbench-group"] for v in osu.of_type(INSTANCE)}
    assert set(fws) == {f"{g}-members" for g in groups} | {"gcp-osu-net-iap-ssh"}
    for g in groups:  # members of a group reach that group only
        fw = fws[f"{g}-members"]
        assert fw["direction"] == "INGRESS" and fw["sourceTags"] == fw["targetTags"] == [g]
        assert "sourceRanges" not in fw
        assert fw["allows"] == [{"protocol": "tcp"}, {"protocol": "udp"}]  # every port
    iap = fws["gcp-osu-net-iap-ssh"]  # Identity-Aware Proxy's TCP forwarding range only
    assert iap["sourceRanges"] == ["35.235.240.0/20"] and iap["targetTags"] == ["gcp-osu-member"]
    assert iap["allows"] == [{"protocol": "tcp", "ports": ["22", "2222"]}]
    assert all(v.inputs["tags"] == ["gcp-osu-member", v.inputs["labels"]["spotbench-group"]]
               for v in osu.of_type(INSTANCE))
    (subnet,) = osu.of_type("gcp:compute/subnetwork:Subnetwork")
    assert subnet.inputs["privateIpGoogleAccess"] is True
    assert len(osu.of_type("gcp:compute/routerNat:RouterNat")) == 1


def test_results_bucket_private_and_labelled(osu):
    (bucket,) = osu.of_type("gcp:storage/bucket:Bucket")
    b = bucket.inputs
    assert b["uniformBucketLevelAccess"] is True and b["publicAccessPrevention"] == "enforced"
    assert b["labels"] == {"managed-by": "spotbench", "spotbench-sweep": "gcp-osu"}


# ---- errors -----------------------------------------------------------------------------
def test_bad_spec_in_stack_config_fails_clearly(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad_Name\ncloud: gcp\nzone: us-central1-a\nworkload: {name: osu}\n")
    with pytest.raises(Exception, match=r"invalid spec[\s\S]*name"):
        _program(str(bad))


def test_missing_schedule_and_unshiftable_cron_fail_clearly():
    with pytest.raises(Exception, match="no schedule"):
        _sweep(_spec(schedule=None))
    with pytest.raises(Exception, match="gap between starts"):
        _sweep(_spec(schedule={"cron": "0 * * * *"}, deadline="2h"))


@pytest.mark.parametrize("cron,delta,want", [
    ("0 3 * * *", timedelta(minutes=30), "30 3 * * *"),
    ("50 23 * * *", timedelta(minutes=20), "10 0 * * *"),
    ("30 22 * * 1-5", timedelta(hours=2), "30 0 * * 2,3,4,5,6"),
    ("15 * * * *", timedelta(seconds=61), "17 * * * *"),
])
def test_shift_cron(cron, delta, want):
    assert shift_cron(cron, delta) == want


def test_shift_cron_refuses_inexpressible():
    with pytest.raises(CronShiftError, match="crosses midnight"):
        shift_cron("0 23 1 * *", timedelta(hours=2))


# ---- offline preview CLI ----------------------------------------------------------------
def test_preview_cli_json_lists_vms():
    from spotbench.cli import app

    result = CliRunner().invoke(app, ["preview", str(ROOT / "examples/gcp-gpu.yaml"),
                                      "--cloud", "gcp", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    vms = [r for r in rows if r["type"] == INSTANCE]
    assert len(vms) == 6
    assert vms[0]["properties"]["provisioningModel"] == "SPOT"
    assert vms[0]["properties"]["accelerators"] == ["1xnvidia-tesla-t4"]


def test_preview_cli_rejects_wrong_cloud():
    from spotbench.cli import app

    result = CliRunner().invoke(app, ["preview", str(ROOT / "examples/gcp-gpu.yaml"),
                                      "--cloud", "aws"])
    assert result.exit_code == 2 and "--cloud aws" in result.output


def test_role_machine_types_give_the_chief_its_own_machine():
    """examples/gcp-tf.yaml: chief n1-standard-2, ps and workers n1-standard-1."""
    tf = _program("examples/gcp-tf.yaml")
    by_role: dict[str, set[str]] = {}
    for inst in tf.of_type(INSTANCE):
        by_role.setdefault(inst.inputs["labels"]["spotbench-role"], set()).add(inst.inputs["machineType"])
    assert by_role == {"chief": {"n1-standard-2"}, "ps": {"n1-standard-1"}, "worker": {"n1-standard-1"}}


@pulumi.runtime.test
def test_known_hosts_pins_the_host_key_at_every_member_port():
    from infra.keys import known_hosts

    out = known_hosts(["10.0.0.2", pulumi.Output.from_input("10.0.0.3")],
                      "ssh-ed25519 AAAAC3Nz host-comment\n", 2222)
    return out.apply(lambda text: assert_equal(text, (
        "[10.0.0.2]:2222 ssh-ed25519 AAAAC3Nz\n[10.0.0.3]:2222 ssh-ed25519 AAAAC3Nz\n")))


def assert_equal(a, b):
    assert a == b


# ---- deploy defects: build account, APIs, ingress path -----------------------------------
@pytest.mark.fidelity
def test_gcp_functions_build_as_their_own_account_with_the_roles_a_build_needs(osu):
    """New projects no longer grant the default Cloud Build account build roles: the
    functions name their build account, and the declared policy lets it read the source,
    write logs and push the image."""
    from tests.fidelity.gcp_iam import DeclaredPolicy, Need

    accounts = {a.inputs["accountId"] for a in osu.of_type("gcp:serviceaccount/account:Account")}
    assert "sb-gcp-osu-bld" in accounts
    build = "sb-gcp-osu-bld@proj-1.iam.gserviceaccount.com"
    (source,) = osu.of_type("gcp:storage/bucketObject:BucketObject")
    bucket = source.inputs["bucket"]
    for fn in osu.of_type(FUNCTION):
        assert fn.inputs["buildConfig"]["serviceAccount"] == f"projects/proj-1/serviceAccounts/{build}"
    policy = DeclaredPolicy.from_declared(osu.declared, "proj-1")
    member = f"serviceAccount:{build}"
    obj = f"projects/_/buckets/{bucket}/objects/{source.inputs['name']}"
    for need in (
        Need("storage.objects.get", obj, "storage.googleapis.com/Object"),
        Need("logging.logEntries.create", "projects/proj-1", "cloudresourcemanager.googleapis.com/Project"),
        Need("artifactregistry.repositories.uploadArtifacts",
             "projects/proj-1/locations/us-central1/repositories/gcf-artifacts",
             "artifactregistry.googleapis.com/Repository"),
    ):
        assert policy.allows(member, need), need
    results = f"projects/_/buckets/{bucket}/objects/gcp-osu/runs/r/g.1.jsonl"
    assert not policy.allows(member, Need("storage.objects.get", results, "storage.googleapis.com/Object"))


def test_gcp_required_apis_declared_and_every_resource_waits_for_them():
    from infra.gcp import GcpSweep, GcpSweepArgs
    from infra.gcp.apis import REQUIRED_APIS

    seen: dict[str, pulumi.ResourceOptions] = {}

    def record(args: pulumi.ResourceTransformationArgs):
        seen[f"{args.type_}::{args.name}"] = args.opts
        return None

    spec = load_spec(_spec())

    def prog():
        pulumi.runtime.register_stack_transformation(record)
        GcpSweep(spec.name, GcpSweepArgs(spec=spec))

    snap = _snapshot(CONFIG, prog)
    apis = {s.inputs["service"] for s in snap.of_type("gcp:projects/service:Service")}
    assert {"compute.googleapis.com", "cloudfunctions.googleapis.com", "run.googleapis.com",
            "cloudbuild.googleapis.com", "cloudscheduler.googleapis.com",
            "artifactregistry.googleapis.com", "iam.googleapis.com"} <= apis == set(REQUIRED_APIS)
    assert all(s.inputs["disableOnDestroy"] is False for s in snap.of_type("gcp:projects/service:Service"))
    custom = [k for k in seen if not k.startswith(("spotbench:", "gcp:projects/service:"))]
    assert len(custom) > 20
    for key in custom:
        deps = seen[key].depends_on or []
        assert len(deps) >= len(REQUIRED_APIS), f"{key} does not wait for the APIs"


def ingress_problems(snap: RecordingMocks) -> list[str]:
    """Whether the declared network path lets Cloud Scheduler and the VMs reach
    ALLOW_INTERNAL_ONLY functions, and the VMs reach registries, without external IPs."""
    problems = []
    subnets = {s.name: s.inputs for s in snap.of_type("gcp:compute/subnetwork:Subnetwork")}
    nats = snap.of_type("gcp:compute/routerNat:RouterNat")
    natted = {n["name"] for nat in nats for n in nat.inputs.get("subnetworks", [])
              if "ALL_IP_RANGES" in n.get("sourceIpRangesToNats", [])}
    fns = {f.inputs["name"]: f.inputs for f in snap.of_type(FUNCTION)}
    for name, fn in fns.items():
        if fn["serviceConfig"]["ingressSettings"] != "ALLOW_INTERNAL_ONLY":
            problems.append(f"function {name} is reachable from outside the project")
    for vm in snap.of_type(INSTANCE):
        (nic,) = vm.inputs["networkInterfaces"]
        if nic.get("accessConfigs"):
            problems.append(f"{vm.inputs['name']} has an external IP: its done call leaves the VPC")
        subnet = next((s for n, s in subnets.items() if nic["subnetwork"] == f"{n}-id"), None)
        if subnet is None or not subnet.get("privateIpGoogleAccess"):
            problems.append(f"{vm.inputs['name']}: subnet without Private Google Access")
        if nic["subnetwork"] not in natted:
            problems.append(f"{vm.inputs['name']}: no Cloud NAT for image pulls outside Google")
        env = _env(_user_data(vm))
        done = json.loads(env["SPOTBENCH_CONTEXT"])["done_url"]
        host, fn_name = done.removeprefix("https://").split("/", 1)
        if not host.endswith(".cloudfunctions.net") or fn_name not in fns:
            problems.append(f"{vm.inputs['name']}: done URL {done} is not a function of the stack")
        elif not host.startswith(f"{fns[fn_name]['location']}-{vm.inputs['project']}."):
            problems.append(f"{vm.inputs['name']}: done function is in another project")
    for job in snap.of_type(JOB):
        uri = job.inputs["httpTarget"]["uri"]
        fn = next((f for f in fns.values()
                   if uri == run_app_url(f["name"], f["project"], f["location"])), None)
        if fn is None:  # e.g. the cloudfunctions.net URL (#37)
            problems.append(f"job {job.inputs['name']}: Cloud Scheduler counts as internal only "
                            f"at a function's run.app URL, not {uri}")
        elif fn.get("project") != job.inputs["project"]:
            problems.append(f"job {job.inputs['name']}: Cloud Scheduler counts as internal only "
                            "in the function's own project")
    return problems


def test_gcp_ingress_path_is_consistent(osu):
    assert ingress_problems(osu) == []
    # the check is not vacuous: an external IP, no Private Google Access, no NAT all show
    broken = RecordingMocks()
    broken.declared = [
        type(d)(d.type, d.name, copy.deepcopy(d.inputs), d.custom, d.secrets)
        for d in osu.declared if d.type != "gcp:storage/bucketObject:BucketObject"]
    vm = broken.of_type(INSTANCE)[0]
    vm.inputs["networkInterfaces"][0]["accessConfigs"] = [{"natIp": ""}]
    broken.of_type("gcp:compute/subnetwork:Subnetwork")[0].inputs["privateIpGoogleAccess"] = False
    broken.of_type("gcp:compute/routerNat:RouterNat")[0].inputs["subnetworks"] = []
    problems = ingress_problems(broken)
    assert any("external IP" in p for p in problems)
    assert any("Private Google Access" in p for p in problems)
    assert any("Cloud NAT" in p for p in problems)


# The predefined role that lets a deployer create each resource type the stack declares.
# Sources: https://cloud.google.com/iam/docs/roles-permissions (compute, iam, storage,
# cloudfunctions, run, cloudscheduler, artifactregistry, iap, serviceusage pages).
CREATOR_ROLE = {
    "gcp:projects/service:Service": "roles/serviceusage.serviceUsageAdmin",
    "gcp:compute/network:Network": "roles/compute.networkAdmin",
    "gcp:compute/subnetwork:Subnetwork": "roles/compute.networkAdmin",
    "gcp:compute/router:Router": "roles/compute.networkAdmin",
    "gcp:compute/routerNat:RouterNat": "roles/compute.networkAdmin",
    "gcp:compute/address:Address": "roles/compute.networkAdmin",
    "gcp:compute/firewall:Firewall": "roles/compute.securityAdmin",
    "gcp:compute/instance:Instance": "roles/compute.instanceAdmin.v1",
    "gcp:compute/resourcePolicy:ResourcePolicy": "roles/compute.instanceAdmin.v1",
    "gcp:serviceaccount/account:Account": "roles/iam.serviceAccountAdmin",
    "gcp:serviceaccount/iAMMember:IAMMember": "roles/iam.serviceAccountAdmin",
    "gcp:projects/iAMCustomRole:IAMCustomRole": "roles/iam.roleAdmin",
    "gcp:projects/iAMMember:IAMMember": "roles/resourcemanager.projectIamAdmin",
    "gcp:storage/bucket:Bucket": "roles/storage.admin",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "roles/storage.admin",
    "gcp:storage/bucketObject:BucketObject": "roles/storage.admin",
    "gcp:cloudfunctionsv2/function:Function": "roles/cloudfunctions.admin",
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember": "roles/run.admin",
    "gcp:cloudscheduler/job:Job": "roles/cloudscheduler.admin",
    "gcp:artifactregistry/repository:Repository": "roles/artifactregistry.admin",
    "gcp:iap/tunnelInstanceIAMMember:TunnelInstanceIAMMember": "roles/iap.admin",
    "gcp:iap/tunnelIamMember:TunnelIamMember": "roles/iap.admin",
    "gcp:secretmanager/secret:Secret": "roles/secretmanager.admin",
    "gcp:secretmanager/secretVersion:SecretVersion": "roles/secretmanager.admin",
    "gcp:secretmanager/secretIamMember:SecretIamMember": "roles/secretmanager.admin",
}


def test_gcp_deployer_roles_cover_every_declared_resource_and_are_documented(osu, gpu):
    from spotbench.clouds.gcp import DEPLOYER_ROLES

    ops = _sweep(_spec(gcp={"operators": ["user:ops@example.com"]}))
    types = {d.type for snap in (osu, gpu, ops) for d in snap.declared
             if d.custom and d.type.startswith("gcp:")}
    unknown = types - set(CREATOR_ROLE)
    assert not unknown, f"which predefined role creates {unknown}? add it to CREATOR_ROLE"
    needed = {CREATOR_ROLE[t] for t in types} | {"roles/iam.serviceAccountUser"}
    assert needed <= set(DEPLOYER_ROLES), needed - set(DEPLOYER_ROLES)
    docs = (ROOT / "docs/gcp.md").read_text().replace("`", "")
    for role, why in DEPLOYER_ROLES.items():
        assert f"| {role} | {why.replace('`', '')} |" in docs, f"docs/gcp.md does not list {role}"


def iam_objects(snap: RecordingMocks) -> dict[str, int]:
    from infra.gcp.identity import IAM_TYPES

    return {t.split(":")[-1]: len(snap.of_type(t)) for t in IAM_TYPES}


def test_gcp_iam_objects_per_sweep_do_not_grow_with_groups():
    """Issue #29: one member account per sweep; no per-group account, custom role, bucket
    condition, secret or secret binding. 2 groups and 12 declare the same IAM objects, and
    the VMs all run as the one member account. (Before: one account, one bucket condition,
    two secrets per group.)"""
    small, big = _sweep(_spec(trials=2)), _sweep(_spec(trials=12))
    assert len(big.of_type(INSTANCE)) == 6 * len(small.of_type(INSTANCE)) > 0
    assert iam_objects(small) == iam_objects(big)
    counts = iam_objects(big)
    assert counts["Account"] == 4 and counts["Secret"] == 1 and counts["SecretIamMember"] == 1
    emails = {i.inputs["serviceAccount"]["email"] for i in big.of_type(INSTANCE)}
    assert len(emails) == 1 and next(iter(emails)).startswith("sb-t-vm@")
    conditions = [b.inputs.get("condition") or {} for b in
                  big.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")]
    assert not any("runs/" in c.get("expression", "") or "checkpoints/" in c.get("expression", "")
                   for c in conditions)


def test_gcp_operators_iap_access_is_one_conditioned_binding_per_operator_not_per_vm():
    """`gcp.operators` tunnel through IAP with one project-level `TunnelIamMember` each,
    conditioned on the sweep's subnet and ssh ports (IAM conditions cannot name an IAP
    tunnel instance: docs/platform.md): 3 groups and 30 declare the same IAP/IAM objects
    (it was one TunnelInstanceIAMMember per VM and operator), and the condition admits the
    sweep's addresses and ports only."""
    import celpy

    ops = {"operators": ["user:ops@example.com", "group:bench@example.com"],
           "network_cidr": "10.77.3.0/24"}
    osu = {"name": "osu", "benchmarks": ["latency"]}  # MPI: ssh ports 22 and 2222
    small = _sweep(_spec(trials=3, gcp=ops, workload=osu))
    big = _sweep(_spec(trials=30, gcp=ops, workload=osu))
    assert len(big.of_type(INSTANCE)) == 10 * len(small.of_type(INSTANCE)) > 0
    assert iam_objects(small) == iam_objects(big)
    assert not big.of_type("gcp:iap/tunnelInstanceIAMMember:TunnelInstanceIAMMember")
    tunnels = big.of_type("gcp:iap/tunnelIamMember:TunnelIamMember")
    assert sorted(t.inputs["member"] for t in tunnels) == sorted(ops["operators"])
    env = celpy.Environment()
    for t in tunnels:
        assert t.inputs["role"] == "roles/iap.tunnelResourceAccessor"
        program = env.program(env.compile(t.inputs["condition"]["expression"]))

        def admits(ip: str, port: int, kind: str = "iap.googleapis.com/TunnelInstance") -> bool:
            return bool(program.evaluate(celpy.json_to_cel({
                "resource": {"type": kind}, "destination": {"ip": ip, "port": port}})))

        assert admits("10.77.3.7", 22) and admits("10.77.3.250", 2222)
        assert not admits("10.77.4.7", 22)  # another subnet (another sweep's)
        assert not admits("10.77.30.7", 22)  # a prefix of the text is not the subnet
        assert not admits("10.77.3.7", 80)  # not an ssh port
        assert not admits("10.77.3.7", 22, "iap.googleapis.com/TunnelDestGroup")
    none = _sweep(_spec(trials=3))
    assert not none.of_type("gcp:iap/tunnelIamMember:TunnelIamMember")


def test_gcp_500_group_sweep_plans_and_previews():
    """Issue #29's done-when: a 500-group GCP sweep plans and previews (under mocks): no
    cap on groups remains (it was 90, 45 with checkpoints)."""
    spec = big_spec()
    assert len(load_spec(spec).plan()) == 500
    snap = _sweep(spec)
    assert len({i.inputs["labels"]["spotbench-group"] for i in snap.of_type(INSTANCE)}) == 500
    assert iam_objects(snap) == iam_objects(_sweep({**spec, "trials": 1}))


def big_spec() -> dict:
    """500 one-VM groups with a secret env: 5 machine types × 100 trials."""
    return _spec(name="big", trials=100, image="docker.io/library/python:3.12-slim",
                 matrix={"machine_type": [f"n2-standard-{n}" for n in (2, 4, 8, 16, 32)]},
                 workload={"name": "container", "command": ["true"],
                           "env": {"TOKEN": "s3cret"}})


def test_gcp_sweep_account_ids_never_collide_between_long_sweep_names():
    """The scheduler/function/build account of two sweeps in one project whose names share
    their first 23+ characters must differ (truncating `sb-<sweep>` made them one account);
    short names keep their readable id, and every id is a valid account id (6–30 chars)."""
    import re

    from infra.gcp.identity import account_id

    long = ["spotbench-nightly-gpu-a100-x1", "spotbench-nightly-gpu-a100-x2",
            "spotbench-nightly-gpu-a100", "a" * 40, "a" * 41]
    for kind, suffix in (("scheduler", "sch"), ("function", "fn"), ("build", "bld"),
                         ("member", "vm")):
        ids = [account_id(s, kind) for s in long]
        assert len(set(ids)) == len(ids), ids
        assert all(re.fullmatch(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", i) and i.endswith(suffix)
                   for i in ids), ids
        assert account_id("gcp-osu", kind) == f"sb-gcp-osu-{suffix}"
