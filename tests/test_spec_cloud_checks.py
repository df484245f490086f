"""`plan` refuses what the cloud would refuse, with "did you mean" from the shipped catalogs.

Specs are written as users write them (YAML files) and run through the CLI; the same
`load_spec` is what the Pulumi program reads (infra/config.py), so `pulumi up` fails alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.spec import SpecError, load_spec, spec_warnings

GCP = """\
name: s
cloud: gcp
zone: {zone}
workload: {{name: osu}}
matrix:
  machine_type: [{machine}]
{extra}
schedule: {{cron: "0 3 * * *"}}
deadline: 30m
"""
AWS = GCP.replace("cloud: gcp\nzone: {zone}", "cloud: aws\nregion: {region}\nzone: {zone}")


def plan(tmp_path: Path, text: str):
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    return CliRunner().invoke(app, ["plan", str(f)])


def gcp(tmp_path, machine="n1-standard-2", zone="us-central1-a", extra=""):
    return plan(tmp_path, GCP.format(machine=machine, zone=zone, extra=extra))


def aws(tmp_path, machine="c5.large", zone="us-east-1a", region="us-east-1", extra=""):
    return plan(tmp_path, AWS.format(machine=machine, zone=zone, region=region, extra=extra))


def refused(res, *needles: str) -> str:
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr
    return res.stderr


def test_a_valid_spec_plans(tmp_path):
    res = gcp(tmp_path)
    assert res.exit_code == 0 and res.stderr == "", res.stderr


@pytest.mark.parametrize("machine, needles", [
    ("n1-standrd-2", ["matrix.machine_type[0] = 'n1-standrd-2'", "did you mean 'n1-standard-2'?"]),
    ("n1-standard", ["did you mean"]),
    ("c5.large", ["not a GCP machine type"]),
])
def test_unknown_gcp_machine_types(tmp_path, machine, needles):
    refused(gcp(tmp_path, machine=machine), *needles)


def test_aws_instance_type_typo(tmp_path):
    refused(aws(tmp_path, machine="c5n.larg"), "'larg' is not an EC2 size", "did you mean 'c5n.large'?")


def test_a_type_newer_than_the_catalog_is_a_warning_naming_it(tmp_path):
    res = gcp(tmp_path, machine="n2-standard-128")
    assert res.exit_code == 0, res.stderr
    assert "warning:" in res.stderr and "'n2-standard-128'" in res.stderr
    assert "not in spotbench's catalog" in res.stderr and "--prices" in res.stderr


@pytest.mark.parametrize("zone, needles", [
    ("us-east-1a", ["zone = 'us-east-1a'", "looks like a zone of aws, not gcp"]),
    ("us-central1-z", ["region us-central1 has the zones us-central1-a, us-central1-b"]),
    ("us-centrall-a", ["not a gcp zone name", "did you mean"]),
])
def test_gcp_zones(tmp_path, zone, needles):
    refused(gcp(tmp_path, zone=zone), *needles)


def test_aws_zone_and_region_of_the_wrong_cloud(tmp_path):
    refused(aws(tmp_path, region="us-central1", zone="us-central1-a"),
            "region = 'us-central1': looks like a region of gcp", "zone = 'us-central1-a'")
    refused(aws(tmp_path, zone="us-east-2a"), "zone = 'us-east-2a': is not in region 'us-east-1'")


def test_a_newer_region_is_a_warning(tmp_path):
    res = gcp(tmp_path, zone="mars-north1-a")
    assert res.exit_code == 0 and "a newer region?" in res.stderr


@pytest.mark.parametrize("machine, accel, count, needles", [
    ("e2-standard-4", "nvidia-tesla-t4", 1, ["GCP attaches GPUs only to N1", "e2 cannot take one"]),
    ("n1-standard-4", "nvidia-tesla-t5", 1, ["did you mean 'nvidia-tesla-t4'?"]),
    ("n1-standard-4", "nvidia-tesla-t4", 3, ["3 × nvidia-tesla-t4 per VM is not offered"]),
    ("n1-standard-4", "nvidia-l4", 1, ["nvidia-l4 does not attach to N1; it comes with g2"]),
    ("g2-standard-4", "nvidia-tesla-t4", 1, ["g2 machine types come with nvidia-l4"]),
])
def test_gpus_on_families_that_cannot_take_them(tmp_path, machine, accel, count, needles):
    extra = f"  accelerator: [{accel}]\n  accelerator_count: [{count}]"
    refused(gcp(tmp_path, machine=machine, extra=extra), "matrix.accelerator", *needles)


def test_gpu_on_the_right_family_plans(tmp_path):
    extra = "  accelerator: [nvidia-tesla-t4]\n  accelerator_count: [4]"
    assert gcp(tmp_path, machine="n1-standard-8", extra=extra).exit_code == 0
    refused(aws(tmp_path, extra="  accelerator: [nvidia-tesla-t4]"), "EC2 c5.large has no GPU")


def test_placement_vs_machine_family(tmp_path):
    refused(gcp(tmp_path, extra="placement: compact"),
            "placement = 'compact'", "not supported for machine type 'n1-standard-2'")
    assert gcp(tmp_path, machine="c2-standard-8", extra="placement: compact").exit_code == 0
    # EC2: a spot instance that stops on interruption never goes into a placement group
    refused(aws(tmp_path, machine="c5n.18xlarge", extra="  placement: [compact, spread]\nspot: true"),
            "matrix.placement = 'compact'", "matrix.placement = 'spread'", "provisioning: standard")
    assert aws(tmp_path, machine="c5n.18xlarge",
               extra="  placement: [compact]\nprovisioning: standard").exit_code == 0


def test_deadline_not_shorter_than_the_cron_gap(tmp_path):
    text = GCP.format(machine="n1-standard-2", zone="us-central1-a", extra="").replace(
        '"0 3 * * *"', '"0 */2 * * *"').replace("30m", "2h")
    refused(plan(tmp_path, text), "deadline = '7200s'", "not shorter than the gap", "(120 min)")


def test_eventbridge_cron_rules_on_aws(tmp_path):
    text = AWS.format(machine="c5.large", zone="us-east-1a", region="us-east-1", extra="").replace(
        '"0 3 * * *"', '"0 3 1 * 1"')
    refused(plan(tmp_path, text), "schedule.cron", "EventBridge allows one")


def test_role_machine_types_are_checked(tmp_path):
    text = GCP.format(machine="n1-standard-2", zone="us-central1-a", extra="").replace(
        "workload: {name: osu}", "workload: {name: tf-mnist, workers: 1}\nrole_machine_types: {chief: n1-standad-4}")
    refused(plan(tmp_path, text), "role_machine_types.chief = 'n1-standad-4'", "did you mean 'n1-standard-4'?")


def test_a_cloud_spec_without_machine_type_is_a_message_not_a_traceback(tmp_path):
    text = GCP.format(machine="", zone="us-central1-a", extra="").replace("  machine_type: []\n", "")
    assert "machine_type" not in text
    refused(plan(tmp_path, text.replace("matrix:\n", "matrix: {}\n")), "matrix.machine_type: required for cloud gcp")


def test_all_problems_at_once_and_the_pulumi_program_refuses_the_same(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(GCP.format(machine="n1-standrd-2", zone="us-east-1a", extra=""))
    with pytest.raises(SpecError) as err:
        load_spec(f)
    assert [p for p, _, _ in err.value.problems] == ["zone", "matrix.machine_type[0]"]
    import pulumi

    from infra.config import spec_from_config

    class Config:
        def get_object(self, key):
            return None

        def get(self, key):
            return str(f)

    with pytest.raises(pulumi.RunError, match="did you mean 'n1-standard-2'"):
        spec_from_config(Config())


def test_warnings_are_available_to_callers():
    spec = load_spec({"name": "s", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n2-standard-128"]}})
    fields = [p for p, _, _ in spec_warnings(spec)]
    assert fields == ["matrix.machine_type[0]", "schedule"]


# ---- CPU architecture and GPU vendor: the images are x86_64 and the GPU image is CUDA ----
@pytest.mark.parametrize("machine", ["c7g.large", "t4g.micro", "m6gd.xlarge", "hpc7g.4xlarge",
                                     "c8g.large"])
def test_aws_graviton_types_are_refused_as_arm64(tmp_path, machine):
    refused(aws(tmp_path, machine=machine), f"matrix.machine_type[0] = '{machine}'", "arm64",
            "AWS Graviton", "x86_64 only")


@pytest.mark.parametrize("machine", ["t2a-standard-4", "c4a-standard-8", "n4a-standard-2"])
def test_gcp_arm_series_are_refused_as_arm64(tmp_path, machine):
    refused(gcp(tmp_path, machine=machine), f"matrix.machine_type[0] = '{machine}'", "arm64")


def test_an_arm_role_machine_type_is_refused_too(tmp_path):
    extra = "role_machine_types: {peer: c7g.large}"
    refused(aws(tmp_path, extra=extra), "role_machine_types.peer", "arm64")


@pytest.mark.parametrize("machine", ["c7i.large", "c6in.large", "c7a.large", "m5zn.large",
                                     "g4dn.xlarge"])
def test_aws_x86_types_with_g_in_their_name_still_plan(tmp_path, machine):
    res = aws(tmp_path, machine=machine)
    assert res.exit_code == 0, res.stderr


def test_a_gpu_that_is_not_nvidia_is_refused(tmp_path):
    res = aws(tmp_path, machine="g4ad.xlarge", extra="  accelerator: [amd-radeon-v520]")
    refused(res, "matrix.accelerator", "amd GPU", "CUDA")
