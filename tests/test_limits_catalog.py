"""Issue #37: the catalog comes from the clouds' own APIs. `spotbench prices` lists the
machine types (architecture, vCPUs, GPUs: maker, model, count; zones) from GCE's
`machineTypes` aggregatedList and EC2's DescribeInstanceTypes/Offerings (here: the local
Google endpoint's fake project, moto), stores them beside the price tables, and the spec
checks read them over the shipped 2024-06 table, which stays the offline fallback."""

from __future__ import annotations

import pytest
from moto import mock_aws

from spotbench import catalog
from spotbench.catalog import live
from spotbench.spec.checks import check
from spotbench.spec import SweepSpec
from tests.clouds.google_endpoint import GoogleEndpoint

GCP_SPEC = {"name": "cat", "cloud": "gcp", "zone": "us-central1-a", "gcp": {"project": "proj"},
            "workload": {"name": "osu"}, "matrix": {"machine_type": ["n1-standard-4"]},
            "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTBENCH_CATALOG_DIR", str(tmp_path / "catalog"))
    return tmp_path / "catalog"


def _findings(spec: dict, machine: str):
    found = check(SweepSpec.model_validate({**spec, "matrix": {**spec["matrix"], "machine_type": [machine]}}))
    return [m for _, v, m in found.errors if v == machine], [m for _, v, m in found.warnings if v == machine]


