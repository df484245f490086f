"""OSU section: per instance type and message size, each trial and the average.

Tables are laid out the way published OSU comparisons across instance types are: one row
per (instance type, message size), one column per trial, then the average of the
complete trials. Values from preempted/incomplete runs are shown with a `*` and are not
part of the average; the counts are printed under each table.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from spotbench.report.data import (  # noqa: E402
    NOISE_FACTOR, OUTLIER_MADS, SPREAD_FLAG_CV, fmt, fmt_cv, outliers, size_label, spread, trial_counts,
)
from spotbench.history.trends import size_text  # noqa: E402
from spotbench.report.document import Document, Heading, Image, Para, TableBlock  # noqa: E402
from spotbench.report.escape import file_stem, save_figure  # noqa: E402
from spotbench.report.numbers import num, unit_label  # noqa: E402

METRICS = {
    "latency": ("Latency", "µs", "lower is better"),
    "bibw": ("Bidirectional bandwidth", "MB/s", "higher is better"),
}


def summary(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Numeric table: index (config, size_bytes); columns = samples, `average`, `n`,
    and the spread of the complete trials: `min`, `median`, `cv`, `flag` (see `data.spread`).

    Cells hold complete-run values; `average`, `n` and the spread use only those. Preempted
    values are in columns named `<sample> (preempted)` when a trial has no complete value.
    """
    sub = df[(df["workload"] == "osu") & (df["metric"] == metric) & df["size_bytes"].notna()]
    if sub.empty:
        return pd.DataFrame()
    sub = sub.assign(size_bytes=sub["size_bytes"].astype(int))
    ok = sub[~sub["preempted"]]
    bad = sub[sub["preempted"]]
    idx = ["config", "size_bytes"]
    good = ok.pivot_table(index=idx, columns="sample", values="value", aggfunc="mean")
    cut = bad.pivot_table(index=idx, columns="sample", values="value", aggfunc="mean")
    samples = sorted(set(df.loc[df["workload"] == "osu", "sample"]), key=_sample_order)
    table = pd.DataFrame(index=sub.set_index(idx).index.unique().sort_values())
    for s in samples:
        table[s] = good[s] if s in good else float("nan")
    table["average"] = table[samples].mean(axis=1, skipna=True)
    table["n"] = table[samples].notna().sum(axis=1)
    stats = spread(table[samples])
    for col in ("min", "median", "cv", "flag"):
        table[col] = stats[col]
    table.attrs.update(stats.attrs)  # the flag's threshold, from the noise this run measured
    for s in samples:
        if s in cut:
            only_cut = cut[s].where(table[s].reindex(cut.index).isna())
            if only_cut.notna().any():
                table[f"{s} (preempted)"] = only_cut
    return table


def _sample_order(label: str) -> tuple[str, int]:
    head, _, num = label.rpartition("trial ")
    return head, int(num) if num.isdigit() else 0


STAT_COLUMNS = ("average", "n", "min", "median", "cv", "flag")


def sample_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in STAT_COLUMNS and "(preempted)" not in c]


# Per-trial columns are shown for one run of at most this many trials; beyond (several runs,
# many trials) the table holds only the statistics, so it does not grow with the history.
MAX_TRIAL_COLUMNS = 5


def shows_trials(osu: pd.DataFrame) -> bool:
    return osu["run"].nunique() == 1 and osu["sample"].nunique() <= MAX_TRIAL_COLUMNS


def display(table: pd.DataFrame, cut: set[tuple[str, str]] = frozenset(), digits: int = 2,
            trials: bool = True) -> pd.DataFrame:
    """Strings for the table: `v*` = preempted value, `preempted` = trial cut before it;
    after the average, the spread of the complete trials and how many there are.
    `trials=False`: the statistics only (every value is in records.csv)."""
    samples = sample_columns(table) if trials else []
    out = pd.DataFrame(index=table.index)
    out.index = out.index.set_names(["instance type", "size"])
    for s in samples:
        cut_col = f"{s} (preempted)"
        cells = []
        for key in table.index:
            value = table.at[key, s]
            if pd.isna(value) and cut_col in table and not pd.isna(table.at[key, cut_col]):
                cells.append(fmt(table.at[key, cut_col], digits) + "*")
            elif pd.isna(value) and (key[0], s) in cut:
                cells.append("preempted")
            else:
                cells.append(fmt(value, digits))
        out[s] = cells
    out["average"] = [fmt(v, digits) for v in table["average"]]
    out["min"] = [fmt(v, digits) for v in table["min"]]
    out["median"] = [fmt(v, digits) for v in table["median"]]
    out["CV"] = [fmt_cv(v, f) for v, f in zip(table["cv"], table["flag"], strict=True)]
    out["runs"] = [str(int(v)) for v in table["n"]]
    out.index = pd.MultiIndex.from_tuples(  # sizes for people: 8 B, 8 KiB, 1 MiB (#39)
        [(c, size_text(int(size))) for c, size in table.index], names=["instance type", "size"])
    return out


def plottable(table: pd.DataFrame) -> bool:
    """A log-log plot needs a size > 0 with a positive average (the table has the rest)."""
    sizes = table.index.get_level_values("size_bytes")
    return bool(((sizes > 0) & (table["average"] > 0)).any())


