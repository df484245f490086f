"""The GCP program in the created lifecycle, under Pulumi mocks: per group and role a
regional instance template carrying what a stopped-lifecycle VM carries (labels, member
account, image, boot document, spot scheduling with the deadline, no external IP), and no
instances or static addresses; each member picks its env from the document by its name."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from spotbench.member import MemberContext

from spotbench.clouds.gcp import template_name
from spotbench.spec import load_spec
from tests.infra.test_gcp import CONFIG, _env, _file, _snapshot

TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
SPEC = {"name": "gcp-gpu", "cloud": "gcp", "region": "us-central1",
        "zones": ["us-central1-a", "us-central1-b", "us-central1-c"], "lifecycle": "created",
        "workload": {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1},
        "matrix": {"machine_type": ["n1-standard-4"], "accelerator": ["nvidia-tesla-t4"],
                   "accelerator_count": [1]},
        "trials": 1, "spot": True, "deadline": "45m", "schedule": {"cron": "30 5 * * *"}}


def _declared():
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec(SPEC)
    return spec, _snapshot(CONFIG, lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))


def test_capacity_created_lifecycle_declares_templates_not_instances():
    spec, snap = _declared()
    [group] = spec.plan()
    assert snap.of_type("gcp:compute/instance:Instance") == []
    assert snap.of_type("gcp:compute/address:Address") == []
    templates = {t.inputs["name"]: t for t in snap.of_type(TEMPLATE)}
    roles = {m.role for m in group.members}
    assert set(templates) == {template_name(group.id, r) for r in roles} and len(roles) == 3
    member_account = next(a for a in snap.of_type("gcp:serviceaccount/account:Account")
                          if "member" in a.inputs["accountId"] or "vm" in a.inputs["accountId"])
    for role in roles:
        t = templates[template_name(group.id, role)].inputs
        assert t["region"] == "us-central1"
        assert t["labels"] == {"managed-by": "spotbench", "spotbench-sweep": "gcp-gpu",
                               "spotbench-group": group.id, "spotbench-role": role}
        [disk] = t["disks"]
        assert disk["boot"] and disk["sourceImage"] == "cos-cloud/cos-stable"
        assert disk["labels"] == t["labels"]
        [nic] = t["networkInterfaces"]
        assert "accessConfigs" not in nic and "networkIp" not in nic  # no external, no static IP
        s = t["scheduling"]
        assert (s["provisioningModel"], s["preemptible"], s["instanceTerminationAction"]) == (
            "SPOT", True, "DELETE")
        assert s["maxRunDuration"]["seconds"] == 45 * 60 and "availabilityDomain" not in s
        assert t["guestAccelerators"] == [{"type": "nvidia-tesla-t4", "count": 1}]
        assert t["serviceAccount"]["email"].startswith(member_account.inputs["accountId"] + "@")
        assert t["machineType"] == "n1-standard-4"


def _boot_env(doc: dict, name: str, tmp: Path) -> dict[str, str]:
    """What the template's boot leaves in the container's env file for instance `name`: the
    document's pick-member script run on its own files (the metadata server's answer here)."""
    state = tmp / name
    state.mkdir()
    (state / "env.group").write_text(_file(doc, "/var/lib/spotbench/env.group"))
    (state / "name").write_text(name)
    script = _file(doc, "/var/lib/spotbench/pick-member").replace(
        "curl -fsS --retry 5 -H 'Metadata-Flavor: Google' "
        "http://metadata.google.internal/computeMetadata/v1/instance/name", "cat name").replace(
        "/var/lib/spotbench/env", str(state / "env"))
    ran = subprocess.run(["sh", "-c", script], cwd=state, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    return dict(line.split("=", 1) for line in (state / "env").read_text().splitlines())


def test_capacity_created_template_document_holds_each_member_env_picked_by_name(tmp_path):
    spec, snap = _declared()
    [group] = spec.plan()
    by_role: dict[str, list] = {}
    for m in group.members:
        by_role.setdefault(m.role, []).append(m)
    for t in snap.of_type(TEMPLATE):
        role = t.inputs["labels"]["spotbench-role"]
        doc = yaml.safe_load(t.inputs["metadata"]["user-data"])
        members = by_role[role]
        for m in members:
            env = _boot_env(doc, m.name, tmp_path)
            ctx = MemberContext.from_env(env)  # what the workload reads at boot
            assert (ctx.name, ctx.rank, ctx.role, env["SPOTBENCH_RANK"]) == (
                m.name, m.rank, m.role, str(m.rank))
            assert ctx.me.name == m.name and env["SPOTBENCH_ROLE"] == m.role
            # peers by instance name (one zone: GCE's internal DNS resolves them)
            assert {p.host for p in ctx.members} == {x.name for x in group.members}
            assert list(env).count("SPOTBENCH_RANK") == 1  # one value: docker takes no doubles
        pick = _file(doc, "/var/lib/spotbench/pick-member")
        assert "computeMetadata/v1/instance/name" in pick
        assert all(f"  {m.name}) " in pick for m in members)
        unit = _file(doc, "/etc/systemd/system/spotbench.service").splitlines()
        first_pre = next(line for line in unit if line.startswith("ExecStartPre="))
        assert first_pre == "ExecStartPre=/bin/sh /var/lib/spotbench/pick-member"
        assert any("-s 10." in line and "ACCEPT" in line for line in unit)  # the subnet


def test_capacity_pick_member_script_refuses_a_stranger(tmp_path):
    from infra.gcp.cloud_init import pick_member_script

    script = pick_member_script({"g-c0": {"SPOTBENCH_MEMBER": "g-c0"},
                                 "g-w1": {"SPOTBENCH_MEMBER": "g-w1"}}).replace(
        "curl -fsS --retry 5 -H 'Metadata-Flavor: Google' "
        "http://metadata.google.internal/computeMetadata/v1/instance/name", "cat name").replace(
        "/var/lib/spotbench/env", str(tmp_path / "env"))
    (tmp_path / "env.group").write_text("X=1\n")
    (tmp_path / "name").write_text("g-w1")
    ok = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and (tmp_path / "env").read_text() == "X=1\nSPOTBENCH_MEMBER=g-w1\n"
    (tmp_path / "name").write_text("other-vm")
    bad = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1 and "no member of this template" in bad.stderr


def test_capacity_preview_shows_templates_and_the_permissions_the_function_gains():
    from spotbench.preview import key_properties

    spec, snap = _declared()
    [group] = spec.plan()
    templates = [key_properties(t) for t in snap.of_type(TEMPLATE)]
    assert len(templates) == 3
    for t in templates:
        assert t["region"] == "us-central1" and t["machineType"] == "n1-standard-4"
        assert t["provisioningModel"] == "SPOT" and float(t["maxRunDuration"][:-1]) == 45 * 60
        assert t["labels"]["spotbench-group"] == group.id
        assert t["serviceAccount"].startswith("sb-gcp-gpu-vm@") and t["images"]
    roles = {r.inputs["roleId"]: key_properties(r)
             for r in snap.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")}
    [create] = [p for rid, p in roles.items() if rid.endswith(".create")]
    assert {"compute.instances.create", "compute.disks.create",
            "compute.instanceTemplates.useReadOnly"} <= set(create["permissions"])
    # the subnet is not condition-able: granted on the sweep's subnet itself (#37)
    assert "compute.subnetworks.use" not in create["permissions"]
    [subnet] = [key_properties(b) for b in
                snap.of_type("gcp:compute/subnetworkIAMMember:SubnetworkIAMMember")]
    assert subnet["role"] == "roles/compute.networkUser" and subnet["region"] == "us-central1"
    bindings = [key_properties(b) for b in snap.of_type("gcp:projects/iAMMember:IAMMember")
                if "create" in str(b.inputs.get("role"))]
    assert bindings and all("gcp-gpu--*" in b["condition"]["description"] for b in bindings)
    assert all('startsWith("projects/proj-1/zones/us-central1-b/instances/gcp-gpu--")'
               in b["condition"]["expression"] for b in bindings)


def test_capacity_stopped_lifecycle_gains_no_create_permission():
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec({**{k: v for k, v in SPEC.items() if k not in ("zones", "region")},
                      "zone": "us-central1-a", "lifecycle": "stopped"})
    snap = _snapshot(CONFIG, lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))
    assert snap.of_type(TEMPLATE) == []
    perms = {p for r in snap.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")
             for p in r.inputs["permissions"]}
    assert "compute.instances.create" not in perms and "compute.disks.create" not in perms


def test_capacity_created_template_deletes_at_preemption_and_deadline_stopped_vm_stops():
    """research.md §4: the termination action applies at a preemption and at
    max_run_duration. Created members are made again from the template: DELETE (no stopped
    VM, no boot disk left billed). Stopped-lifecycle VMs are started again: STOP."""
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec, snap = _declared()
    for t in snap.of_type(TEMPLATE):
        s = t.inputs["scheduling"]
        assert s["instanceTerminationAction"] == "DELETE" and s["maxRunDuration"]["seconds"] == 45 * 60
    stopped = load_spec({**{k: v for k, v in SPEC.items() if k != "zones"}, "zone": "us-central1-a",
                         "name": "gcp-gpu-stopped", "lifecycle": "stopped"})
    vms = _snapshot(CONFIG, lambda: GcpSweep(stopped.name, GcpSweepArgs(spec=stopped))).of_type(
        "gcp:compute/instance:Instance")
    assert vms and snap.of_type("gcp:compute/instance:Instance") == []
    for vm in vms:
        s = vm.inputs["scheduling"]
        assert s["instanceTerminationAction"] == "STOP" and s["maxRunDuration"]["seconds"] == 45 * 60
