"""Boot fidelity: the rendered cloud-config (GCP) and user-data (AWS) of the examples are
valid (`cloud-init schema`, `shellcheck`) and, executed as a VM would (tests/fidelity/boot.py),
boot groups that complete and call `done` over HTTP: OSU (both clouds), TF parameter server
(both clouds), TF all-reduce (both clouds), and the GPU image selection (both clouds).

The boots are slow (each a few Python processes per member, TF imports), so the module
starts every boot its selected tests need at once (`boots`): renders in the main thread,
labs side by side in threads (`boot.Background`), each test then reads its boot's outcome.
A boot's outcome is shared by all the tests that assert on it (module-scoped fixtures)."""

from __future__ import annotations

import base64
import json
import functools
import time
from collections.abc import Callable

import pytest

from infra.gcp.cloud_init import host_firewall
from spotbench.clouds.aws.identity import member_role_name
from spotbench.images import IMAGE_UID
from tests.fidelity import aws_ssm, boot
from tests.fidelity import rules as fw
from tests.fidelity.conftest import need_tools
from tests.infra.conftest import MOCKS

pytestmark = pytest.mark.fidelity

EXAMPLES = {"gcp": ["examples/gcp-osu.yaml", "examples/gcp-tf.yaml", "examples/gcp-tf-allreduce.yaml",
                    "examples/gcp-gpu.yaml"],
            "aws": ["examples/aws-osu.yaml", "examples/aws-tf-cpu.yaml", "examples/aws-tf-gpu.yaml"]}
SMALL_OSU = {"max_size": 4096, "iterations": 200, "iterations_large": 50, "warmup": 20,
             "warmup_large": 5, "bw_iterations": 10, "bw_iterations_large": 5, "bw_warmup": 2,
             "bw_warmup_large": 1, "window": 16, "large_size": 1024, "implementation": "mpi4py"}


@functools.cache
def rendered_example(example: str) -> tuple[list[boot.Rendered], list[dict]]:
    """The example as the program declares it (rendered once per module run)."""
    return boot.render(example, MOCKS)


def _structure(doc: dict) -> str:
    """The document with every written file's content blanked: what `cloud-init schema`
    judges (keys and types) — members' documents differ only in those contents."""
    files = [{**f, "content": ""} for f in doc.get("write_files", [])]
    return boot.yaml.safe_dump({**doc, "write_files": files}, sort_keys=True)


_schema_checked: dict[str, str] = {}  # structure → the schema report of its first document
_shell_checked: dict[str, str] = {}  # script → shellcheck's report


def _check_static(example: str) -> None:
    need_tools("cloud-init", "shellcheck")
    rendered, _ = rendered_example(example)
    assert rendered, f"{example}: no instances declared"
    for r in rendered:  # every member; identical structures and scripts are checked once
        doc = r.doc
        shape = _structure(doc)
        if shape not in _schema_checked:
            _schema_checked[shape] = boot.schema_errors(r.user_data)
        assert not _schema_checked[shape], (r.name, _schema_checked[shape])
        scripts = [boot.shell_of(r)] + [f["content"] for f in doc["write_files"]
                                         if f["content"].startswith("#!/bin/sh")]
        for script in scripts:
            if script not in _shell_checked:
                _shell_checked[script] = boot.shellcheck_errors(script)
            assert not _shell_checked[script], (r.name, script, _shell_checked[script])


@pytest.mark.parametrize("example", EXAMPLES["gcp"])
def test_rendered_cloud_config_is_valid_gcp(example):
    _check_static(example)


@pytest.mark.parametrize("example", EXAMPLES["aws"])
def test_rendered_user_data_is_valid_aws(example):
    _check_static(example)


_osu_groups: dict[tuple[str, str], tuple[list[boot.Rendered], list[dict], dict]] = {}


def _osu_group(cloud: str, lab_dir, example: str) -> tuple[list[boot.Rendered], list[dict], dict]:
    """The example's first OSU group, small (SMALL_OSU, one machine type), rendered once:
    its members, the preview's rows, and the secrets its declarations hold (GCP: the
    group's keys in Secret Manager)."""
    key = (str(lab_dir), example)
    if key not in _osu_groups:
        _osu_groups[key] = _render_osu_group(lab_dir, example)
    return _osu_groups[key]


def _render_osu_group(lab_dir, example: str) -> tuple[list[boot.Rendered], list[dict], dict]:
    spec = boot.spec_variant(example, lab_dir, workload=SMALL_OSU, trials=1,
                             matrix={"machine_type": [
                                 boot.yaml.safe_load((boot.ROOT / example).read_text())
                                 ["matrix"]["machine_type"][0]]})
    rendered, rows = boot.render(spec, MOCKS)
    group = next(iter(boot.groups(rendered).values()))
    assert [r.ctx.role for r in group] == ["launcher", "peer"]
    if group[0].cloud == "aws":  # the group's keys in SSM, which the function answers
        return group, rows, aws_ssm.parameter_store(MOCKS.declared, group[0].env["AWS_REGION"])
    return group, rows, boot.secret_store(MOCKS.declared)


