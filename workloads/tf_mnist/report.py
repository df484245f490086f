"""TF section: per worker count, training time, steps, accuracy, steps/s, speedup, efficiency.

Speedup = training time of the 1-worker run / training time with N workers (same
configuration otherwise); parallel efficiency = speedup / N. Averages use complete trials.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import pandas as pd  # noqa: E402

from spotbench.facts import known_facts  # noqa: E402
from spotbench.report.escape import save_figure  # noqa: E402
from spotbench.report.data import SPREAD_FLAG_CV, fmt, fmt_cv, spread, trial_counts  # noqa: E402
from spotbench.report.document import Document, Heading, Image, Para, TableBlock  # noqa: E402
from spotbench.report.search import by_objective  # noqa: E402

METRICS = ["train_time_s", "steps", "steps_per_s", "examples_per_s", "val_accuracy", "val_loss",
           "test_accuracy", "test_loss"]


def tf_frame(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["workload"] == "tf-mnist"].assign(
        workers=lambda d: [int(p.get("workers", 1)) for p in d["params"]]
    )


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Index (config, workers); metric means over complete trials + speedup, efficiency, n."""
    tf = tf_frame(df)
    ok = tf[~tf["preempted"] & tf["metric"].isin(METRICS)]
    if ok.empty:
        return pd.DataFrame()
    per_trial = ok.pivot_table(index=["config", "workers", "run", "trial"], columns="metric",
                               values="value", aggfunc="mean")
    table = per_trial.groupby(level=["config", "workers"]).mean()
    table["n"] = per_trial.groupby(level=["config", "workers"]).size()
    if "train_time_s" in per_trial:  # spread of the training time over the complete trials
        times = per_trial["train_time_s"].reset_index(level=["run", "trial"], drop=True)
        table[["train_time_min", "train_time_median", "train_time_cv"]] = float("nan")
        table["train_time_flag"] = False
        for key, values in times.groupby(level=["config", "workers"]):
            stats = spread(pd.DataFrame([values.to_numpy()], index=[key]))
            for col in ("min", "median", "cv", "flag"):
                table.loc[key, f"train_time_{col}"] = stats.at[key, col]
    speedups = []
    for (config, workers), row in table.iterrows():
        base = table.loc[config] if config in table.index.get_level_values(0) else None
        t1 = base.loc[1, "train_time_s"] if base is not None and 1 in base.index and "train_time_s" in base else None
        t = row.get("train_time_s")
        speedups.append(t1 / t if t1 and t and not pd.isna(t) else float("nan"))
    table["speedup"] = speedups
    table["efficiency"] = table["speedup"] / table.index.get_level_values("workers")
    return table


def _core_notes(tf: pd.DataFrame) -> list[str]:
    """Notes where the tasks of a run really shared one machine's cores: a local run (every
    task is a process on this host). On a cloud every task has its own VM, so a VM with fewer
    cores than the group has tasks is no contention and gets no note."""
    notes = []
    for (config, workers), sub in tf.groupby(["config", "workers"]):
        if not all((f := known_facts(c)) is not None and f.shares_host for c in sub["cloud"]):
            continue
        cores = sub["cpu_count"].dropna()
        members = sub["members"].dropna()
        tasks = int(members.max()) if not members.empty else int(workers)
        if not cores.empty and int(cores.min()) < tasks:
            notes.append(
                f"{config}, {workers} workers: {tasks} tasks shared {int(cores.min())} CPU cores"
                " on one machine (local run): tasks competed for cores, no speedup is "
                "expected; these numbers measure overhead, not scaling"
            )
    return notes


def _plot(table: pd.DataFrame, column: str, ylabel: str, path: Path, ideal: bool) -> Path:
    fig = figure(table, column, ylabel, ideal)
    save_figure(fig, path)
    plt.close(fig)
    return path


