"""Issue #37: every limit on what a deploy sends is checked when the spec is planned and
previewed (`spotbench.limits`, measured by the Pulumi program under mocks), and the created
lifecycle's template document grows linearly with its group.

The edge: each limit passes exactly at its maximum and refuses one over, naming the field,
the size and the limit. For the rendered sizes the limit is set to the size the program
really rendered (the boot document the mocks recorded): at it the spec plans, one below it
the same spec is refused — so the size measured is the document sent, not an estimate."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from spotbench import limits
from spotbench.cli import app
from tests.infra.test_gcp import CONFIG, _snapshot

INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
EC2 = "aws:ec2/instance:Instance"
LAMBDA = "aws:lambda/function:Function"


# ---- the checker ---------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(limits.LIMITS))
def test_limits_each_limit_passes_at_its_edge_and_refuses_one_over(key):
    limit = limits.LIMITS[key]
    assert limit.source.startswith("https://") and limit.max > 0
    limits.require(key, "the field", limit.max)  # exactly at the limit: within
    with pytest.raises(limits.LimitError) as over:
        limits.require(key, "the field", limit.max + 1)
    text = str(over.value)
    assert text.startswith(f"the field: {limit.max + 1:,} {limit.unit}, over the limit of "
                           f"{limit.max:,} {limit.unit} on {limit.what}")
    assert limit.source in text


def test_limits_collecting_gathers_every_field_once_instead_of_raising():
    with limits.collecting() as found:
        limits.require("ec2.user_data", "a", 16_385)
        limits.require("ec2.user_data", "a", 16_386)  # the same field again: once
        limits.require("ec2.user_data", "b", 16_384)  # at the limit: nothing
        limits.require("lambda.env", "c", 5_000)
    assert [(e.field, e.limit.key) for e in found] == [("a", "ec2.user_data"), ("c", "lambda.env")]
    with pytest.raises(limits.LimitError):  # outside the block it raises again
        limits.require("lambda.env", "c", 5_000)


def test_limits_logical_operators_are_counted_as_iam_does():
    assert limits.logical_operators('a == "x" || b == "y" && !c') == 3
    assert limits.logical_operators('resource.name != "a||b && !c"') == 0  # in a string; `!=`
    assert limits.logical_operators("") == 0


# ---- rendered sizes, measured by the program (plan and preview refuse) ----------------------
def _spec_file(tmp_path, spec: dict, name: str = "spec.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _preview(spec: dict, tmp_path):
    from infra.preview import preview

    return preview(_spec_file(tmp_path, spec, "preview.yaml"))


AWS_TF = {"name": "lim", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
          "workload": {"name": "tf-mnist", "strategy": "multi_worker_mirrored", "workers": 2},
          "matrix": {"machine_type": ["c5.xlarge"]}, "trials": 1, "deadline": "30m",
          "schedule": {"cron": "0 3 * * *"}}


def _largest_user_data(declared) -> int:
    return max(len(d.inputs["userData"].encode()) for d in declared if d.type == EC2)


def test_limits_aws_user_data_is_measured_as_rendered_and_refused_past_16_kb(tmp_path, monkeypatch):
    """The largest member's real user data: at the limit it plans, one byte less refuses."""
    size = _largest_user_data(_preview(AWS_TF, tmp_path))
    assert 0 < size < 16_384
    path = _spec_file(tmp_path, AWS_TF)
    monkeypatch.setitem(limits.LIMITS, "ec2.user_data",
                        limits.Limit("ec2.user_data", "EC2 user data", size, "bytes", "https://x"))
    assert _cli("plan", str(path)).exit_code == 0
    monkeypatch.setitem(limits.LIMITS, "ec2.user_data",
                        limits.Limit("ec2.user_data", "EC2 user data", size - 1, "bytes", "https://x"))
    result = _cli("plan", str(path))
    assert result.exit_code == 2, result.output
    assert f"user data: {size:,} bytes, over the limit of {size - 1:,} bytes" in result.output


