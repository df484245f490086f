"""The report section of `container` sweeps: per metric, a table and a bar plot.

Rows are configurations (machine type, and any parameter that varies, e.g. the command)
and, when the command labelled its values, each label set. Averages use complete trials
only; values from a preempted/interrupted run are counted but left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from spotbench.failures import is_failure  # noqa: E402
from spotbench.report.data import fmt  # noqa: E402
from spotbench.report.document import Document, Heading, Image, Para, TableBlock  # noqa: E402
from spotbench.report.escape import file_stem, save_figure  # noqa: E402
from spotbench.report.search import by_objective  # noqa: E402

WORKLOAD = "container"


def _labels(meta: object) -> str:
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if not labels or not isinstance(labels, dict):  # a label set is a mapping; else none
        return ""
    return ", ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in sorted(labels.items()))


def summary(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """(config, labels) → average/min/max over complete trials, their count, and runs cut short."""
    sub = df[df["metric"] == metric].assign(labels=lambda d: d["metadata"].map(_labels))
    done = sub[~sub["preempted"]]
    table = done.groupby(["config", "labels"])["value"].agg(
        average="mean", min="min", max="max", n="count")
    cut = sub[sub["preempted"]].groupby(["config", "labels"]).size().rename("cut_short")
    return table.join(cut, how="outer").fillna({"cut_short": 0, "n": 0})


def plot(table: pd.DataFrame, metric: str, unit: str, path: Path) -> Path:
    shown = table.dropna(subset=["average"])
    names = [c if not lab else f"{c}\n{lab}" for c, lab in shown.index]
    fig, ax = plt.subplots(figsize=(7, 1.6 + 0.45 * len(names)), dpi=110)
    errors = [shown["average"] - shown["min"], shown["max"] - shown["average"]]
    ax.barh(range(len(names)), shown["average"], xerr=errors, capsize=3, color="#4c72b0")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{metric} ({unit})" if unit else metric)
    ax.set_title(f"{metric}: average (bars: min to max)", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def section(df: pd.DataFrame, doc: Document, out_dir: Path) -> tuple[list[Path], list[pd.DataFrame]]:
    ours = df[df["workload"] == WORKLOAD]
    ours = ours[~ours["metadata"].map(is_failure)]  # a failed attempt measured nothing (banner)
    if ours.empty:
        return [], []
    doc.add(Heading("Container benchmarks (your own command)"))
    pngs: list[Path] = []
    exports: list[pd.DataFrame] = []
    for metric in sorted(ours["metric"].unique()):
        unit = str(ours.loc[ours["metric"] == metric, "unit"].iloc[0])
        table = by_objective(summary(ours, metric), df)  # best first by the report's objective
        doc.add(Heading(f"{metric} ({unit})" if unit else metric, 3))
        shown = pd.DataFrame(index=table.index.set_names(["configuration", "labels"]))
        for col, digits in (("average", 3), ("min", 3), ("max", 3), ("n", 0), ("cut_short", 0)):
            shown[col.replace("_", " ")] = [fmt(v, digits) for v in table[col]]
        doc.add(TableBlock(shown, f"{metric}: average, min and max over complete trials, how many "
                                  "there are, and runs cut short (not in the average)."))
        if table["average"].notna().any():
            path = plot(table, metric, unit, out_dir / f"container_{file_stem(metric)}.png")
            pngs.append(path)
            doc.add(Image(path, f"{metric} per configuration"))
        else:
            doc.add(Para(f"No complete run reported {metric} yet."))
        long = table.reset_index().melt(id_vars=["config", "labels"], var_name="column", value_name="value")
        long.insert(0, "table", f"container_{metric}")
        long.insert(1, "unit", unit)
        exports.append(long)
    return pngs, exports
