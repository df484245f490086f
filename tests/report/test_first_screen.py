"""The reports as a person sees them: rendered in headless Chromium at 1280×800, the summary,
the key numbers and the change point are in the first screen, the page does not scroll
sideways, and no number is printed as `2.875e+04`.

A copy of report.html gets a small script that records where the elements are
(`getBoundingClientRect`) in the DOM; `chromium --dump-dom` prints it. The report itself
has no script. Chromium: the Debian package (`bash scripts/ensure_chromium.sh`, part of
`make setup-dev`).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from spotbench.history.synthetic import Step, SyntheticSweep
from spotbench.report import write_report
from spotbench.results import ResultStore
from tests.report.conftest import T0, rec

WIDTH, HEIGHT = 1280, 800
SIZES = (0, *(1 << i for i in range(23)))  # 0 B … 4 MiB, as `make demo` measures
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--run-all-compositor-stages-before-draw", "--virtual-time-budget=3000",
         f"--window-size={WIDTH},{HEIGHT}"]

PROBE = """<script>
(() => {
  const at = (sel) => { const e = document.querySelector(sel);
    if (!e) return null; const r = e.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, text: e.textContent.slice(0, 300)}; };
  const out = {viewport: [window.innerWidth, window.innerHeight],
    scroll_width: document.documentElement.scrollWidth,
    summary: at('#summary'), change: at('#change-points'), key: at('#key-numbers'),
    text: document.body.innerText};
  const pre = document.createElement('pre'); pre.id = 'probe';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
})();
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium missing: run `bash scripts/ensure_chromium.sh` (part of `make setup-dev`)")
    return found


def render(page: Path, tmp_path: Path) -> dict:
    """What Chromium laid out for `page` in a 1280-pixel wide window."""
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    profile = tmp_path / "chromium-profile"
    run = subprocess.run([_chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                          probed.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, re.S)
    assert found, run.stdout[-2000:]
    return json.loads(html.unescape(found[1]))


def _people_numbers(text: str) -> None:
    assert not re.search(r"\d\.?\d*e[+-]\d", text), re.search(r".{40}\d\.?\d*e[+-]\d.{20}", text)
    assert not re.search(r"[+-]\d{4,}(\.\d)?%", text)  # +458974.7% reads as a factor (×4,591)
    assert not re.search(r"\b\d+\.\d*000\b", text)  # 127.000


def demo_store(root: Path) -> str:
    """One run of `make demo` (examples/osu-local.yaml): 3 trials, latency and bibw, 0 B … 4 MiB."""
    store = ResultStore("file://" + str(root))
    for trial in (1, 2, 3):
        group = f"osu-local--d39dda-t{trial}"
        recs = [rec(sweep="osu-local", run="20261125T163922Z", group=group, trial=trial, metric=m,
                    unit="us" if m == "latency" else "MB/s", machine_type="local",
                    value=(20.0 + size / 400 if m == "latency" else 50 + size / 800) * (1 + 0.05 * trial),
                    started_at=T0, ended_at=T0 + timedelta(seconds=40), cost_usd=0.0,
                    metadata={"size_bytes": size, "members": 2})
                for m in ("latency", "bibw") for size in SIZES if m == "latency" or size > 0]
        store.write_group("20261125T163922Z", group, recs)
    return store.url


def _first_screen(shown: dict, *names: str) -> None:
    # the layout depends on the width only; --dump-dom's window keeps some of the 800 px for
    # itself, so positions are compared with the 800 px of a 1280×800 screen (--screenshot)
    assert shown["viewport"][0] == WIDTH, shown["viewport"]
    for name in names:
        assert shown[name] is not None, f"no #{name} element in the report"
        assert shown[name]["bottom"] <= HEIGHT, (name, shown[name])
    assert shown["scroll_width"] <= WIDTH, "the page scrolls sideways"
    _people_numbers(shown["text"])


def test_demo_report_answers_in_the_first_screen(tmp_path):
    paths = write_report(demo_store(tmp_path / "results"), tmp_path / "report")
    shown = render(paths.html, tmp_path)
    _first_screen(shown, "summary", "key")
    key = shown["key"]["text"]
    assert "OSU latency @ 8 B" in key and "OSU bibw @ 1 MiB" in key and "3 of 3" in key
    assert "µs" in key


def test_history_report_shows_the_regression_in_the_first_screen(tmp_path):
    root = tmp_path / "results"
    runs = SyntheticSweep(runs=12, groups=2, seed=9, sizes=(0, 1, 8, 64, 1024, 8192, 65536, 1 << 20),
                          steps=[Step("latency", 9, 1.5)]).write(root)
    paths = write_report("file://" + str(root), tmp_path / "report")
    shown = render(paths.html, tmp_path)
    _first_screen(shown, "summary", "change", "key")
    change = shown["change"]["text"]
    assert change.startswith("Regression: OSU latency") and runs[9] in change, change
    # a dozen runs did not add a dozen columns: the OSU tables hold statistics only
    md = paths.markdown.read_text()
    header = next(ln for ln in md.splitlines() if ln.startswith("| instance type |"))
    assert runs[0] not in header and header.count("|") <= 9, header