def test_limits_aws_a_large_group_is_refused_at_plan_with_the_16_kb_named(tmp_path):
    """Each member's user data lists every peer: 200 workers pass EC2's 16 KB (the deploy
    failed at RunInstances); plan says so before anything is sent."""
    spec = {**AWS_TF, "workload": {**AWS_TF["workload"], "workers": 200}}
    result = _cli("plan", str(_spec_file(tmp_path, spec)))
    assert result.exit_code == 2, result.output
    assert "user data: " in result.output and "over the limit of 16,384 bytes on EC2 user data" in result.output
    assert "more past the same limit (ec2.user_data)" in result.output  # 200 members, 3 shown
    preview = _cli("preview", str(_spec_file(tmp_path, spec)))
    assert preview.exit_code == 2 and "over the limit of 16,384 bytes" in preview.output


def test_limits_aws_lambda_environment_is_measured_and_refused_past_4_kb(tmp_path):
    """The functions carry the whole spec in their environment: a spec with long labels
    passes Lambda's 4 KB of variables; 45 labels of 63 characters stay within 50 tags."""
    labels = {f"team-{i:02d}-{'k' * 12}": "v" * 63 for i in range(45)}
    result = _cli("plan", str(_spec_file(tmp_path, {**AWS_TF, "labels": labels})))
    assert result.exit_code == 2, result.output
    assert "function lim-start: environment variables" in result.output
    assert "over the limit of 4,096 bytes on a Lambda function's environment" in result.output
    assert "tags:" not in result.output  # 45 + 5 tags: at EC2's 50
    few = {f"team-{i:02d}": "v" * 63 for i in range(10)}
    assert _cli("plan", str(_spec_file(tmp_path, {**AWS_TF, "labels": few}))).exit_code == 0


def test_limits_aws_tags_per_resource_are_counted_with_spotbenchs_own(tmp_path):
    """A member carries the spec's labels + managed-by, sweep, group, role and Name: 45
    labels make 50 tags (EC2's limit), 46 make 51."""
    at = {f"k{i}": "v" for i in range(45)}
    assert _cli("plan", str(_spec_file(tmp_path, {**AWS_TF, "labels": at}))).exit_code == 0
    over = {**at, "k45": "v"}
    result = _cli("plan", str(_spec_file(tmp_path, {**AWS_TF, "labels": over})))
    assert result.exit_code == 2 and "tags: 51 tags, over the limit of 50 tags" in result.output


GCP_TF = {"name": "lim", "cloud": "gcp", "zone": "us-central1-a", "gcp": {"project": "p"},
          "workload": {"name": "tf-mnist", "strategy": "multi_worker_mirrored", "workers": 2},
          "matrix": {"machine_type": ["n1-standard-4"]}, "trials": 1, "deadline": "30m",
          "schedule": {"cron": "0 3 * * *"}}


def test_limits_gcp_metadata_is_measured_as_rendered(tmp_path, monkeypatch):
    """The VM's real `user-data`: at the limit it plans, one byte less refuses (value), and
    the metadata's total counts the other keys too."""
    declared = _preview(GCP_TF, tmp_path)
    docs = [d.inputs["metadata"] for d in declared if d.type == INSTANCE]
    size = max(len(m["user-data"].encode()) for m in docs)
    total = max(sum(len(k.encode()) + len(v.encode()) for k, v in m.items()) for m in docs)
    assert total > size > 0
    path = _spec_file(tmp_path, GCP_TF)
    for key, edge in (("gce.metadata.value", size), ("gce.metadata.total", total)):
        monkeypatch.setitem(limits.LIMITS, key, limits.Limit(key, "metadata", edge, "bytes", "https://x"))
        assert _cli("plan", str(path)).exit_code == 0, key
        monkeypatch.setitem(limits.LIMITS, key, limits.Limit(key, "metadata", edge - 1, "bytes", "https://x"))
        result = _cli("plan", str(path))
        assert result.exit_code == 2 and f": {edge:,} bytes, over the limit of {edge - 1:,}" in result.output
        monkeypatch.setitem(limits.LIMITS, key, limits.Limit(key, "metadata", 10**9, "bytes", "https://x"))


