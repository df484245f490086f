"""History section: trend plots with change points marked, what changed since the previous
run and since a baseline run (`spotbench report --baseline RUN`; default: the first run),
and the spot-market statistics of the sweep's own history. Shown when the store holds at
least two runs of a followed metric.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from spotbench.history.changepoints import DEFAULT_MAX_PVALUE  # noqa: E402
from spotbench.history.trends import History, Series, size_text  # noqa: E402
from spotbench.report.document import Document, Heading, Image, Para, TableBlock  # noqa: E402
from spotbench.report.escape import file_stem, save_figure  # noqa: E402
from spotbench.report.numbers import num, p_value, pct, with_unit  # noqa: E402

SAME_WITHIN = 0.05  # |change| below this is shown as "≈" in the comparison table


def point_labels(df: pd.DataFrame) -> dict[str, str]:
    """Point id (group without its trial) → the report's configuration label."""
    groups = df.drop_duplicates("group")
    return {g.rsplit("-t", 1)[0]: c for g, c in zip(groups["group"], groups["config"], strict=True)}


def load(results_url: str, df: pd.DataFrame) -> tuple[History, list[dict]] | None:
    """The history and the spot-market statistics of the store (None: fewer than two runs)."""
    from spotbench.history.catalog import Catalog
    from spotbench.history.market import market, publish
    from spotbench.history.trends import history

    if df["run"].nunique() < 2:
        return None
    with Catalog(results_url) as cat:
        stats = market(cat)
        publish(cat, stats)  # control orders candidate zones by it (spotbench.control.zones)
        return history(cat, labels=point_labels(df)), stats


def _verdict(s: Series, rel: float | None) -> str:
    if rel is None or pd.isna(rel):
        return "—"
    if abs(rel) < SAME_WITHIN:
        return "≈"
    return "regression" if s.worse(rel) else "improvement"


def comparison(hist: History, baseline: str | None) -> pd.DataFrame:
    """Per series: latest run's value against the previous run's and the baseline run's."""
    rows = []
    for s in hist.series:
        if len(s.values) < 2:
            continue
        base_run = baseline or s.runs[0]
        base = s.values[s.runs.index(base_run)] if base_run in s.runs else None
        latest, previous = s.values[-1], s.values[-2]
        rel_prev = latest / previous - 1 if previous else None
        rel_base = latest / base - 1 if base else None
        rows.append({
            "series": s.name, "unit": s.unit, "latest run": s.runs[-1], "latest": latest,
            "previous": previous, "vs previous": rel_prev, "since previous": _verdict(s, rel_prev),
            "baseline run": base_run if base is not None else f"{base_run} (not in this series)",
            "baseline": base, "vs baseline": rel_base, "since baseline": _verdict(s, rel_base),
        })
    return pd.DataFrame(rows)


def _on_dates(hist: History) -> bool:
    """Whether the x axis can be the runs' dates: matplotlib's date axis, with its margins,
    must stay within years 1 to 9999 (a run's first record may say year 9999); else the
    runs' order, labelled with their dates."""
    dates = [d for s in hist.series for d in s.dates]
    return all(1900 <= d.year <= 2200 for d in dates)


def _plots(hist: History, out_dir: Path) -> list[Path]:
    pngs = []
    on_dates = _on_dates(hist)
    by_metric: dict[tuple[str, int | None], list[Series]] = {}
    for s in hist.series:
        by_metric.setdefault((s.label_metric, s.size), []).append(s)
    for (label, size), group in by_metric.items():
        fig, ax = plt.subplots(figsize=(8, 3.6))
        for s in group:
            xs = s.dates if on_dates else list(range(len(s.values)))
            line, = ax.plot(xs, s.values, marker="o", markersize=3, label=s.label)
            bounds = [0, *(cp.index for cp in s.change_points), len(s.values)]
            for a, b in zip(bounds, bounds[1:]):  # each level's mean
                level = sum(s.values[a:b]) / (b - a)
                ax.hlines(level, xs[a], xs[b - 1], colors=line.get_color(), alpha=0.4)
            for cp in s.change_points:
                ax.axvline(xs[cp.index], color="red" if s.worse(cp.rel_change) else "green",
                           linestyle="--", linewidth=1)
                ax.annotate(pct(cp.rel_change), (xs[cp.index], s.values[cp.index]),
                            textcoords="offset points", xytext=(4, 6), fontsize=8)
        title = label + (f" @ {size_text(size)}" if size is not None else "")
        ax.set_title(f"{title}: per run (dashed: change points; red = regression)", fontsize=10)
        ax.set_ylabel(group[0].unit)
        ax.grid(alpha=0.3)
        if len(group) <= 8:
            ax.legend(fontsize=7)
        if not on_dates:
            longest = max(group, key=lambda s: len(s.dates))
            ax.set_xticks(range(len(longest.dates)), [d.date().isoformat() for d in longest.dates])
        fig.autofmt_xdate()
        fig.tight_layout()
        png = out_dir / f"history_{file_stem(group[0].metric, size or '')}.png"
        save_figure(fig, png, dpi=110)
        plt.close(fig)
        pngs.append(png)
    return pngs