def osu_boot(cloud: str, example: str, lab_dir, *, edit=lambda text: text,
             rules=lambda rows: rows, timeout: float = 150, tag: str = "",
             outside: bool = True) -> Callable[[], dict]:
    """Boot both members of the example's first OSU group, each behind the firewall the
    stack declares (as nftables in its namespace), as the cloud would: first outside any
    run (GCE's creation boot; on AWS the creation boot, then a capacity restart) when
    `outside`, then inside an open run. Renders now; the returned call boots and returns
    what happened."""
    group, rows, secrets = _osu_group(cloud, lab_dir, example)
    rows = rules(rows)
    return functools.partial(_boot_osu_group, cloud, lab_dir / f"{cloud}{tag}", group, rows,
                             secrets, edit, timeout, outside)


def _boot_osu_group(cloud: str, work, group: list[boot.Rendered], rows: list[dict],
                    secrets: dict, edit: Callable[[str], str], timeout: float,
                    outside: bool) -> dict:
    store = boot.shared_results(work, IMAGE_UID)
    results_url = store.url
    outside_boots: dict = {}
    hosts = fw.hosts(rows)
    lab_hosts = [hosts[r.name] for r in group]
    with boot.Lab(work) as lab:
        lab.serve_secrets(secrets)
        vms = {r.ctx.role: lab.vm(r.name, r.ctx.me.host, cloud,
                                  edit(boot.localize(r, results_url, lab.done_url)), r.account,
                                  r.image)
               for r in group}
        for r in group:
            assert hosts[r.name].ip == r.ctx.me.host
            lab.nft(vms[r.ctx.role], fw.nft_ruleset(rows, hosts[r.name], lab_hosts))
            lab.sample_ports(vms[r.ctx.role])
        if cloud == "aws":  # creation boot: installs only
            for vm in vms.values():
                lab.boot(vm)
            for vm in vms.values():
                assert lab.wait(vm, 60) == 0, vm.journal
        if outside:  # no run is open: each member must stop its VM by itself, quickly
            started = time.monotonic()
            for vm in vms.values():
                lab.boot(vm)
            for role, vm in vms.items():
                lab.wait(vm, 90)
                outside_boots[role] = {
                    "seconds": time.monotonic() - started, "powered_off": vm.powered_off,
                    "end": [c for c in vm.calls("systemd") if c["phase"] == "end"][-1:],
                    "docker_runs": len([c for c in vm.calls("docker") if c["argv"][0] == "run"])}
            outside_boots["files"] = boot.files(store)
            outside_boots["done"] = lab.done_calls()
        run = boot.open_run(store, IMAGE_UID)
        lab.boot(vms["peer"])
        lab.boot(vms["launcher"])
        finished = lab.wait(vms["launcher"], timeout)
        done = lab.done_calls()
        lab.stop(vms["peer"])  # what done does: stop the group
        return {"finished": finished, "done": done, "vms": vms, "store": store, "run": run,
                "secret_calls": lab.secret_calls(), "function_calls": lab.function_calls(),
                "secrets": secrets,
                "group": group, "journal": {k: v.journal for k, v in vms.items()},
                "rows": rows, "hosts": {r.ctx.role: hosts[r.name] for r in group},
                "ports": {k: v.ports() for k, v in vms.items()}, "outside": outside_boots}


def _check_ports_allowed(g: dict) -> None:
    """Every port a member listened on (measured) is open to its peer by the rules."""
    hosts = g["hosts"]
    listened = 0
    for role, ports in g["ports"].items():
        other = hosts["peer" if role == "launcher" else "launcher"]
        for p in ports:
            if p["ip"].startswith("127."):
                continue  # loopback only: nothing crosses the network
            listened += 1
            assert fw.allowed(g["rows"], other, hosts[role], p["protocol"], p["port"]), (
                f"{role} listens on {p['protocol']}/{p['port']} ({p['program']}) but the "
                f"declared rules do not let {other.name} reach it")
    assert listened >= 3, g["ports"]  # sshd, hydra proxies, MPI ranks at least


@pytest.fixture(scope="module")
def gcp_osu(boots):
    return boots.result("gcp_osu")


def test_osu_group_boots_completes_and_calls_done_gcp(gcp_osu):
    g = gcp_osu
    assert g["finished"] == 0, g["journal"]["launcher"][-4000:]
    assert len(g["done"]) == 1, g["journal"]
    call = g["done"][0]
    assert call["body"]["group"] == g["group"][0].ctx.group and "started_at" in call["body"]
    assert call["auth"] == "Bearer sim-gcp-identity-token"
    assert call["client"] == g["group"][0].ctx.me.host
    records = g["store"].read(g["run"].run)
    assert {r.metric for r in records} == {"latency", "bibw"}, (_debug_print(g), records[:1])
    assert not any(r.preempted for r in records)


