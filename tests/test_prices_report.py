"""The report names the price tables its costs were priced with (per stored group run) and
warns when a run was priced with prices more than a week older than the run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotbench.costs import annotate, load_catalog
from spotbench.prices import notes
from spotbench.report import write_report
from spotbench.results import ResultStore
from tests.report.conftest import rec


def _store(tmp_path, started: datetime) -> ResultStore:
    store = ResultStore("file://" + str(tmp_path / "results"))
    for trial in (1, 2):
        recs = [rec(cloud="aws", zone="us-east-1a", machine_type="c5.large", spot=True,
                    group=f"g{trial}", trial=trial, started_at=started,
                    ended_at=started + timedelta(minutes=5), value=float(v))
                for v in (1, 2)]
        recs = annotate(recs, load_catalog())
        store.write_group("r1", f"g{trial}", recs)
    return store


def test_prices_report_names_the_table_date_and_warns_when_it_was_old_for_the_run(tmp_path):
    store = _store(tmp_path, datetime(2024, 9, 1, 3, tzinfo=UTC))  # three months after the table
    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    text = " ".join(md.split())
    assert ("Price tables: 2 group runs priced with the prices of 2024-06-01 from "
            "https://aws.amazon.com/ec2/spot/pricing/.") in text
    assert "Warning: 2 group runs were priced with prices more than a week older than the run" in text


def test_prices_report_a_run_priced_within_the_week_gets_no_warning(tmp_path):
    store = _store(tmp_path, datetime(2024, 6, 5, 3, tzinfo=UTC))
    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    assert "Price tables: 2 group runs priced with the prices of 2024-06-01" in " ".join(md.split())
    assert "older than the run" not in md


def test_prices_recorded_skips_what_a_vm_could_have_forged():
    t = datetime(2024, 6, 2, tzinfo=UTC)
    lines, late = notes.recorded([("2024-06-01", "<script>alert(1)</script>", t),
                                  ("not a date", "https://x", t), (None, None, t),
                                  ("2024-06-01", "EC2 DescribeSpotPriceHistory", t)])
    assert lines == ["1 group run priced with the prices of 2024-06-01 from EC2 DescribeSpotPriceHistory"]
    assert late is None