def _market_table(stats: list[dict]) -> pd.DataFrame:
    def f(v, form: str) -> str:
        return "—" if v is None or pd.isna(v) else form.format(v)

    return pd.DataFrame({
        "zone · machine · accelerator": [" · ".join(str(s[k] or "—") for k in ("zone", "machine_type", "accelerator"))
                                         for s in stats],
        "completed / attempts": [f"{s['completed']}/{s['attempts']}" for s in stats],
        "preemptions per VM-hour": [num(s["preemptions_per_vm_hour"], 3) for s in stats],
        "failed starts per start": [f(s["failed_starts_per_start"], "{:.2f}") for s in stats],
        "capacity failures per start": [f(s["capacity_failures_per_start"], "{:.2f}") for s in stats],
        "start tick → first result (s)": [f(s["first_result_s"], "{:.0f}") for s in stats],
        "retries per completed group": [f(s["retries_per_completed"], "{:.2f}") for s in stats],
        "USD per completed result": [num(s["cost_per_completed_usd"]) for s in stats],
    }).set_index("zone · machine · accelerator")


def _pct(v: float | None) -> str:
    return pct(v)


def section(df: pd.DataFrame, doc: Document, out_dir: Path, results_url: str,
            baseline: str | None = None, loaded: tuple[History, list[dict]] | None = None):
    """`loaded`: what `load` returned, when the caller already has it (the summary uses it)."""
    if loaded is None:
        loaded = load(results_url, df)
    if loaded is None or not any(len(s.values) >= 2 for s in loaded[0].series):
        return [], []
    hist, stats = loaded
    if baseline is not None and baseline not in hist.runs:
        raise ValueError(f"--baseline {baseline}: no such run; runs are {', '.join(hist.runs)}")
    doc.add(Heading("History"))
    doc.add(Para(
        f"{len(hist.runs)} runs ({hist.runs[0]} … {hist.runs[-1]}). Each point is a run's median over "
        "its complete attempts (preempted/partial ones left out). Change points: E-Divisive means "
        f"with a t-test (Apache Otava's method), p < {DEFAULT_MAX_PVALUE:g}; see docs/history.md. "
        "The command spotbench history SPEC prints the same with every value."
    ))
    _add_change_points(doc, hist)
    table = comparison(hist, baseline)
    if not table.empty:
        _add_comparison(doc, hist, table, baseline)
    if stats:
        doc.add(TableBlock(_market_table(stats), "Spot market as this sweep saw it (spotbench market SPEC; "
                                                 "— where the store does not hold the figure)"))
    pngs = _plots(hist, out_dir)
    for png in pngs:
        doc.add(Image(png, png.stem.replace("_", " ")))
    long = _long(table)
    return pngs, [long] if not long.empty else []


def _add_change_points(doc: Document, hist: History) -> None:
    changes = hist.changes()
    if not changes:
        doc.add(Para(f"No change point at p < {DEFAULT_MAX_PVALUE:g}."))
        return
    cp = pd.DataFrame(changes)
    shown = pd.DataFrame({
        "series": cp["series"], "run": cp["run"], "before": [with_unit(v, u) for v, u in zip(cp["before_mean"], cp["unit"], strict=True)],
        "after": [with_unit(v, u) for v, u in zip(cp["after_mean"], cp["unit"], strict=True)],
        "change": [_pct(v) for v in cp["rel_change"]],
        "p": [p_value(v).removeprefix("p = ") for v in cp["pvalue"]], "kind": cp["kind"],
    }).set_index("series")
    doc.add(TableBlock(shown, "Change points"))


def _add_comparison(doc: Document, hist: History, table: pd.DataFrame, baseline: str | None) -> None:
    shown = pd.DataFrame({
        "series": table["series"],
        "latest": [with_unit(v, u) for v, u in zip(table["latest"], table["unit"], strict=True)],
        "previous run": [with_unit(v, u) for v, u in zip(table["previous"], table["unit"], strict=True)],
        "vs previous": [_pct(v) for v in table["vs previous"]], "since previous": table["since previous"],
        "baseline": [with_unit(v, u) for v, u in zip(table["baseline"], table["unit"], strict=True)],
        "vs baseline": [_pct(v) for v in table["vs baseline"]], "since baseline": table["since baseline"],
    }).set_index("series")
    base = baseline or "the first run of each series"
    doc.add(TableBlock(shown, f"Latest run {hist.runs[-1]} against the previous run and the baseline "
                              f"({base}); changes under {SAME_WITHIN:.0%} shown as ≈"))


def _long(table: pd.DataFrame) -> pd.DataFrame:
    """The comparison in records.csv's long form (table, config, column, value)."""
    long = table.melt(id_vars=["series"], var_name="column", value_name="value") if not table.empty else table
    if not long.empty:
        long.insert(0, "table", "history")
        long = long.rename(columns={"series": "config"})
    return long