def test_osu_members_fetch_their_own_keys_from_the_grant_function_gcp(gcp_osu):
    """The private keys are in no boot document: each member's fetch-keys step got them
    from the grant function (the hub's double: each VM's own group's keys, issue #29) with
    its instance identity token, and the image's user owns them, mode 0600; they are the
    group's own pairs (derived from the sweep's seed)."""
    from cryptography.hazmat.primitives import serialization

    from spotbench.auth.group_keys import public_openssh

    g = gcp_osu
    (secret,) = [json.loads(base64.b64decode(s["data"])) for s in g["secrets"].values()]
    seed = bytes.fromhex(secret["seed"])
    for r in g["group"]:
        assert "PRIVATE KEY" not in r.user_data
        ssh = g["vms"][r.ctx.role].state / "var-lib/spotbench/ssh"
        for key in ("id_ed25519", "ssh_host_ed25519_key"):
            st = (ssh / key).stat()
            assert (st.st_mode & 0o777, st.st_uid) == (0o600, IMAGE_UID), key
            private = serialization.load_ssh_private_key((ssh / key).read_bytes(), None)
            public = private.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
            assert public == public_openssh(seed, r.ctx.group, key)


def test_every_port_osu_members_listen_on_is_allowed_gcp(gcp_osu):
    _check_ports_allowed(gcp_osu)


@pytest.fixture(scope="module")
def aws_osu(boots):
    return boots.result("aws_osu")


def test_osu_group_boots_completes_and_calls_done_aws(aws_osu):
    g = aws_osu
    launcher = g["vms"]["launcher"]
    runs = [c for c in launcher.calls("docker") if c["argv"][0] == "run"]
    assert len(runs) == 2, ("the creation boot must not run the workload", _debug_print(g),
                            launcher.calls())  # the out-of-run restart, then the run
    assert len(g["done"]) == 1, (_debug_print(g), g["done"])
    call = g["done"][0]
    assert call["body"]["group"] == g["group"][0].ctx.group and "started_at" in call["body"]
    assert call["auth"].startswith("AWS4-HMAC-SHA256 Credential=ASIASIMULATEDKEY0001/")
    assert call["client"] == g["group"][0].ctx.me.host
    # ECR login with the instance role through curl --aws-sigv4, no aws CLI
    ecr = [c for c in launcher.calls("curl") if "ecr" in c]
    assert ecr and all(all(c["ecr"].values()) for c in ecr)
    records = g["store"].read(g["run"].run)
    assert {r.metric for r in records} == {"latency", "bibw"}, (_debug_print(g), records[:1])
    assert not any(r.preempted for r in records)


def test_osu_members_fetch_their_own_keys_from_the_function_aws(aws_osu):
    """The private keys are in no user-data: each member's fetch-keys step got them from the
    sweep's function URL (`/keys`, issue #29; the hub's double: SigV4-signed with its
    instance role's IMDS credentials, the calling instance's own group's entries only)
    once, on its first boot after the creation boot (the disk keeps them), and the image's
    user owns them, 0600; they are the group's own pairs (derived from the sweep's seed). The
    member role itself may not read the seed (no SSM grant: the function reads it with its
    own role)."""
    from cryptography.hazmat.primitives import serialization

    from spotbench.auth.group_keys import public_openssh
    from spotbench.clouds.aws.grants import seed_parameter_name
    from tests.iam.policy import Authorization, evaluate

    g = aws_osu
    secrets = g["secrets"]
    function = secrets["function"]
    name = seed_parameter_name(function["sweep"])
    seed = bytes.fromhex(secrets["parameters"][name])
    for r in g["group"]:
        assert "PRIVATE KEY" not in r.user_data
        assert r.account == member_role_name(r.ctx.sweep, function["region"])
        calls = [c for c in g["function_calls"] if c["client"] == r.ctx.me.host]
        assert len(calls) >= 1 and all(c["signed"] and c["status"] == 200 and
                                       c["group"] == r.ctx.group for c in calls), calls
        keys = [c for c in calls if c["path"].endswith("/keys")]
        assert len(keys) == 1 and keys[0]["files"] == ["id_ed25519", "ssh_host_ed25519_key"], calls
        assert not [c for c in g["vms"][r.ctx.role].calls("curl") if "ssm" in c]
        ssh = g["vms"][r.ctx.role].state / "var-lib/spotbench/ssh"
        for key in ("id_ed25519", "ssh_host_ed25519_key"):
            st = (ssh / key).stat()
            assert (st.st_mode & 0o777, st.st_uid) == (0o600, IMAGE_UID), key
            private = serialization.load_ssh_private_key((ssh / key).read_bytes(), None)
            public = private.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
            assert public == public_openssh(seed, r.ctx.group, key)
            arn = f"arn:aws:ssm:{secrets['region']}:{secrets['account']}:parameter{name}"
            assert not evaluate(secrets["policies"].get(r.account, []),
                                Authorization("ssm:GetParameter", arn)), (r.account, name)


def test_every_port_osu_members_listen_on_is_allowed_aws(aws_osu):
    _check_ports_allowed(aws_osu)


