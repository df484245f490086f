"""`spotbench prices` end to end against the doubles, then `estimate` pricing with what it
stored: the table's date and source in the output, the week-old warning, zones that differ."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.prices.table import Quote, Table, save
from tests.aws_price_list import PriceList, ec2_product
from tests.clouds.fake_billing import FakeBillingCatalog
from tests.clouds.google_endpoint import GoogleEndpoint
from tests.moto_server import MotoServer
from tests.test_prices_fetch import billing_skus

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture
def prices_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "prices"
    monkeypatch.setenv("SPOTBENCH_PRICES_DIR", str(folder))
    return folder


def _spec(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copy(ROOT / "examples" / name, path)
    return path


def _estimate(spec: Path) -> dict:
    result = runner.invoke(app, ["estimate", str(spec), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_prices_aws_refresh_from_the_doubles_then_estimate_uses_and_names_the_table(
        moto_url, monkeypatch, prices_dir, tmp_path):
    MotoServer.fresh_account(moto_url, monkeypatch, "us-east-1")
    spec = _spec(tmp_path, "aws-container.yaml")  # c5.large and m5.large, spot, us-east-1
    before = _estimate(spec)
    assert any("2024-06-01" in line and "shipped with spotbench" in line for line in before["prices"])
    assert "days old (2024-06-01)" in before["price_warning"]
    with PriceList(products=[ec2_product("c5.large", "us-east-1", 0.0911),
                             ec2_product("m5.large", "us-east-1", 0.1011)]) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", moto_url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", url)
        result = runner.invoke(app, ["prices", "--cloud", "aws", "--region", "us-east-1"])
    assert result.exit_code == 0, result.output
    assert "aws: fetching prices for us-east-1 (" in result.stderr  # progress, on stderr
    today = datetime.now(UTC).date().isoformat()
    assert f"prices of {today} stored in {prices_dir / 'aws.csv'}" in result.stdout
    assert (prices_dir / "aws.json").is_file()
    rows = (prices_dir / "aws.csv").read_text()
    assert "us-east-1,machine,c5.large,on-demand,hour,0.0911" in rows
    after = _estimate(spec)
    # moto answers every zone's spot price as 0.00001 USD/h: the estimate now prices with it
    group = after["groups"][0]
    assert group["compute_usd"] == pytest.approx(0.00001 * group["billed_s"] * group["members"] / 3600)
    assert group["compute_usd"] < before["groups"][0]["compute_usd"] / 1000
    assert any(line.startswith(f"machine prices of {today} from EC2 DescribeSpotPriceHistory, "
                               "refreshed by `spotbench prices`") for line in after["prices"])
    assert after["price_warning"] is None
    text = runner.invoke(app, ["estimate", str(spec)])
    assert "price tables:" in text.stdout and f"machine prices of {today}" in " ".join(text.stdout.split())


def test_prices_gcp_refresh_then_estimate(monkeypatch, prices_dir, tmp_path):
    endpoint = GoogleEndpoint(billing=FakeBillingCatalog(skus={"6F81-5844-456A": billing_skus()}))
    monkeypatch.setenv("SPOTBENCH_GCP_API_ENDPOINT", endpoint.url_for("user:me@example.com"))
    try:
        result = runner.invoke(app, ["prices", "--cloud", "gcp", "--region", "us-central1", "--json"])
    finally:
        endpoint.stop()
    assert result.exit_code == 0, result.output
    stored = json.loads(result.stdout)[0]
    assert stored["cloud"] == "gcp" and stored["regions"] == ["us-central1"]
    spot = {r["item"]: r["usd"] for r in stored["rows"] if r["provisioning"] == "spot"}
    assert spot["n1-standard-4"] == pytest.approx(4 * 0.00698 + 15 * 0.000936)
    spec = _spec(tmp_path, "gcp-gpu.yaml")  # n1-standard-4 + T4, spot, us-central1
    est = _estimate(spec)
    today = datetime.now(UTC).date().isoformat()
    assert any(line.startswith(f"machine, gpu, disk prices of {today} from Cloud Billing Catalog")
               for line in est["prices"]), est["prices"]
    machine_h = (4 * 0.00698 + 15 * 0.000936) + 0.11  # n1-standard-4 spot + one T4 spot
    g = est["groups"][0]
    assert (g["compute_usd"] + g["gpu_usd"]) == pytest.approx(machine_h * g["billed_s"] * g["members"] / 3600)


def test_prices_a_week_old_table_is_warned_about_and_zones_that_differ_are_named(prices_dir, tmp_path):
    old = datetime.now(UTC) - timedelta(days=9)
    save(Table(cloud="aws", fetched_at=old, regions=("us-east-1",), quotes=(
        Quote("us-east-1", "machine", "c5.large", "spot", "hour", 0.031, "EC2 DescribeSpotPriceHistory",
              zone="us-east-1a"),
        Quote("us-east-1", "machine", "c5.large", "spot", "hour", 0.036, "EC2 DescribeSpotPriceHistory",
              zone="us-east-1b"),
        Quote("us-east-1", "machine", "c5.large", "spot", "hour", 0.036, "EC2 DescribeSpotPriceHistory"),
    )), prices_dir)
    spec = _spec(tmp_path, "aws-container.yaml")
    spec.write_text(spec.read_text().replace("[c5.large, m5.large]", "[c5.large]"))
    result = runner.invoke(app, ["estimate", str(spec)])
    assert result.exit_code == 0, result.output
    out, err = " ".join(result.stdout.split()), " ".join(result.stderr.split())
    assert ("spot c5.large in us-east-1 differs by zone: us-east-1a 0.031, us-east-1b 0.036 USD/h "
            f"(as of {old.date().isoformat()}); priced at the sweep's zone us-east-1a, 0.031") in out
    est = _estimate(spec)  # the spec names us-east-1a: its own price, not the region's dearest
    g = est["groups"][0]
    assert g["compute_usd"] == pytest.approx(0.031 * g["billed_s"] * g["members"] / 3600)
    spec.write_text(spec.read_text().replace("zone: us-east-1a\n", ""))
    est = _estimate(spec)  # no zone: the region's row (its dearest zone)
    g = est["groups"][0]
    assert g["compute_usd"] == pytest.approx(0.036 * g["billed_s"] * g["members"] / 3600)
    assert any("priced at the region's row, 0.036" in line for line in est["prices"])
    assert f"9 days old ({old.date().isoformat()})" in err
    assert "spotbench prices --cloud aws --region us-east-1" in err
    both = _estimate(_spec(tmp_path, "aws-container.yaml"))  # m5.large: its shipped row, the oldest
    assert "days old (2024-06-01)" in both["price_warning"]


def test_prices_missing_extra_and_credentials_name_the_fix(monkeypatch, prices_dir):
    import sys

    monkeypatch.setitem(sys.modules, "google.cloud.billing_v1", None)
    result = runner.invoke(app, ["prices", "--cloud", "gcp"])
    assert result.exit_code == 1
    assert "needs the `gcp` extra (google.cloud.billing_v1 not installed)" in result.stderr
    assert "make setup CLOUD=gcp" in result.stderr
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    result = runner.invoke(app, ["prices", "--cloud", "aws"])
    assert result.exit_code == 1 and "aws:" in result.stderr and "credentials" in result.stderr
    assert not prices_dir.exists()
    result = runner.invoke(app, ["prices", "--cloud", "local"])
    assert result.exit_code == 2 and "not fetched from an API" in result.stderr


def test_prices_help_teaches():
    result = runner.invoke(app, ["prices", "--help"], terminal_width=100)
    assert result.exit_code == 0
    for words in ("AWS Price List API", "spot price history", "Cloud Billing", "~/.cache/spotbench/prices",
                  "older than a week", "spotbench prices --cloud aws --region us-east-1"):
        assert words in " ".join(result.stdout.split()), words