def figure(table: pd.DataFrame, column: str, ylabel: str, ideal: bool):  # noqa: ANN201 - a Figure
    """`column` against the worker count, one line per configuration; whole workers only
    on the x axis (no 1.5 workers)."""
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    top = 1
    for config, sub in table.groupby(level="config"):
        w = sub.index.get_level_values("workers")
        ax.plot(w, sub[column], marker="o", label=str(config))
        top = max(top, int(w.max()))
    if ideal:
        ax.plot([1, top], [1, top], ls="--", color="grey", label="ideal (linear)")
    ax.set_xlabel("workers")
    ax.set_ylabel(ylabel)
    ax.set_title(f"TF MNIST: {ylabel} vs workers")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def section(df: pd.DataFrame, doc: Document, out_dir: Path) -> tuple[list[Path], list[pd.DataFrame]]:
    tf = tf_frame(df)
    if tf.empty:
        return [], []
    table = by_objective(summary(df), df)  # best first when the report has an objective
    doc.add(Heading("TensorFlow MNIST (distributed training)"))
    counts = trial_counts(tf.assign(config=tf["config"] + " · workers=" + tf["workers"].astype(str)))
    doc.add(Para("Trials: " + "; ".join(
        f"{c}: {r.complete} complete, {r.preempted} preempted/incomplete (excluded)" for c, r in counts.iterrows()
    )))
    for note in _core_notes(tf):
        doc.add(Para("Note: " + note + "."))
    if table.empty:
        doc.add(Para("No complete TF run yet."))
        return [], []
    shown = pd.DataFrame(index=table.index.set_names(["configuration", "workers"]))
    for col, label, digits in (("train_time_s", "training time (s)", 2), ("steps", "steps", 0),
                               ("val_accuracy", "validation accuracy", 4),
                               ("test_accuracy", "accuracy", 4), ("steps_per_s", "steps/s", 2),
                               ("examples_per_s", "examples/s", 2), ("speedup", "speedup vs 1 worker", 2),
                               ("efficiency", "parallel efficiency", 2),
                               ("train_time_min", "min time (s)", 2),
                               ("train_time_median", "median time (s)", 2)):
        if col in table:
            shown[label] = [fmt(v, digits) for v in table[col]]
    if "train_time_cv" in table:
        shown["time CV"] = [fmt_cv(v, bool(f)) for v, f in
                            zip(table["train_time_cv"], table["train_time_flag"], strict=True)]
    shown["trials"] = [fmt(v, 0) for v in table["n"]]
    doc.add(TableBlock(shown, "Averages of complete trials; speedup = T(1 worker) / T(N workers), "
                              "efficiency = speedup / N; min, median and CV of the training "
                              "time over those trials, and how many there are."))
    if "train_time_flag" in table and table["train_time_flag"].astype(bool).any():
        flagged = table[table["train_time_flag"].astype(bool)]
        doc.add(Para(
            f"Trials disagree (training time CV > {100 * SPREAD_FLAG_CV:.0f}%, marked !) at: "
            + "; ".join(f"{c}, {w} workers (CV {100 * cv:.2f}%)"
                        for (c, w), cv in flagged["train_time_cv"].items()) + "."
        ))
    pngs = []
    for column, ylabel, name, ideal, caption in (
            ("speedup", "speedup vs 1 worker", "tf_speedup.png", True,
             "Speedup vs workers (dashed: ideal linear speedup)"),
            ("steps_per_s", "steps/s", "tf_steps_per_s.png", False, "Training throughput (steps/s) vs workers")):
        if column in table and table[column].notna().any():  # records without timings: no plot
            pngs.append(_plot(table, column, ylabel, out_dir / name, ideal=ideal))
            doc.add(Image(pngs[-1], caption))
    long = table.drop(columns=[c for c in table if c.endswith("_flag")]).reset_index().melt(id_vars=["config", "workers"], var_name="column", value_name="value")
    long.insert(0, "table", "tf")
    return pngs, [long]
