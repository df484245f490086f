"""Boot fidelity of the `container` workload with an image that knows nothing of spotbench,
on both clouds: the rendered cloud-config / user-data is valid; booted outside a run it powers
off without running the user's image; inside a run the user's image runs the command (as
another uid, without the member context), then spotbench's runner image stores what it
printed and wrote and calls `done`; a VM stopped while the command runs stores what it had,
as preempted (GCP; the script is the same on AWS). The command also asks the metadata server
for the VM's token (`ATTACK`) and must get none, while the runner keeps the VM's identity."""

from __future__ import annotations

import time

import pytest

from spotbench.images import IMAGE_UID
from tests.fidelity import aws_ssm, boot, hub
from tests.fidelity.conftest import need_tools
from tests.infra.conftest import MOCKS

pytestmark = pytest.mark.fidelity

USER_IMAGE = "docker.io/library/busybox:1.36"  # a public image: no spotbench inside
# the attack (issue #24 item 10): the VM's cloud identity from the metadata server, as GCE's
# access token, then as EC2's IMDSv2 session token (the first step to the role's credentials)
ATTACK = ("t=0; "
          "curl -fsS -m 5 -H 'Metadata-Flavor: Google' "
          "http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token "
          ">/dev/null && t=1; "
          "curl -fsS -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "
          "http://169.254.169.254/latest/api/token >/dev/null && t=1; "
          "echo metadata_token=$t")
FAST = ("echo latency=1.5 us; "
        "echo '{\"metric\": \"ops\", \"value\": 7, \"unit\": \"ops/s\", \"labels\": {\"n\": 2}}' "
        "> \"$SPOTBENCH_RESULTS_DIR/out.jsonl\"; "
        "if [ -n \"${SPOTBENCH_CONTEXT:-}\" ]; then echo context_visible=1; "
        "else echo context_visible=0; fi; echo uid=$(id -u); echo greeting=$GREETING; " + ATTACK)
SLOW = "echo warmup=2 s; sleep 60; echo never=1"


def _vm(lab: boot.Lab, r: boot.Rendered, store) -> boot.VM:
    """A member's VM whose docker can run USER_IMAGE (a public image, no spotbench inside)."""
    vm = lab.vm(r.name, r.ctx.me.host, r.cloud, boot.localize(r, store.url, lab.done_url), r.account,
                r.image)
    (vm.state / "user-images").write_text(USER_IMAGE + "\n")
    return vm


def _docker_runs(vm: boot.VM, since: int = 0) -> list[dict]:
    return [c["run"] for c in vm.calls("docker")[since:] if c["argv"][0] == "run"]


def _boot_outside_a_run(lab: boot.Lab, vm: boot.VM, store) -> dict:
    lab.boot(vm)
    lab.wait(vm, 60)
    return {"powered_off": vm.powered_off, "docker": [r["image"] for r in _docker_runs(vm)],
            "files": boot.files(store)}


def _boot_in_a_run(lab: boot.Lab, vm: boot.VM, store) -> dict:
    """Open a run (what the start function does), boot the VM, wait for its unit to end."""
    run = boot.open_run(store, IMAGE_UID)
    calls_before = len(vm.calls("docker"))
    lab.boot(vm)
    return {"run": run, "finished": lab.wait(vm, 90), "done": lab.done_calls(),
            "docker": _docker_runs(vm, calls_before), "journal": vm.journal}


@pytest.fixture(scope="module")
def user_image_boot(lab_dir):
    need_tools("cloud-init", "shellcheck")
    spec = boot.spec_variant(
        "examples/gcp-container-cron.yaml", lab_dir, image=USER_IMAGE,
        workload={"command": ["sh", "-c", FAST], "env": {"GREETING": "42"}, "secret_env": ["GREETING"]},
        matrix={"machine_type": ["e2-standard-2"],
                "command": [["sh", "-c", FAST], ["sh", "-c", SLOW]]})
    rendered, rows = boot.render(spec, MOCKS)
    by_cmd = {r.ctx.params["command"][-1]: r for r in rendered}
    fast, slow = by_cmd[FAST], by_cmd[SLOW]
    secrets = boot.secret_store(MOCKS.declared)  # the spec's env: fetched, never in metadata
    work = lab_dir / "user-image"
    store = boot.shared_results(work, IMAGE_UID)
    out: dict = {"fast": fast, "store": store, "rows": rows}
    with boot.Lab(work) as lab:
        lab.serve_secrets(secrets)
        vms = {key: _vm(lab, r, store) for key, r in (("fast", fast), ("slow", slow))}
        out["outside"] = _boot_outside_a_run(lab, vms["fast"], store)  # creation boot: no run
        out.update(_boot_in_a_run(lab, vms["fast"], store))
        run = out["run"]
        lab.boot(vms["slow"])  # then stopped while the command sleeps
        stdout = vms["slow"].state / "var-lib" / "spotbench" / "bench" / "stdout.txt"
        deadline = time.monotonic() + 60
        while not (stdout.exists() and "warmup" in stdout.read_text()):
            assert time.monotonic() < deadline, vms["slow"].journal
            time.sleep(0.2)
        stopped_at = time.monotonic()
        lab.stop(vms["slow"], timeout=40)
        out["stop_s"] = time.monotonic() - stopped_at
        out["slow_journal"] = vms["slow"].journal
        out["done_after_stop"] = lab.done_calls()
        out["records"] = store.read(run.run)
    return out