def _old_member_rules(rows: list[dict]) -> list[dict]:
    """The rules before this fix: members reached each other on TCP 2222 and 50000-50100."""
    out = []
    for row in rows:
        rules = row["properties"].get("rules")
        member = rules and any("sourceTags" in r["sources"] or
                               "referencedSecurityGroupId" in r["sources"] for r in rules)
        if member:
            row = {**row, "properties": {**row["properties"], "rules": [
                {**rules[0], "protocol": "tcp", "ports": "2222,50000-50100"}]}}
        out.append(row)
    return out


@pytest.fixture(scope="module")
def gcp_osu_old_rules(boots):
    return boots.result("gcp_osu_old_rules")


def test_old_member_ports_hang_the_osu_group_gcp(gcp_osu_old_rules):
    """The same boot behind the old 2222/50000-50100 rules: MPI cannot connect, nothing
    is measured and done is not called within 25 s (the same boot under the declared rules completes)."""
    g = gcp_osu_old_rules
    assert g["finished"] is None and g["done"] == [], g["journal"]
    assert not [r for r in g["store"].read(g["run"].run) if r.metric in ("latency", "bibw")]


def _without_host_rules(text: str) -> str:
    """The cloud-config without the unit's iptables lines: COS's host firewall as it ships."""
    lines = [line for line in text.splitlines(keepends=True) if "/sbin/iptables" not in line]
    assert len(lines) < len(text.splitlines(keepends=True)), "no host firewall rules rendered"
    return "".join(lines)


@pytest.fixture(scope="module")
def gcp_osu_closed_host(boots):
    return boots.result("gcp_osu_closed_host")


def test_cos_host_firewall_as_shipped_hangs_the_osu_group_gcp(gcp_osu_closed_host):
    """The same boot without the rules the unit adds: COS's host firewall (ssh on 22 only)
    drops the peer's sshd on 2222 and MPI's ports although the VPC rules allow them, so
    nothing is measured and done is not called within 25 s."""
    g = gcp_osu_closed_host
    assert g["finished"] is None and g["done"] == [], g["journal"]
    assert not [r for r in g["store"].read(g["run"].run) if r.metric in ("latency", "bibw")]


def test_the_unit_opens_the_host_firewall_to_its_peers_only_gcp(gcp_osu):
    """Each member's unit opens TCP and UDP from its peer's address and the operator's
    ports from IAP's range, before anything else starts, at every boot."""
    for r in gcp_osu["group"]:
        peer = next(m.host for m in r.ctx.members if m.name != r.name)
        pre = r.unit["ExecStartPre"]
        rules = [c for c in pre if c.startswith("/sbin/iptables")]
        assert pre[:len(rules)] == rules == [
            f"/sbin/iptables -w -A INPUT -s {peer}/32 -p tcp -j ACCEPT",
            f"/sbin/iptables -w -A INPUT -s {peer}/32 -p udp -j ACCEPT",
            "/sbin/iptables -w -A INPUT -s 35.235.240.0/20 -p tcp -m multiport --dports 2222 "
            "-j ACCEPT"]
        vm = gcp_osu["vms"][r.ctx.role]
        runs = [c for c in vm.calls("systemd") if c["phase"] == "pre" and "/sbin/iptables" in
                c["argv"][0]]
        assert len(runs) == 3 * vm.boots and all(c["rc"] == 0 for c in runs), runs


def _debug_print(g):  # pragma: no cover - used when a boot fails
    for role, text in g["journal"].items():
        print(f"===== {role}\n{text[-6000:]}")


def _check_outside_run_stops_itself(g: dict) -> None:
    out = g["outside"]
    for role in ("launcher", "peer"):
        o = out[role]
        assert o["docker_runs"] == 1, o  # the workload started ...
        assert o["end"] and o["end"][0]["status"] == 3, (o, g["journal"][role][-3000:])
        assert o["powered_off"], o  # ... and the unit powered the VM off: no more billing
        assert o["seconds"] < 60, o
    assert out["files"] == [], out["files"]  # wrote nothing
    assert out["done"] == []


def test_a_member_booted_outside_a_run_stops_its_vm_gcp(gcp_osu):
    _check_outside_run_stops_itself(gcp_osu)


def test_a_member_restarted_outside_a_run_stops_its_vm_aws(aws_osu):
    _check_outside_run_stops_itself(aws_osu)


GPU_EXAMPLES = {"gcp": "examples/gcp-gpu.yaml", "aws": "examples/aws-tf-gpu.yaml"}


