"""Flagged attempts are shown apart (issue #28): an attempt a member found stalled, or
control flagged, is listed with why, and none of its values reaches a table's average."""

from __future__ import annotations

from spotbench.report import write_report
from spotbench.report.escape import md_text
from tests.report.conftest import T0, rec

STALL = "stalled: training before step 10 made no progress for 5.9 s during measurement (1 stall(s))"


def _tf(value: float, *, attempt_started, preempted=False, **meta):
    return rec(workload="tf-mnist", params={"name": "tf-mnist", "workers": 1}, group="tf-t1",
               metric="steps_per_s", unit="steps/s", value=value, preempted=preempted,
               started_at=attempt_started, metadata={"workers": 1, **meta})


def test_a_contaminated_attempt_is_listed_with_why_and_left_out_of_the_averages(store, tmp_path):
    from datetime import timedelta

    later = T0 + timedelta(minutes=5)
    store.write_group("r1", "tf-t1", [_tf(1.5, attempt_started=T0, preempted=True, contaminated=STALL)])
    store.write_group("r1", "tf-t1", [_tf(6.25, attempt_started=later)])
    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    section = md[md.index("## Contaminated attempts: 1 kept apart"):].split("\n## ")[0]
    assert md_text(STALL) in section and "Run r1, group tf-t1" in section and "1 value" in section, section
    tf = md[md.index("## TensorFlow"):].split("\n## ")[0]
    assert "| 6.25 |" in tf and "1.5" not in tf.split("*Averages")[1], tf


def test_a_report_without_flagged_attempts_has_no_such_section(store, tmp_path):
    store.write_group("r1", "tf-t1", [_tf(6.25, attempt_started=T0)])
    assert "Contaminated" not in write_report(store.url, tmp_path / "out").markdown.read_text()


def test_a_reason_is_text_and_bounded(store, tmp_path):
    """A member writes the reason: it is escaped like every value and cut at MAX_REASON."""
    from spotbench.report.contaminated import MAX_REASON

    why = "stalled: <script>alert(1)</script> " + "x" * 2000
    store.write_group("r1", "tf-t1", [_tf(1.5, attempt_started=T0, preempted=True, contaminated=why)])
    paths = write_report(store.url, tmp_path / "out")
    md, page = paths.markdown.read_text(), paths.html.read_text()
    line = next(l for l in md.splitlines() if l.startswith("Run r1, group tf-t1"))
    assert "<script>" not in line and "x" * MAX_REASON not in line and "…" in line, line[:400]
    assert "<script>alert(1)" not in page
