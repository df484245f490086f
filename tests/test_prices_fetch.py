"""`spotbench prices`' fetchers against the doubles: EC2 spot price history from moto_server,
on-demand from a local Price List API (tests/aws_price_list.py), GCE from the Cloud Billing
Catalog on the local Google endpoint (tests/clouds/fake_billing.py), every page read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotbench.clouds.aws import prices as aws_prices
from spotbench.clouds.gcp import prices as gcp_prices
from tests.aws_price_list import PriceList, ec2_product
from tests.clouds.fake_billing import FakeBillingCatalog, sku
from tests.clouds.google_endpoint import GoogleEndpoint
from tests.moto_server import MotoServer

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
AMERICAS = ["us-central1", "us-east1"]


def billing_skus() -> list[dict]:
    return [
        sku("N1 Predefined Instance Core running in Americas", 0.031611, AMERICAS, group="N1Standard"),
        sku("N1 Predefined Instance Ram running in Americas", 0.004237, AMERICAS, unit="GiBy.h",
            group="N1Standard"),
        sku("Spot Preemptible N1 Predefined Instance Core running in Americas", 0.00698, AMERICAS,
            usage="Preemptible", group="N1Standard"),
        sku("Spot Preemptible N1 Predefined Instance Ram running in Americas", 0.000936, AMERICAS,
            usage="Preemptible", unit="GiBy.h", group="N1Standard"),
        sku("N1 Predefined Instance Core running in EMEA", 0.0348, ["europe-west4"], group="N1Standard"),
        sku("N1 Predefined Instance Core Commitment v1: Cpu in Americas for 1 Year", 0.019, AMERICAS,
            usage="Commit1Yr"),
        sku("Nvidia Tesla T4 GPU running in Americas", 0.35, AMERICAS, group="GPU"),
        sku("Spot Preemptible Nvidia Tesla T4 GPU running in Americas", 0.11, AMERICAS,
            usage="Preemptible", group="GPU"),
        sku("Balanced PD Capacity", 0.1, AMERICAS, unit="GiBy.mo", group="SSD", free_first=True),
        sku("Licensing Fee for Windows Server on VM with 2 VCPU", 0.08, ["global"]),
    ]


@pytest.fixture
def google(monkeypatch):
    endpoint = GoogleEndpoint(billing=FakeBillingCatalog(
        skus={"6F81-5844-456A": billing_skus()}, page_size=3))
    monkeypatch.setenv("SPOTBENCH_GCP_API_ENDPOINT", endpoint.url_for("user:me@example.com"))
    yield endpoint
    endpoint.stop()


def test_prices_gcp_reads_every_page_of_the_billing_catalog_and_prices_machines_per_vcpu_and_gib(google):
    pages: list[str] = []
    table = gcp_prices.fetch(["us-central1"], {"machine": ["n1-standard-4", "n2-standard-2"],
                                                       "gpu": ["nvidia-tesla-t4"]},
                             progress=pages.append, now=NOW)
    got = {(q.kind, q.item, q.provisioning): q.usd for q in table.quotes}
    # 4 vCPU × core + 15 GiB × RAM, on-demand and spot; n2 has no SKUs here: no row
    assert got[("machine", "n1-standard-4", "on-demand")] == pytest.approx(4 * 0.031611 + 15 * 0.004237)
    assert got[("machine", "n1-standard-4", "spot")] == pytest.approx(4 * 0.00698 + 15 * 0.000936)
    assert ("machine", "n2-standard-2", "on-demand") not in got
    assert got[("gpu", "nvidia-tesla-t4", "spot")] == pytest.approx(0.11)
    assert got[("disk", "pd-balanced", "")] == pytest.approx(0.1)  # the paid tier, not the free one
    assert {q.region for q in table.quotes} == {"us-central1"} and table.cloud == "gcp"
    tokens = [q.get("pageToken", [""])[0] for q in google.billing.requests]
    assert tokens == ["", "3", "6", "9"], "the client must follow nextPageToken to the last page"
    assert len(pages) == 4 and pages[-1].endswith("10 SKUs so far")
    assert all(c.path == "/v1/services/6F81-5844-456A/skus" for c in google.calls)


def test_prices_gcp_an_error_answer_names_the_fix(monkeypatch):
    endpoint = GoogleEndpoint(billing=FakeBillingCatalog(skus={}))  # Compute Engine unknown: 404
    monkeypatch.setenv("SPOTBENCH_GCP_API_ENDPOINT", endpoint.url_for("user:me@example.com"))
    try:
        with pytest.raises(gcp_prices.PriceFetchError, match="HTTP 404.*spotbench prices --cloud gcp"):
            gcp_prices.fetch(["us-central1"], {"machine": ["n1-standard-4"]})
    finally:
        endpoint.stop()


def test_prices_gcp_a_refused_billing_api_says_how_to_enable_it(monkeypatch):
    denied = "serviceusage.services.use"  # what Google answers when the API is not enabled
    endpoint = GoogleEndpoint(billing=FakeBillingCatalog(skus={"6F81-5844-456A": billing_skus()}),
                              authorize=lambda call: denied)
    monkeypatch.setenv("SPOTBENCH_GCP_API_ENDPOINT", endpoint.url_for("user:me@example.com"))
    try:
        with pytest.raises(gcp_prices.PriceFetchError,
                           match="gcloud services enable cloudbilling.googleapis.com"):
            gcp_prices.fetch(["us-central1"], {"machine": ["n1-standard-4"]})
    finally:
        endpoint.stop()


@pytest.fixture
def aws(moto_url, monkeypatch):
    MotoServer.fresh_account(moto_url, monkeypatch, "us-east-1")
    price_list = PriceList(products=[
        ec2_product("c5.large", "us-east-1", 0.085),
        ec2_product("c5.large", "us-east-1", 0.085, marketoption="OnDemand"),
        ec2_product("c5.large", "us-east-1", 0.12, operatingSystem="Windows"),
        ec2_product("c5.large", "eu-west-1", 0.096),
        ec2_product("c5.xlarge", "us-east-1", 0.17),
    ], page_size=1)
    with price_list as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", moto_url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", url)
        yield price_list


def test_prices_aws_on_demand_from_the_price_list_and_spot_per_zone_from_moto(aws):
    table = aws_prices.fetch(["us-east-1"], {"machine": ["c5.large", "c5.xlarge"]}, now=NOW)
    on_demand = {q.item: q.usd for q in table.quotes if q.provisioning == "on-demand"}
    assert on_demand == {"c5.large": 0.085, "c5.xlarge": 0.17}  # Linux only, this region only
    spot = [q for q in table.quotes if q.provisioning == "spot" and q.item == "c5.large"]
    zones = {q.zone for q in spot if q.zone}
    assert len(zones) >= 2 and all(z.startswith("us-east-1") for z in zones)
    region_row = [q for q in spot if not q.zone]
    assert len(region_row) == 1 and region_row[0].usd == max(q.usd for q in spot if q.zone)
    assert table.sources == (aws_prices.ON_DEMAND_SOURCE, aws_prices.SPOT_SOURCE)


def test_prices_aws_price_list_request_is_the_documented_one(aws):
    aws_prices.fetch(["us-east-1"], {"machine": ["c5.large"]}, now=NOW)
    call = aws.calls[0]
    assert (call["method"], call["path"], call["target"]) == ("POST", "/", "AWSPriceListService.GetProducts")
    assert call["content_type"] == "application/x-amz-json-1.1"
    assert call["authorization"].startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "/us-east-1/pricing/aws4_request" in call["authorization"]
    body = call["body"]
    assert body["ServiceCode"] == "AmazonEC2" and body["FormatVersion"] == "aws_v1"
    fields = {f["Field"]: f["Value"] for f in body["Filters"]}
    assert fields["instanceType"] == "c5.large" and fields["regionCode"] == "us-east-1"
    assert {f["Type"] for f in body["Filters"]} == {"TERM_MATCH"}
    # two Linux products, one per page: the client followed NextToken
    assert [c["body"].get("NextToken") for c in aws.calls] == [None, "1"]


def test_prices_aws_without_credentials_says_how_to_get_them(monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", "http://127.0.0.1:9")
    with pytest.raises(aws_prices.PriceFetchError, match="no AWS credentials: run `aws configure`"):
        aws_prices.fetch(["us-east-1"], {"machine": ["c5.large"]}, now=NOW)


def test_prices_gcp_per_vcpu_and_gib_reproduces_the_shipped_n1_list_prices(google):
    """With N1's public us-central1 list rates (core 0.031611, RAM 0.004237 USD/h) the shapes
    give the list prices the shipped table was copied from: the GiB-per-vCPU table is right."""
    from spotbench.costs import load_catalog

    shipped = load_catalog(with_refreshed=False)
    types = ["n1-standard-1", "n1-standard-8", "n1-standard-32", "n1-highmem-32", "n1-highcpu-32"]
    table = gcp_prices.fetch(["us-central1"], {"machine": types}, now=NOW)
    got = {q.item: q.usd for q in table.quotes if q.provisioning == "on-demand"}
    for mtype in types:
        listed = shipped.get("gcp", "us-central1", "machine", mtype).usd
        assert got[mtype] == pytest.approx(listed, rel=1e-3), mtype
