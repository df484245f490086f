"""Boot fidelity: the rendered cloud-config (GCP) and user-data (AWS) of the examples are
valid (`cloud-init schema`, `shellcheck`) and, executed as a VM would (tests/fidelity/boot.py),
boot a two-member OSU group that completes and calls `done` over HTTP."""

from __future__ import annotations

import pytest

from spotbench.images import IMAGE_UID
from tests.fidelity import boot
from tests.fidelity.conftest import need_tools
from tests.infra.conftest import MOCKS

pytestmark = pytest.mark.fidelity

EXAMPLES = {"gcp": ["examples/gcp-osu.yaml", "examples/gcp-tf.yaml", "examples/gcp-gpu.yaml"],
            "aws": ["examples/aws-osu.yaml", "examples/aws-tf-gpu.yaml"]}
SMALL_OSU = {"max_size": 4096, "iterations": 200, "iterations_large": 50, "warmup": 20,
             "warmup_large": 5, "bw_iterations": 10, "bw_iterations_large": 5, "bw_warmup": 2,
             "bw_warmup_large": 1, "window": 16, "large_size": 1024, "implementation": "mpi4py"}


def _check_static(example: str) -> None:
    need_tools("cloud-init", "shellcheck")
    rendered = boot.render(example, MOCKS)
    assert rendered, f"{example}: no instances declared"
    first = {}
    for r in rendered:  # members differ only in their context: check one per group shape
        first.setdefault((r.ctx.group.split("-t")[0], r.ctx.role), r)
    for r in first.values():
        assert not boot.schema_errors(r.user_data), (r.name, boot.schema_errors(r.user_data))
        scripts = [boot.shell_of(r)] + [f["content"] for f in r.doc["write_files"]
                                         if f["content"].startswith("#!/bin/sh")]
        for script in scripts:
            assert not boot.shellcheck_errors(script), (r.name, script,
                                                        boot.shellcheck_errors(script))


@pytest.mark.parametrize("example", EXAMPLES["gcp"])
def test_rendered_cloud_config_is_valid_gcp(example):
    _check_static(example)


@pytest.mark.parametrize("example", EXAMPLES["aws"])
def test_rendered_user_data_is_valid_aws(example):
    _check_static(example)


def _osu_group(cloud: str, lab_dir, example: str) -> list[boot.Rendered]:
    spec = boot.spec_variant(example, lab_dir, workload=SMALL_OSU, trials=1,
                             matrix={"machine_type": [
                                 boot.yaml.safe_load((boot.ROOT / example).read_text())
                                 ["matrix"]["machine_type"][0]]})
    rendered = boot.render(spec, MOCKS)
    group = next(iter(boot.groups(rendered).values()))
    assert [r.ctx.role for r in group] == ["launcher", "peer"]
    return group


def boot_osu_group(cloud: str, example: str, lab_dir, *, edit=lambda text: text,
                   timeout: float = 150) -> dict:
    """Boot both members of the example's first OSU group; returns what happened."""
    group = _osu_group(cloud, lab_dir, example)
    results_url, (store, run) = boot.shared_results(lab_dir / cloud, IMAGE_UID)
    with boot.Lab(lab_dir / cloud) as lab:
        vms = {r.ctx.role: lab.vm(r.name, r.ctx.me.host, cloud,
                                  edit(boot.localize(r, results_url, lab.done_url)))
               for r in group}
        if cloud == "aws":  # creation boot: installs only
            for vm in vms.values():
                lab.boot(vm)
            for vm in vms.values():
                assert lab.wait(vm, 60) == 0, vm.journal
        lab.boot(vms["peer"])
        lab.boot(vms["launcher"])
        finished = lab.wait(vms["launcher"], timeout)
        done = lab.done_calls()
        lab.stop(vms["peer"])  # what done does: stop the group
        return {"finished": finished, "done": done, "vms": vms, "store": store, "run": run,
                "group": group, "journal": {k: v.journal for k, v in vms.items()}}


@pytest.fixture(scope="module")
def gcp_osu(lab_dir):
    return boot_osu_group("gcp", "examples/gcp-osu.yaml", lab_dir)


def test_osu_group_boots_completes_and_calls_done_gcp(gcp_osu):
    g = gcp_osu
    assert g["finished"] == 0, g["journal"]["launcher"][-4000:]
    assert len(g["done"]) == 1, g["journal"]
    call = g["done"][0]
    assert call["body"] == {"group": g["group"][0].ctx.group}
    assert call["auth"] == "Bearer sim-gcp-identity-token"
    assert call["client"] == g["group"][0].ctx.me.host
    records = g["store"].read(g["run"].run)
    assert {r.metric for r in records} == {"latency", "bibw"}, (_debug_print(g), records[:1])
    assert not any(r.preempted for r in records)


@pytest.fixture(scope="module")
def aws_osu(lab_dir):
    return boot_osu_group("aws", "examples/aws-osu.yaml", lab_dir)


def test_osu_group_boots_completes_and_calls_done_aws(aws_osu):
    g = aws_osu
    launcher = g["vms"]["launcher"]
    runs = [c for c in launcher.calls("docker") if c["argv"][0] == "run"]
    assert len(runs) == 1, ("the creation boot must not run the workload", _debug_print(g), launcher.calls())
    assert len(g["done"]) == 1, (_debug_print(g), g["done"])
    call = g["done"][0]
    assert call["body"] == {"group": g["group"][0].ctx.group}
    assert call["auth"].startswith("AWS4-HMAC-SHA256 Credential=ASIASIMULATEDKEY0001/")
    assert call["client"] == g["group"][0].ctx.me.host
    # ECR login with the instance role through curl --aws-sigv4, no aws CLI
    ecr = [c for c in launcher.calls("curl") if "ecr" in c]
    assert ecr and all(all(c["ecr"].values()) for c in ecr)
    records = g["store"].read(g["run"].run)
    assert {r.metric for r in records} == {"latency", "bibw"}, (_debug_print(g), records[:1])
    assert not any(r.preempted for r in records)


def _debug_print(g):  # pragma: no cover - used when a boot fails
    for role, text in g["journal"].items():
        print(f"===== {role}\n{text[-6000:]}")
