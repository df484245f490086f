"""Report hygiene (#39): the `!` flag means something on a busy host, whole workers on the
workers axis, sizes for people, no raw Markdown in the HTML page, no price warning and no
cost plot for the local cloud — and the answer in the first screen of a real browser."""

from __future__ import annotations

import re
from datetime import timedelta

import matplotlib.pyplot as plt

from spotbench.report import data, write_report
from workloads.tf_mnist import report as tf
from tests.report.conftest import T0, rec
from tests.report.test_first_screen import _first_screen, demo_store, render
from tests.report.test_tf_cost_reference import tf_group


def _busy_osu(store, noisy_size=1 << 20):
    """Three trials at ten sizes on a busy host: every row disagrees by ~15%, one by far more."""
    sizes = [1 << i for i in range(0, 20, 2)] + [noisy_size]
    for trial, f in ((1, 0.85), (2, 1.0), (3, 1.15)):
        g = f"osu-t{trial}"
        store.write_group("r1", g, [
            rec(group=g, trial=trial, value=(10 + s / 100) * (f if s != noisy_size else f ** 6),
                metadata={"size_bytes": s}, cost_usd=0.0, started_at=T0,
                ended_at=T0 + timedelta(seconds=30))
            for s in sizes])
    return store


def test_first_hour_spread_flag_is_judged_against_the_runs_own_noise(store, tmp_path):
    md = write_report(_busy_osu(store).url, tmp_path / "out").markdown.read_text()
    flagged = [ln for ln in md.splitlines() if ln.startswith("| local |") and " ! |" in ln]
    assert len(flagged) == 1 and "| 1 MiB |" in flagged[0], flagged  # not every busy row
    assert "the noise this run measured" in md
    noise = data.spread(data.pd.DataFrame([[1.0, 1.15, 1.3]] * 4 + [[1.0, 2.0, 3.0]]))
    assert list(noise["flag"]) == [False] * 4 + [True] and noise.attrs["threshold"] > 0.1


def test_first_hour_sizes_for_people_and_no_markdown_in_html(store, tmp_path):
    paths = write_report(_busy_osu(store).url, tmp_path / "out")
    md = paths.markdown.read_text()
    assert "| local | 1 MiB |" in md and "| local | 4 KiB |" in md and "| local | 1048576 |" not in md
    page = re.sub(r"<style>.*?</style>|<img [^>]*>", "", paths.html.read_text(), flags=re.S)
    assert "`" not in page and "**" not in page


def test_first_hour_local_cloud_has_no_price_warning_nor_cost_axis(store, tmp_path):
    paths = write_report(demo_store(tmp_path / "results"), tmp_path / "out")
    md = paths.markdown.read_text()
    assert "Price tables" not in md and "Warning" not in md
    assert "cost_vs_time.png" not in {p.name for p in paths.png}


def test_first_hour_workers_axis_has_whole_numbers(store):
    for w, t in {1: 200.0, 2: 120.0, 3: 90.0}.items():
        recs = tf_group(w, 1, t)
        store.write_group("r1", recs[0].group, recs)
    fig = tf.figure(tf.summary(data.frame(store.read())), "speedup", "speedup", ideal=True)
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_xticks() if 1 <= t <= 3]
    plt.close(fig)
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_first_hour_the_answer_is_in_the_first_screen(tmp_path):
    paths = write_report(demo_store(tmp_path / "results"), tmp_path / "out")
    shown = render(paths.html, tmp_path)
    _first_screen(shown, "summary", "key")
    assert shown["text"].index("The answer: OSU latency @ 8 B") < shown["text"].index("Summary")
    assert "Best OSU latency @ 8 B (lower is better): local" in shown["text"]