def gpu_boot(cloud: str, lab_dir) -> Callable[[], dict]:
    """The GPU example's chief, booted once (gcp) or twice (aws: the creation boot, then a
    start) in an open run. Renders now; the returned call boots."""
    spec = boot.spec_variant(GPU_EXAMPLES[cloud], lab_dir, trials=1)
    rendered, _ = boot.render(spec, MOCKS)
    chief = next(r for r in rendered if r.ctx.role == "chief")
    function = (aws_ssm.parameter_store(MOCKS.declared, chief.env["AWS_REGION"])
                if cloud == "aws" else None)

    def run() -> dict:
        store = boot.shared_results(lab_dir / f"gpu-{cloud}", IMAGE_UID)
        boot.open_run(store, IMAGE_UID)
        waits = []
        with boot.Lab(lab_dir / f"gpu-{cloud}") as lab:
            if function is not None:
                lab.serve_secrets(function)
            vm = lab.vm(chief.name, chief.ctx.me.host, cloud,
                        boot.localize(chief, store.url, lab.done_url), chief.account, chief.image)
            for _ in range(1 if cloud == "gcp" else 2):  # aws: the creation boot installs only
                lab.boot(vm)
                waits.append(lab.wait(vm, 90))
                if waits[-1] is None:
                    break
        return {"vm": vm, "store": store, "waits": waits, "image": chief.image,
                "unit": chief.unit if cloud == "aws" else None}
    return run


@pytest.fixture(scope="module")
def gpu_boots(boots):
    return boots


@pytest.mark.parametrize("cloud, example", [("gcp", "examples/gcp-gpu.yaml"),
                                            ("aws", "examples/aws-tf-gpu.yaml")])
def test_gpu_group_boots_the_gpu_image_with_the_gpu(cloud, example, gpu_boots):
    """A GPU group's member boots `<registry>/tf-gpu` with its GPU handed to docker (COS:
    the driver installed first and the device nodes; AWS: --gpus all). The lab has no GPU,
    so docker refuses to start it — which is what it must do on a VM without one."""
    assert GPU_EXAMPLES[cloud] == example
    g = gpu_boots.result(f"gpu_{cloud}")
    vm, store = g["vm"], g["store"]
    for waited in g["waits"]:
        assert waited is not None, vm.journal
    runs = [c for c in vm.calls("docker") if c["argv"][0] == "run"]
    assert len(runs) == 1, vm.journal
    run = runs[0]["run"]
    assert run["image"].endswith("/tf-gpu:latest"), run["image"]
    if cloud == "gcp":
        calls = [c["program"] for c in vm.calls() if c["program"] in ("cos-extensions", "docker")]
        assert calls.index("cos-extensions") < calls.index("docker")
        assert "/dev/nvidia0" in run["devices"] and "/dev/nvidiactl" in run["devices"]
    else:
        assert run["gpus"] == "all"
        _check_aws_gpu_image(g["image"], g["unit"], vm.journal)
    end = [c for c in vm.calls("systemd") if c["phase"] == "end"][-1]
    assert end["status"] == 125 and not vm.powered_off  # no GPU here: docker refuses
    assert boot.files(store) == [f"runs/{store.current_run().run}/run.json"]


def _check_aws_gpu_image(image, unit: dict[str, list[str]], journal: str) -> None:
    """An AWS GPU member boots the ECS-optimized AL2023 GPU AMI (the AL2 one reached its end
    of life on 2026-06-30): its dockerd took `--gpus` (nvidia-container-toolkit's hook; the
    CPU image has none) and failed only for want of the kernel module, and the workload's
    unit waits for the unit that loads it."""
    assert image is not None and image.os == "Amazon Linux 2023", image
    assert image.supported(), f"{image.name} is past its end of life ({image.end_of_life})"
    assert image.nvidia_hook and image.driver_unit, image
    assert "nvml error: driver not loaded" in journal, journal
    assert image.driver_unit in " ".join(unit["After"]).split(), unit["After"]
    assert image.driver_unit in " ".join(unit["Wants"]).split(), unit["Wants"]


TINY_TF = {"steps": 20, "batch_size": 16, "dataset": "synthetic", "warmup_steps": 5}


def _key(r: boot.Rendered, group: list[boot.Rendered]) -> str:
    """A member's name in the returned dicts: its role, plus its index when the role repeats."""
    repeated = sum(1 for m in group if m.ctx.role == r.ctx.role) > 1
    return f"{r.ctx.role}{r.ctx.index}" if repeated else r.ctx.role


def tf_boot(cloud: str, example: str, lab_dir, *, lead: str, tag: str,
            timeout: float = 300, **over) -> Callable[[], dict]:
    """The example's first TF group (with `over` replacing spec fields) booted behind its
    declared rules, each member in its own namespace, with the ports it listens on measured;
    on AWS after the creation boot (installs only). Waits for `lead` (the member that records
    and calls done) to end, then stops the others as done would. Renders now; the returned
    call boots and returns what happened."""
    over["workload"] = {**TINY_TF, **over.get("workload", {})}
    spec = boot.spec_variant(example, lab_dir, trials=1, **over)
    rendered, rows = boot.render(spec, MOCKS)
    group = next(iter(boot.groups(rendered).values()))
    # AWS: what the sweep's function answers (the group's storage grant, `/grant`)
    function = (aws_ssm.parameter_store(MOCKS.declared, group[0].env["AWS_REGION"])
                if cloud == "aws" else None)
    return functools.partial(_boot_tf_group, cloud, lab_dir / tag, group, rows, lead, timeout,
                             function)