def plot(table: pd.DataFrame, metric: str, path: Path) -> Path:
    """Average line and trial dots per configuration; 0-byte and non-positive values are left
    out (a log axis has no 0); call only when `plottable(table)`."""
    name, unit, better = METRICS[metric]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    samples = sample_columns(table)
    for config, sub in table.groupby(level="config"):
        sizes = sub.index.get_level_values("size_bytes")
        keep = (sizes > 0) & (sub["average"] > 0).to_numpy()
        if not keep.any():
            continue
        ax.plot(sizes[keep], sub["average"][keep], marker="o", ms=3, label=str(config))
        for s in samples:
            ok = keep & (sub[s] > 0).to_numpy()
            ax.scatter(sizes[ok], sub[s][ok], s=6, alpha=0.35, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: size_label(int(x)) if x >= 1 else ""))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xlabel("message size (bytes, log2)")
    ax.set_ylabel(f"{name.lower()} ({unit}, log)")
    ax.set_title(f"OSU {metric}: {name.lower()} vs message size ({better})")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def section(df: pd.DataFrame, doc: Document, out_dir: Path) -> tuple[list[Path], list[pd.DataFrame]]:
    """Add the OSU tables and plots to `doc`; returns PNG paths and long-form CSV frames."""
    osu = df[df["workload"] == "osu"]
    if osu.empty:
        return [], []
    pngs: list[Path] = []
    exports: list[pd.DataFrame] = []
    doc.add(Heading("OSU micro-benchmarks (point to point, 2 ranks)"))
    counts = trial_counts(osu)
    doc.add(Para(
        "Trials per instance type: "
        + "; ".join(
            f"{c}: {r.complete} complete, {r.preempted} preempted/incomplete (excluded from averages)"
            for c, r in counts.iterrows()
        )
    ))
    for metric, (name, unit, better) in METRICS.items():
        table = summary(osu, metric)
        if table.empty:
            continue
        doc.add(Heading(f"{name} ({unit_label(unit)}, {better})", 3))
        cut = {(c, s) for c, s, p in zip(osu["config"], osu["sample"], osu["preempted"], strict=True) if p}
        trials = shows_trials(osu)
        shown = display(table, cut, trials=trials)
        shown_unit = unit_label(unit)
        if trials:
            note = " A * marks a value from a preempted/incomplete run, not in the average." if any(
                "(preempted)" in c for c in table.columns) else ""
            caption = (f"OSU {metric} in {shown_unit}: each trial, the average of complete trials, "
                       "their min, median and coefficient of variation (CV), and the count of runs "
                       f"behind the average.{note}")
        else:
            caption = (f"OSU {metric} in {shown_unit} over {osu['run'].nunique()} runs × trials: the "
                       "average of complete trials, their min, median and coefficient of variation "
                       "(CV), and how many there are; every value is in records.csv.")
        doc.add(TableBlock(shown, caption))
        flagged = table[table["flag"]]
        if not flagged.empty:
            doc.add(Para(
                f"Trials disagree (CV > {_threshold_text(table)}, marked !) at: "
                + "; ".join(f"{c} {size_text(int(s))} (CV {num(100 * cv, 3)}%)"
                            for (c, s), cv in flagged["cv"].items())
                + ". Treat these averages with care; more trials or a quieter machine help."
            ))
        far = outliers(table[sample_columns(table)])
        if far:
            doc.add(Para(
                f"Outlier trials (more than {num(OUTLIER_MADS)} scaled MADs and "
                f"{100 * SPREAD_FLAG_CV:.0f}% from their point's median; a stall, a noisy "
                "neighbour or a slow host): "
                + "; ".join(f"{c} {size_text(int(size))}, {col}: {num(v)} vs median {num(m)} "
                            f"({num(v / m) if m else '—'}×)" for (c, size), col, v, m in far[:10])
                + (f"; and {len(far) - 10} more" if len(far) > 10 else "") + "."
            ))
        if plottable(table):
            path = plot(table, metric, out_dir / f"osu_{file_stem(metric)}.png")
            pngs.append(path)
            doc.add(Image(path, f"OSU {metric} vs message size (average line; grey dots = trials)"))
        else:
            doc.add(Para(f"No {metric} plot: a log-log plot needs a message size above 0 bytes "
                         "with a positive value; the table has every measured value."))
        long = table.drop(columns=["flag"]).reset_index().melt(id_vars=["config", "size_bytes"], var_name="column", value_name="value")
        long.insert(0, "table", f"osu_{metric}")
        long.insert(1, "unit", unit)
        exports.append(long)
    return pngs, exports


def _threshold_text(table: pd.DataFrame) -> str:
    """`10%`, or `31% (twice this table's median CV of 15.5%: the noise this run measured)`."""
    threshold = table.attrs.get("threshold", SPREAD_FLAG_CV)
    noise = table.attrs.get("noise", 0.0)
    if threshold <= SPREAD_FLAG_CV:
        return f"{100 * SPREAD_FLAG_CV:.0f}%"
    return (f"{num(100 * threshold, 3)}% ({num(NOISE_FACTOR)}× this table's median CV of "
            f"{num(100 * noise, 3)}%: the noise this run measured)")