def test_user_image_cloud_config_is_valid_gcp(user_image_boot):
    r = user_image_boot["fast"]
    assert not boot.schema_errors(r.user_data), boot.schema_errors(r.user_data)
    scripts = [boot.shell_of(r)] + [f["content"] for f in r.doc["write_files"]
                                     if f["content"].startswith("#!/bin/sh")]
    assert len(scripts) == 3  # the unit's lines, the user-image script, fetch-keys (the env)
    for script in scripts:
        assert not boot.shellcheck_errors(script), (script, boot.shellcheck_errors(script))


def _check_outside_a_run(outside: dict) -> None:
    assert outside["powered_off"]
    assert len(outside["docker"]) == 1 and outside["docker"][0].endswith("/runner:latest")
    assert outside["files"] == [] or all("runs/" not in f for f in outside["files"])


def test_outside_a_run_the_user_image_never_runs_gcp(user_image_boot):
    _check_outside_a_run(user_image_boot["outside"])


def _check_ran_stored_and_done(g: dict, member: boot.Rendered) -> None:
    """The runner checked the run, the user's image ran the command, the runner stored what
    it printed and wrote and called done for `member`'s group."""
    assert g["finished"] == 0, g["journal"][-4000:]
    runs = g["docker"]  # runner check, the user's image with the command, runner collect
    assert [(r["image"].rsplit("/", 1)[-1], r["command"]) for r in runs] == [
        ("runner:latest", ["check", "/var/lib/spotbench/bench"]),
        ("busybox:1.36", ["sh", "-c", FAST]),
        ("runner:latest", ["collect", "/var/lib/spotbench/bench", "--exit-code", "0"])]
    assert runs[1]["image"] == USER_IMAGE and runs[1]["env_file"] == "/var/lib/spotbench/user.env"
    assert runs[1]["volumes"] == ["/var/lib/spotbench/bench/results:/var/lib/spotbench/bench/results"]
    assert runs[0]["env_file"] == runs[2]["env_file"] == "/var/lib/spotbench/env"
    assert len(g["done"]) == 1 and g["done"][0]["body"]["group"] == member.ctx.group and "started_at" in g["done"][0]["body"]
    records = [r for r in g["store"].read(g["run"].run) if r.group == member.ctx.group]
    got = {r.metric: (r.value, r.unit) for r in records}
    assert got == {"latency": (1.5, "us"), "ops": (7.0, "ops/s"), "context_visible": (0.0, ""),
                   "uid": (65534.0, ""), "greeting": (42.0, ""),
                   "metadata_token": (0.0, "")}, g["journal"][-3000:]
    assert next(r for r in records if r.metric == "ops").metadata["labels"] == {"n": 2}
    assert not any(r.preempted for r in records)
    raw = [f for f in boot.files(g["store"]) if member.ctx.group in f and f.endswith("stdout.txt")]
    assert len(raw) == 1 and "latency=1.5 us" in (boot.Path(g["store"].root) / raw[0]).read_text()


def test_the_user_image_runs_the_command_and_the_runner_stores_and_calls_done_gcp(user_image_boot):
    _check_ran_stored_and_done(user_image_boot, user_image_boot["fast"])


def _check_no_identity(g: dict, member: boot.Rendered) -> None:
    """The user's command asked the metadata server for the VM's token and got none (its
    stdout, stored by the runner), while the runner, on the host network, still got the
    VM's identity for `done` (GCP: the ID token; AWS: IMDSv2 credentials)."""
    raw = next(f for f in boot.files(g["store"])
               if member.ctx.group in f and f.endswith("stdout.txt"))
    stdout = (boot.Path(g["store"].root) / raw).read_text()
    assert "metadata_token=0" in stdout, stdout
    user_run = g["docker"][1]
    assert user_run["network"] == "bridge", user_run  # not the host's network
    assert len(g["done"]) == 1 and g["done"][0]["client"] == member.ctx.me.host


@pytest.mark.security
def test_the_users_command_gets_no_cloud_identity_but_the_runner_keeps_it_gcp(user_image_boot):
    g = user_image_boot
    _check_no_identity(g, g["fast"])
    assert g["done"][0]["auth"] == f"Bearer {hub.GCP_TOKEN}"


def test_a_vm_stopped_mid_command_stores_what_it_had_as_preempted_gcp(user_image_boot):
    g = user_image_boot
    slow = [r for r in g["records"] if r.group != g["fast"].ctx.group]
    assert [(r.metric, r.value, r.preempted) for r in slow] == [("warmup", 2.0, True)], (
        g["slow_journal"][-3000:])
    assert slow[0].metadata.get("interrupted") == "stopped"
    assert len(g["done_after_stop"]) == 1  # the stopped VM does not call done (as on local)
    assert g["stop_s"] < 28, "collect must fit in the unit's TimeoutStopSec"