def _boot_tf_group(cloud: str, work, group: list[boot.Rendered], rows: list[dict], lead: str,
                   timeout: float, function: dict | None = None) -> dict:
    hosts = fw.hosts(rows)
    lab_hosts = [hosts[r.name] for r in group]
    store = boot.shared_results(work, IMAGE_UID)
    run = boot.open_run(store, IMAGE_UID)
    with boot.Lab(work) as lab:
        if function is not None:
            lab.serve_secrets(function)
        vms = {_key(r, group): lab.vm(r.name, r.ctx.me.host, cloud,
                                      boot.localize(r, store.url, lab.done_url), r.account,
                                      r.image)
               for r in group}
        for r in group:
            lab.nft(vms[_key(r, group)], fw.nft_ruleset(rows, hosts[r.name], lab_hosts))
            lab.sample_ports(vms[_key(r, group)])
        creation = {}
        if cloud == "aws":  # creation boot: installs only, then powers off
            for vm in vms.values():
                lab.boot(vm)
            creation = {k: lab.wait(vm, 60) for k, vm in vms.items()}
        for vm in vms.values():
            lab.boot(vm)
        finished = lab.wait(vms[lead], timeout)
        done = lab.done_calls()
        for key, vm in vms.items():
            if key != lead:
                lab.stop(vm)
        return {"finished": finished, "done": done, "store": store, "run": run, "rows": rows,
                "group": group, "hosts": {_key(r, group): hosts[r.name] for r in group},
                "ports": {k: v.ports() for k, v in vms.items()}, "vms": vms,
                "creation": creation, "journal": {k: v.journal for k, v in vms.items()}}


@pytest.fixture(scope="module")
def gcp_tf(boots):
    """examples/gcp-tf.yaml's first group (chief, ps, worker) booted behind its declared
    rules, each member in its own namespace, with the ports it listens on measured."""
    return boots.result("gcp_tf")


def test_tf_parameter_server_group_boots_trains_and_calls_done_gcp(gcp_tf):
    g = gcp_tf
    assert len(g["done"]) == 1, {k: v[-3000:] for k, v in g["journal"].items()}
    assert g["done"][0]["body"]["group"] == g["group"][0].ctx.group and "started_at" in g["done"][0]["body"]
    records = g["store"].read(g["run"].run)
    steps = [r for r in records if r.metric == "steps"]
    assert steps and steps[0].value >= 20 and not any(r.preempted for r in records)


def test_every_port_tf_members_listen_on_is_allowed_gcp_and_aws(gcp_tf):
    """Measured in the GCP boot; the AWS example declares its rules for the same roles."""
    aws_rendered, aws_rows = rendered_example("examples/aws-tf-gpu.yaml")
    aws_group = next(iter(boot.groups(aws_rendered).values()))
    aws_hosts = {r.ctx.role: fw.hosts(aws_rows)[r.name] for r in aws_group}
    checked = 0
    for role, ports in gcp_tf["ports"].items():
        for p in ports:
            if p["ip"].startswith("127."):
                continue
            for rows, hosts in ((gcp_tf["rows"], gcp_tf["hosts"]), (aws_rows, aws_hosts)):
                for other, src in hosts.items():
                    if other != role and role in hosts:
                        checked += 1
                        assert fw.allowed(rows, src, hosts[role], p["protocol"], p["port"]), (
                            f"{role} listens on {p['protocol']}/{p['port']} ({p['program']}); "
                            f"{other} may not reach it")
    assert checked >= 6, gcp_tf["ports"]


def rootkeys_boot(lab_dir) -> Callable[[], dict]:
    """gcp-osu's peer booted alone in an open run, its unit without the chown of the keys."""
    group, _, secrets = _osu_group("gcp", lab_dir, "examples/gcp-osu.yaml")
    peer = next(r for r in group if r.ctx.role == "peer")

    def run() -> dict:
        store = boot.shared_results(lab_dir / "gcp-rootkeys", IMAGE_UID)
        boot.open_run(store, IMAGE_UID)
        text = boot.localize(peer, store.url, "http://10.255.255.254:8080/done")
        chown = next(line for line in text.splitlines() if "/bin/chown" in line)
        with boot.Lab(lab_dir / "gcp-rootkeys") as lab:
            lab.serve_secrets(secrets)
            vm = lab.vm(peer.name, peer.ctx.me.host, "gcp", text.replace(chown + "\n", ""),
                        peer.account)
            lab.boot(vm)
            return {"vm": vm, "waited": lab.wait(vm, 90)}
    return run


@pytest.fixture(scope="module")
def gcp_rootkeys(boots):
    return boots.result("gcp_rootkeys")


def test_root_owned_keys_stop_the_osu_peer_gcp(gcp_rootkeys):
    """The counter-check of the key handover: the same boot without the unit's chown
    (cloud-init leaves the keys root-owned 0600) fails as the image's uid reads them."""
    vm = gcp_rootkeys["vm"]
    assert gcp_rootkeys["waited"] is not None
    end = [c for c in vm.calls("systemd") if c["phase"] == "end"][-1]
    assert end["status"] != 0 and "PermissionError" in vm.journal, vm.journal[-3000:]