def test_limits_gcp_iam_condition_with_too_many_zones_is_refused_at_plan(tmp_path):
    """The created lifecycle's create grant has two terms per candidate zone of a region (+
    the template's; the subnet is granted on itself, not in the condition): seven zones in
    one region make 14 operators, past IAM's 12; six pass. (The catalog's regions have at
    most 4 zones; a region newer than the catalog is taken with a warning, and its zones
    counted.)"""
    zones = [f"me-north9-{z}" for z in "abcdefg"]
    spec = {**GCP_TF, "zone": None, "region": "me-north9", "lifecycle": "created", "zones": zones}
    result = _cli("plan", str(_spec_file(tmp_path, spec)))
    assert result.exit_code == 2, result.output
    assert "IAM condition 'lim created instances only': 14 operators, over the limit of 12" in result.output
    assert _cli("plan", str(_spec_file(tmp_path, {**spec, "zones": zones[:6]}))).exit_code == 0


def test_limits_aws_grant_session_policy_is_measured_at_plan(tmp_path, monkeypatch):
    """The grant's STS session policy (what functions/aws_grants.py sends) for the sweep's
    longest group id: a results prefix long enough passes 2,048 characters and is refused."""
    from infra.aws.grant_policy import check_grant_policy
    from spotbench.spec import load_spec

    spec = {**AWS_TF, "results": "s3://my-bucket/" + "p" * 40}
    with limits.collecting() as found:
        check_grant_policy(load_spec(spec), load_spec(spec).plan(), "p" * 40)
    assert found == []
    long = {**AWS_TF, "results": "s3://my-bucket/" + "p" * 400}  # the prefix is in 5 statements
    result = _cli("plan", str(_spec_file(tmp_path, long)))
    assert result.exit_code == 2, result.output
    assert "its grant's session policy" in result.output
    assert "over the limit of 2,048 characters on an STS session policy" in result.output


# ---- the created template's document: linear in the group -----------------------------------
def _template_bytes(workers: int) -> int:
    from infra.gcp import GcpSweep, GcpSweepArgs
    from spotbench.spec import load_spec

    spec = load_spec({**GCP_TF, "zone": None, "region": "us-central1", "lifecycle": "created",
                      "zones": ["us-central1-a"],
                      "workload": {**GCP_TF["workload"], "workers": workers}})
    snap = _snapshot(CONFIG, lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))
    [worker] = [t for t in snap.of_type(TEMPLATE)]  # all-reduce: one role
    return len(worker.inputs["metadata"]["user-data"].encode())


def test_limits_created_template_document_grows_linearly_with_the_group():
    """One template serves every member of its role: its document holds the group's env once
    and a few lines per member. At 32 and 64 workers the growth per member stays the same
    (quadratic: each member's whole env listed every peer, so doubling the group nearly
    quadrupled the document: 64 workers made ~1 MB, past GCE's 256 KiB)."""
    small, double, quadruple = (_template_bytes(n) for n in (16, 32, 64))
    first, second = double - small, quadruple - double  # 16 → 32, 32 → 64 members
    assert second <= 2.2 * first, (small, double, quadruple)
    assert quadruple < 64 * 1024  # 64 members: far below the 256 KiB a value may hold


def test_limits_aws_lambda_package_and_layer_sizes_are_measured(tmp_path, monkeypatch):
    """The functions' code and layer as Lambda unpacks them: 250 MB together."""
    from infra.aws.functions import check_package, tree_bytes

    (tmp_path / "functions").mkdir()
    (tmp_path / "functions" / "main.py").write_bytes(b"x" * 1000)
    layer = tmp_path / "layer" / "python"
    layer.mkdir(parents=True)
    (layer / "dep.py").write_bytes(b"y" * 500)
    (layer / "__pycache__").mkdir()
    (layer / "__pycache__" / "dep.pyc").write_bytes(b"z" * 10**6)  # not what Lambda counts
    assert tree_bytes(tmp_path / "functions", tmp_path / "layer") == 1500
    monkeypatch.setitem(limits.LIMITS, "lambda.unzipped",
                        limits.Limit("lambda.unzipped", "code and layers", 1500, "bytes", "https://x"))
    check_package(tmp_path, tmp_path / "layer")  # at the limit
    (layer / "more.py").write_bytes(b"y")
    with pytest.raises(limits.LimitError, match="the functions' code and layer, unzipped: 1,501 bytes"):
        check_package(tmp_path, tmp_path / "layer")