def test_preview_shows_the_runner_and_the_users_image_gcp(user_image_boot):
    vms = [r for r in user_image_boot["rows"] if r["type"] == "gcp:compute/instance:Instance"]
    assert len(vms) == 2
    for row in vms:
        runner, user = row["properties"]["images"]
        assert runner.endswith("/spotbench-nightly-cpu/runner:latest") and user == USER_IMAGE


def test_user_data_runs_the_same_steps_and_may_pull_the_runner_aws():
    """Valid user-data running the same script, the runner's ECR repository declared and
    pullable by the instance role, the preview naming both images (booted below)."""
    need_tools("cloud-init", "shellcheck")
    rendered, rows = boot.render("examples/aws-container.yaml", MOCKS)
    r = rendered[0]
    assert not boot.schema_errors(r.user_data), boot.schema_errors(r.user_data)
    script = r.file("/run-user-image")["content"]
    for text in (boot.shell_of(r), script):
        assert not boot.shellcheck_errors(text), boot.shellcheck_errors(text)
    assert r.unit["ExecStart"] == ["/bin/sh /var/lib/spotbench/run-user-image"]
    assert "public.ecr.aws/docker/library/python:3.12-slim python -c" in script
    repos = [row["name"] for row in rows if row["type"] == "aws:ecr/repository:Repository"]
    assert repos == ["aws-byo-registry-runner"]
    member = next(row for row in rows if row["name"] == r.name and "images" in row["properties"])
    runner, user = member["properties"]["images"]
    assert runner.endswith(".amazonaws.com/spotbench-aws-byo/runner:latest")
    assert user == "public.ecr.aws/docker/library/python:3.12-slim"
    pulls = [st["Resource"] for row in rows if row["type"] == "aws:iam/rolePolicy:RolePolicy"
             for st in (row["properties"].get("policy") or {}).get("Statement", [])
             if st.get("Sid") == "PullImage"]
    assert pulls and all(p.endswith(":repository/spotbench-aws-byo/*") for p in pulls), pulls


@pytest.fixture(scope="module")
def aws_user_image_boot(lab_dir):
    """examples/aws-container.yaml with USER_IMAGE and the FAST command, one member: the
    creation boot (installs only), a capacity restart outside any run, then a boot in a run."""
    need_tools("cloud-init", "shellcheck")
    spec = boot.spec_variant(
        "examples/aws-container.yaml", lab_dir, image=USER_IMAGE, trials=1,
        workload={"command": ["sh", "-c", FAST], "env": {"GREETING": "42"}, "secret_env": ["GREETING"]},
        matrix={"machine_type": ["c5.large"]})
    rendered, _ = boot.render(spec, MOCKS)
    [member] = rendered
    parameters = aws_ssm.parameter_store(MOCKS.declared, member.env["AWS_REGION"])  # the env
    work = lab_dir / "user-image-aws"
    store = boot.shared_results(work, IMAGE_UID)
    out: dict = {"member": member, "store": store}
    with boot.Lab(work) as lab:
        lab.serve_secrets(parameters)
        vm = _vm(lab, member, store)
        lab.boot(vm)  # creation boot: installs only, runs nothing
        out["creation"] = {"status": lab.wait(vm, 60), "docker": _docker_runs(vm),
                           "powered_off": vm.powered_off}
        out["outside"] = _boot_outside_a_run(lab, vm, store)  # EC2 restarts it: no run open
        out.update(_boot_in_a_run(lab, vm, store))
        out["ecr"] = [c["ecr"] for c in vm.calls("curl") if "ecr" in c]
    return out


def test_the_creation_boot_installs_only_aws(aws_user_image_boot):
    creation = aws_user_image_boot["creation"]
    assert creation["status"] == 0 and creation["docker"] == [], creation


def test_outside_a_run_the_user_image_never_runs_aws(aws_user_image_boot):
    _check_outside_a_run(aws_user_image_boot["outside"])


def test_the_user_image_runs_the_command_and_the_runner_stores_and_calls_done_aws(aws_user_image_boot):
    g = aws_user_image_boot
    _check_ran_stored_and_done(g, g["member"])
    assert g["done"][0]["auth"].startswith("AWS4-HMAC-SHA256 Credential=ASIASIMULATEDKEY0001/")
    assert g["done"][0]["client"] == g["member"].ctx.me.host
    # the runner comes from the stack's ECR repository: logged in with the instance role
    assert g["ecr"] and all(all(login.values()) for login in g["ecr"]), g["ecr"]


@pytest.mark.security
def test_the_users_command_gets_no_cloud_identity_but_the_runner_keeps_it_aws(aws_user_image_boot):
    g = aws_user_image_boot
    _check_no_identity(g, g["member"])
    assert g["done"][0]["auth"].startswith("AWS4-HMAC-SHA256 Credential=ASIASIMULATEDKEY0001/")