@pytest.fixture(scope="module")
def gcp_tf_allreduce(boots):
    """examples/gcp-tf-allreduce.yaml's first group: two workers, all-reduce; worker 0 is
    the chief of MultiWorkerMirroredStrategy: it records and calls done."""
    return boots.result("gcp_tf_allreduce")


def _check_tf_trained_and_done(g: dict, strategy: str) -> None:
    journals = {k: v[-3000:] for k, v in g["journal"].items()}
    assert len(g["done"]) == 1, journals
    assert g["done"][0]["body"]["group"] == g["group"][0].ctx.group and "started_at" in g["done"][0]["body"]
    records = g["store"].read(g["run"].run)
    assert records and not any(r.preempted for r in records), (records, journals)
    steps = next(r for r in records if r.metric == "steps")
    assert steps.value == TINY_TF["steps"] and steps.metadata["strategy"] == strategy
    assert {r.metric for r in records} >= {"steps_per_s", "examples_per_s", "test_accuracy"}


def test_tf_allreduce_group_boots_trains_and_calls_done_gcp(gcp_tf_allreduce):
    g = gcp_tf_allreduce
    assert [r.ctx.role for r in g["group"]] == ["worker", "worker"]
    _check_tf_trained_and_done(g, "multi_worker_mirrored")
    assert g["done"][0]["client"] == g["hosts"]["worker0"].ip  # worker 0 calls done
    assert g["finished"] == 0, g["journal"]["worker0"][-3000:]
    meta = next(r for r in g["store"].read(g["run"].run) if r.metric == "steps").metadata
    assert meta["workers"] == 2 and meta["cluster_shape"] == "2 workers"


def _check_members_reach(g: dict, least: int) -> None:
    """Every port a member listened on (measured, not loopback) is open to each other
    member of its group by the declared rules."""
    checked = 0
    for key, ports in g["ports"].items():
        for p in ports:
            if p["ip"].startswith("127.") or p["ip"] == "::1":
                continue
            for other, src in g["hosts"].items():
                if other != key:
                    checked += 1
                    assert fw.allowed(g["rows"], src, g["hosts"][key], p["protocol"], p["port"]), (
                        f"{key} listens on {p['protocol']}/{p['port']} ({p['program']}); "
                        f"{other} may not reach it")
    assert checked >= least, g["ports"]


def test_every_port_tf_allreduce_members_listen_on_is_allowed_gcp(gcp_tf_allreduce):
    _check_members_reach(gcp_tf_allreduce, least=2)


@pytest.fixture(scope="module")
def aws_tf(boots):
    """examples/aws-tf-cpu.yaml's parameter-server group (chief, ps, one worker) through the
    user-data path: the creation boot installs only, the next boot trains."""
    return boots.result("aws_tf")


def test_tf_parameter_server_group_boots_trains_and_calls_done_aws(aws_tf):
    g = aws_tf
    assert [r.ctx.role for r in g["group"]] == ["chief", "ps", "worker"]
    assert g["creation"] == {"chief": 0, "ps": 0, "worker": 0}, g["journal"]
    chief = g["vms"]["chief"]
    runs = [c for c in chief.calls("docker") if c["argv"][0] == "run"]
    assert len(runs) == 1, ("the creation boot must not run the workload", chief.calls())
    assert runs[0]["run"]["image"].endswith("/tf-cpu:latest"), runs[0]["run"]["image"]
    _check_tf_trained_and_done(g, "parameter_server")
    call = g["done"][0]
    assert call["auth"].startswith("AWS4-HMAC-SHA256 Credential=ASIASIMULATEDKEY0001/")
    assert call["client"] == g["hosts"]["chief"].ip
    ecr = [c for c in chief.calls("curl") if "ecr" in c]
    assert ecr and all(all(c["ecr"].values()) for c in ecr)


def test_every_port_tf_members_listen_on_is_allowed_aws(aws_tf):
    _check_members_reach(aws_tf, least=6)


@pytest.fixture(scope="module")
def aws_tf_allreduce(boots):
    """examples/aws-tf-cpu.yaml's all-reduce group (two workers; worker 0 records and calls
    done) through the user-data path: the creation boot installs only, the next boot trains."""
    return boots.result("aws_tf_allreduce")