def test_limits_catalog_gcp_machine_types_come_from_machinetypes_aggregatedlist(cache, monkeypatch):
    from spotbench.clouds.gcp.catalog import CatalogFetchError, fetch

    endpoint = GoogleEndpoint()
    try:
        project = endpoint.project
        project.machine_types = {"us-central1-a": {"n1-standard-4": 4, "n2-standard-128": 128,
                                                   "g2-standard-200": 200, "t2a-standard-4": 4},
                                 "us-central1-b": {"n1-standard-4": 4}}
        project.machine_details = {
            "g2-standard-200": {"architecture": "X86_64", "accelerators": [
                {"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 12}]},
            "t2a-standard-4": {"architecture": "ARM64"},
        }
        url = endpoint.url_for("user:deployer@example.com")
        got = fetch(["us-central1"], project="proj", api_endpoint=url)
        with pytest.raises(CatalogFetchError, match="--project"):
            fetch(["us-central1"], project=None, api_endpoint=url)
    finally:
        endpoint.stop()
    # every page read (2 types a page), zones gathered per type
    assert set(got.machines) == {"n1-standard-4", "n2-standard-128", "g2-standard-200", "t2a-standard-4"}
    assert got.machines["n1-standard-4"].zones == ("us-central1-a", "us-central1-b")
    assert got.machines["g2-standard-200"].gpus == (live.Gpu("nvidia", "nvidia-l4", 12),)
    assert got.machines["t2a-standard-4"].architecture == "arm64"
    # before the refresh: the shipped rules (a newer size is a warning, its GPUs unknown)
    assert _findings(GCP_SPEC, "n2-standard-128")[1]
    assert catalog.vm_gpus(catalog.GCP_CATALOG, "g2-standard-200", None, 0) == ("nvidia-l4", catalog.UNKNOWN_COUNT)
    live.save(got)
    assert (cache / "gcp.json").is_file()
    errors, warnings = _findings(GCP_SPEC, "n2-standard-128")
    assert not errors and warnings and "listed by gcp's API" in warnings[0]  # listed; unpriced
    assert "not in spotbench's catalog" not in warnings[0]
    assert catalog.vm_gpus(catalog.GCP_CATALOG, "g2-standard-200", None, 0) == ("nvidia-l4", 12)
    errors, _ = _findings(GCP_SPEC, "t2a-standard-4")
    assert errors and "arm64 machine (gcp's API" in errors[0]
    # a type the API does not list: said so, with the date of the refresh
    _, warnings = _findings(GCP_SPEC, "n2-standard-96")
    assert f"not among gcp's machine types as its API listed them on {got.date}" in warnings[0]
    assert _findings(GCP_SPEC, "n1-standard-4") == ([], [])  # listed and priced


AWS_SPEC = {"name": "cat", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5.xlarge"]},
            "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}


def test_limits_catalog_aws_instance_types_come_from_describeinstancetypes(cache, monkeypatch):
    from spotbench.clouds.aws.catalog import fetch

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        got = fetch(["us-east-1"])
    g4dn, graviton = (got.machines[t] for t in ("g4dn.xlarge", "m6g.large"))
    assert g4dn.architecture == "x86_64" and g4dn.vcpus == 4
    assert [(g.maker, g.count) for g in g4dn.gpus] == [("nvidia", 1)]
    assert "us-east-1a" in g4dn.zones and "us-east-1e" not in g4dn.zones  # moto's offerings
    assert graviton.architecture == "arm64"
    live.save(got)
    errors, warnings = _findings(AWS_SPEC, "m6g.large")
    assert errors and "arm64 machine (aws's API" in errors[0]
    # a GPU that is not NVIDIA's, as the API names its maker (moto lists NVIDIA GPUs only)
    got.machines["g9ad.xlarge"] = live.MachineInfo("g9ad.xlarge", "x86_64", 4,
                                                   (live.Gpu("amd", "Radeon Pro V999", 1),))
    live.save(got)
    errors, _ = _findings(AWS_SPEC, "g9ad.xlarge")
    assert errors and "carries 1 × amd Radeon Pro V999 (aws's API" in errors[0]
    assert catalog.vm_gpus(catalog.AWS_CATALOG, "g4dn.xlarge", None, 0) == ("nvidia-tesla-t4", 1)
    assert _findings(AWS_SPEC, "c5.xlarge") == ([], [])


def test_limits_catalog_unreadable_cache_falls_back_to_the_shipped_table(cache):
    cache.mkdir(parents=True)
    (cache / "gcp.json").write_text("{not json")
    assert live.load("gcp") is None
    _, warnings = _findings(GCP_SPEC, "n2-standard-128")
    assert "not in spotbench's catalog (shipped 2024-06; `spotbench prices --cloud gcp`" in warnings[0]


def test_limits_catalog_spotbench_prices_refreshes_the_machine_types_beside_the_prices(
        cache, monkeypatch, tmp_path):
    """The command: `spotbench prices --cloud gcp --project P` stores the prices and the
    machine types; without a project the prices are stored and the catalog refresh says why not."""
    from typer.testing import CliRunner

    from spotbench.cli import app
    from tests.clouds.fake_billing import FakeBillingCatalog
    from tests.test_prices_fetch import billing_skus

    monkeypatch.setenv("SPOTBENCH_PRICES_DIR", str(tmp_path / "prices"))
    monkeypatch.delenv("SPOTBENCH_GCP_PROJECT", raising=False)
    endpoint = GoogleEndpoint(billing=FakeBillingCatalog(skus={"6F81-5844-456A": billing_skus()}))
    endpoint.project.machine_types = {"us-central1-a": {"n1-standard-4": 4, "n2-standard-128": 128}}
    monkeypatch.setenv("SPOTBENCH_GCP_API_ENDPOINT", endpoint.url_for("user:me@example.com"))
    try:
        bare = CliRunner().invoke(app, ["prices", "--cloud", "gcp", "--region", "us-central1"])
        assert bare.exit_code == 0, bare.output
        assert "gcp: machine types not refreshed" in bare.stderr and "--project" in bare.stderr
        assert not (cache / "gcp.json").exists()
        result = CliRunner().invoke(app, ["prices", "--cloud", "gcp", "--region", "us-central1",
                                          "--project", "proj"])
    finally:
        endpoint.stop()
    assert result.exit_code == 0, result.output
    assert "gcp: 2 machine types from Compute Engine machineTypes.aggregatedList" in result.stderr
    assert set(live.load("gcp").machines) == {"n1-standard-4", "n2-standard-128"}
    assert (tmp_path / "prices" / "gcp.csv").is_file()
