"""`schedule: once` under the Pulumi mocks of both clouds (issue #39): the stack declares
no scheduler and no VMs (only templates: the VMs are made at start and deleted by `done`),
and its results bucket alone is kept by the `pulumi destroy` that ends the run."""

from __future__ import annotations

import pulumi

from spotbench.spec import load_spec
from tests.infra.conftest import snapshot
from tests.infra.test_aws import INSTANCE as AWS_INSTANCE
from tests.infra.test_aws import SCHEDULE as AWS_SCHEDULE
from tests.infra.test_aws import SPOT as AWS_SPOT
from tests.infra.test_gcp import CONFIG, INSTANCE as GCP_INSTANCE, JOB as GCP_JOB

GCP_TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
AWS_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
GCP_BUCKET = "gcp:storage/bucket:Bucket"
AWS_BUCKET = "aws:s3/bucket:Bucket"


def _declared(fn, config: dict[str, str]) -> tuple[dict[str, str], dict[str, bool]]:
    """What `fn` declares under the mocks: name → type, and name → retain_on_delete (read
    from each registration's options by a stack transformation)."""
    retained: dict[str, bool] = {}

    def program() -> None:
        def record(args: pulumi.ResourceTransformationArgs):
            retained[args.name] = bool(args.opts.retain_on_delete)
            return None
        pulumi.runtime.register_stack_transformation(record)
        fn()

    return {d.name: d.type for d in snapshot(program, config).declared}, retained


def _gcp(**over):
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec({"name": "once", "cloud": "gcp", "zone": "us-central1-a",
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["n2-standard-2"]},
                      "trials": 2, "deadline": "20m", **over})
    return spec, _declared(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)), CONFIG)


def _aws(**over):
    from infra.aws import AwsSweep, AwsSweepArgs

    spec = load_spec({"name": "once", "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]},
                      "trials": 2, "results": "s3://res-bucket/runs/once", "deadline": "45m",
                      "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/spotbench/osu:1",
                      **over})
    return spec, _declared(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)), {})


def test_first_hour_once_gcp_declares_no_scheduler_no_vms_and_keeps_only_the_bucket():
    spec, (types, retained) = _gcp(schedule="once")
    assert spec.run_once and spec.lifecycle == "created"
    kinds = set(types.values())
    assert GCP_JOB not in kinds and GCP_INSTANCE not in kinds
    assert GCP_TEMPLATE in kinds  # the VMs are made at start from these, deleted by done
    kept = sorted(name for name, keep in retained.items() if keep)
    assert [types.get(name) for name in kept] == [GCP_BUCKET]  # the results, nothing else
    # the same spec on a cron: the pair of jobs, and no resource kept past destroy
    _, (cron_types, cron_retained) = _gcp(schedule={"cron": "0 3 * * *"})
    assert list(cron_types.values()).count(GCP_JOB) == 2
    assert not any(cron_retained.values())


def test_first_hour_once_aws_declares_no_schedules_no_instances_and_keeps_only_the_bucket():
    spec, (types, retained) = _aws(schedule="once")
    assert spec.lifecycle == "created"
    kinds = set(types.values())
    assert AWS_SCHEDULE not in kinds and AWS_INSTANCE not in kinds and AWS_SPOT not in kinds
    assert AWS_TEMPLATE in kinds
    kept = sorted(name for name, keep in retained.items() if keep)
    assert [types.get(name) for name in kept] == [AWS_BUCKET]
    _, (cron_types, cron_retained) = _aws(schedule={"cron": "0 3 * * 1-5"})
    assert list(cron_types.values()).count(AWS_SCHEDULE) == 2
    assert not any(cron_retained.values())


def test_first_hour_once_the_program_exports_the_once_mode(run_program, tmp_path):
    spec = tmp_path / "once.yaml"
    spec.write_text("name: once\ncloud: gcp\nzone: us-central1-a\nworkload: {name: osu}\n"
                    "matrix: {machine_type: [n2-standard-2]}\nschedule: once\n")
    mocks = run_program({**CONFIG, "spotbench:spec": str(spec)})
    assert not mocks.of_type(GCP_JOB) and not mocks.of_type(GCP_INSTANCE)