def test_tf_allreduce_group_boots_trains_and_calls_done_aws(aws_tf_allreduce):
    g = aws_tf_allreduce
    assert [r.ctx.role for r in g["group"]] == ["worker", "worker"]
    assert g["creation"] == {"worker0": 0, "worker1": 0}, g["journal"]
    for key, vm in g["vms"].items():  # one workload run each: none in the creation boot
        runs = [c for c in vm.calls("docker") if c["argv"][0] == "run"]
        assert len(runs) == 1, (key, vm.calls())
        assert runs[0]["run"]["image"].endswith("/tf-cpu:latest"), runs[0]["run"]["image"]
    _check_tf_trained_and_done(g, "multi_worker_mirrored")
    call = g["done"][0]
    assert call["auth"].startswith("AWS4-HMAC-SHA256 Credential=ASIASIMULATEDKEY0001/")
    assert call["client"] == g["hosts"]["worker0"].ip  # worker 0 calls done
    assert g["finished"] == 0, g["journal"]["worker0"][-3000:]
    meta = next(r for r in g["store"].read(g["run"].run) if r.metric == "steps").metadata
    assert meta["workers"] == 2 and meta["cluster_shape"] == "2 workers"


def test_every_port_tf_allreduce_members_listen_on_is_allowed_aws(aws_tf_allreduce):
    _check_members_reach(aws_tf_allreduce, least=2)


# ---- the boots, started together ------------------------------------------------------------
def _gcp_tf(lab_dir) -> Callable[[], dict]:
    data = boot.yaml.safe_load((boot.ROOT / "examples/gcp-tf.yaml").read_text())
    return tf_boot("gcp", "examples/gcp-tf.yaml", lab_dir, lead="chief", tag="gcp-tf",
                   matrix={**data["matrix"], "workers": [1]})


# fixture name → (lane, prepare(lab_dir) → the lab part), in the order they start. Light
# boots wait more than they compute (the blocked group's bounded hang, a member that fails
# at once); the TF groups import TensorFlow in every member.
BOOTS: dict[str, tuple[str, Callable[..., Callable[[], dict]]]] = {
    "gcp_osu_old_rules": ("light", lambda d: osu_boot(
        "gcp", "examples/gcp-osu.yaml", d, rules=_old_member_rules, timeout=25, tag="-old",
        outside=False)),
    "gcp_osu_closed_host": ("light", lambda d: osu_boot(
        "gcp", "examples/gcp-osu.yaml", d, edit=_without_host_rules, timeout=25,
        tag="-closed", outside=False)),
    "gcp_osu": ("heavy", lambda d: osu_boot("gcp", "examples/gcp-osu.yaml", d)),
    "aws_osu": ("heavy", lambda d: osu_boot("aws", "examples/aws-osu.yaml", d)),
    "gcp_rootkeys": ("light", rootkeys_boot),
    "gpu_gcp": ("light", lambda d: gpu_boot("gcp", d)),
    "gpu_aws": ("light", lambda d: gpu_boot("aws", d)),
    "gcp_tf": ("heavy", _gcp_tf),
    "gcp_tf_allreduce": ("heavy", lambda d: tf_boot(
        "gcp", "examples/gcp-tf-allreduce.yaml", d, lead="worker0", tag="gcp-tf-allreduce")),
    "aws_tf": ("heavy", lambda d: tf_boot(
        "aws", "examples/aws-tf-cpu.yaml", d, lead="chief", tag="aws-tf",
        workload={"workers": 1},
        matrix={"machine_type": ["c5.xlarge"], "strategy": ["parameter_server"]})),
    "aws_tf_allreduce": ("heavy", lambda d: tf_boot(
        "aws", "examples/aws-tf-cpu.yaml", d, lead="worker0", tag="aws-tf-allreduce",
        matrix={"machine_type": ["c5.xlarge"], "strategy": ["multi_worker_mirrored"]})),
}
LANES = {"light": 2, "heavy": 2}


def _needed(items, module) -> list[str]:
    """The boots the selected tests of this module read (their fixtures; the GPU test's
    `cloud` parameter names its boot)."""
    names: set[str] = set()
    for item in items:
        if getattr(item, "module", None) is not module:
            continue
        names |= set(item.fixturenames)
        if "gpu_boots" in item.fixturenames:
            names.add(f"gpu_{item.callspec.params['cloud']}")
    return [n for n in BOOTS if n in names]


@pytest.fixture(scope="module", autouse=True)
def boots(request):
    """Start every boot the selected tests need, first thing, side by side (the static
    checks then run while they boot)."""
    background = boot.Background(LANES)
    try:
        for name in _needed(request.session.items, request.module):
            lane, prepare = BOOTS[name]
            # lab_dir skips without root: then the boots' tests skip, the static ones run
            background.start(name, lane,
                             lambda p=prepare: p(request.getfixturevalue("lab_dir")))
        yield background
    finally:
        background.close()


def test_host_firewall_rules_name_addresses_only_gcp():
    """The peers' addresses land in a root unit: anything but an address is refused, and a
    group with no MPI port opens nothing beyond its peers (COS admits 22 already)."""
    assert host_firewall(["10.0.0.3"], ["22"]) == [
        "/sbin/iptables -w -A INPUT -s 10.0.0.3/32 -p tcp -j ACCEPT",
        "/sbin/iptables -w -A INPUT -s 10.0.0.3/32 -p udp -j ACCEPT"]
    with pytest.raises(ValueError):
        host_firewall(["10.0.0.3 -j ACCEPT; touch /pwned"], [])
