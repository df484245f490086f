"""The report section of `torch` sweeps: per configuration, mode and world size (processes =
workers × processes per VM), throughput, epoch time, epochs/min, time to the target epochs,
validation accuracy, and speedup and parallel efficiency against a base.

The base of a configuration is its DDP run with the fewest processes: speedup =
T(base) / T(N) of the time to the target epochs (the same work: epochs × steps), parallel
efficiency = speedup / (N / N(base)). A pipeline run (2 processes) is set against the same
base: model parallelism's speedup over one copy of the network. Averages use complete trials.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from spotbench.facts import known_facts  # noqa: E402
from spotbench.failures import is_failure  # noqa: E402
from spotbench.report.data import fmt, trial_counts  # noqa: E402
from spotbench.report.document import Document, Heading, Image, Para, TableBlock  # noqa: E402

WORKLOAD = "torch"
METRICS = ["images_per_s", "epoch_time_s", "epochs_per_min", "train_time_s", "epochs",
           "val_accuracy"]
AXIS_PARAMS = ("mode=", "processes_per_vm=")  # parts of `config` the scaling axis owns


def _base_config(label: str) -> str:
    return " · ".join(p for p in label.split(" · ") if not p.startswith(AXIS_PARAMS))


def frame(df: pd.DataFrame) -> pd.DataFrame:
    ours = df[df["workload"] == WORKLOAD]
    ours = ours[~ours["metadata"].map(is_failure)]
    if ours.empty:
        return ours
    meta = ours["metadata"]
    workers = [int(p.get("workers", 1)) for p in ours["params"]]
    per_vm = [int(m.get("processes_per_vm") or p.get("processes_per_vm") or 1)
              for m, p in zip(meta, ours["params"], strict=True)]
    return ours.assign(
        base=ours["config"].map(_base_config),
        mode=[p.get("mode", "ddp") for p in ours["params"]],
        workers=workers, per_vm=per_vm,
        processes=[w * n for w, n in zip(workers, per_vm, strict=True)],
    )


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Index (base, mode, workers, per_vm, processes): metric means over complete trials, n, speedup, efficiency."""
    ours = frame(df)
    ok = ours[~ours["preempted"] & ours["metric"].isin(METRICS)] if not ours.empty else ours
    if ok.empty:
        return pd.DataFrame()
    keys = ["base", "mode", "workers", "per_vm", "processes"]
    per_trial = ok.pivot_table(index=[*keys, "run", "trial"], columns="metric", values="value", aggfunc="mean")
    table = per_trial.groupby(level=keys).mean()
    table["n"] = per_trial.groupby(level=keys).size()
    speedup, efficiency, against = [], [], []
    for (base, _mode, _w, _p, n), row in table.iterrows():
        mine = table.loc[base]
        ddp = mine.xs("ddp", level="mode") if "ddp" in mine.index.get_level_values("mode") else None
        t = row.get("train_time_s")
        if ddp is None or "train_time_s" not in ddp or pd.isna(t):
            speedup.append(float("nan")), efficiency.append(float("nan")), against.append(None)
            continue
        ddp = ddp.sort_index(level="processes", sort_remaining=True)
        n0 = int(ddp.index.get_level_values("processes")[0])
        s = ddp["train_time_s"].iloc[0] / t
        speedup.append(s)
        efficiency.append(s / (n / n0))
        against.append(n0)
    table["speedup"], table["efficiency"], table["base_processes"] = speedup, efficiency, against
    return table


def _plot(table: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    top = 1
    for (base, mode, per_vm), sub in table.groupby(level=["base", "mode", "per_vm"]):
        n = sub.index.get_level_values("processes")
        ax.plot(n, sub["speedup"], marker="o" if mode == "ddp" else "s",
                label=f"{base} · {mode} · {per_vm}/VM")
        top = max(top, int(n.max()))
    ax.plot([1, top], [1, top], ls="--", color="grey", label="ideal (linear)")
    ax.set_xlabel("processes (workers × processes per VM)")
    ax.set_ylabel("speedup vs base")
    ax.set_title("PyTorch Wide ResNet: speedup vs processes")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


COLUMNS = (("images_per_s", "images/s"), ("epoch_time_s", "epoch time (s)"),
           ("epochs_per_min", "epochs/min"), ("train_time_s", "time to target epochs (s)"),
           ("val_accuracy", "val. accuracy"), ("speedup", "speedup"),
           ("efficiency", "parallel efficiency"), ("n", "trials"))


def section(df: pd.DataFrame, doc: Document, out_dir: Path) -> tuple[list[Path], list[pd.DataFrame]]:
    ours = frame(df)
    if ours.empty:
        return [], []
    doc.add(Heading("PyTorch Wide ResNet (data and model parallel)"))
    counts = trial_counts(ours.assign(config=ours["base"] + " · " + ours["mode"] + " · "
                                      + ours["workers"].astype(str) + " × "
                                      + ours["per_vm"].astype(str) + " processes"))
    doc.add(Para("Trials: " + "; ".join(
        f"{c}: {r.complete} complete, {r.preempted} preempted/incomplete (excluded)" for c, r in counts.iterrows())))
    table = summary(df)
    if table.empty:
        doc.add(Para("No complete torch run yet."))
        return [], []
    shown = pd.DataFrame(index=table.index.set_names(
        ["configuration", "mode", "workers", "processes per VM", "processes"]))
    for col, label in COLUMNS:
        if col in table:
            shown[label] = [fmt(v, 0 if col == "n" else 4) for v in table[col]]
    doc.add(TableBlock(shown, "Averages of complete trials. Speedup = T(base) / T(N) of the time to "
                              "the target epochs, base = the configuration's DDP run with the fewest "
                              "processes; parallel efficiency = speedup / (N / N(base))."))
    shared = ours[[bool((f := known_facts(c)) and f.shares_host) for c in ours["cloud"]]]
    if not shared.empty:
        cores = shared["cpu_count"].dropna()
        doc.add(Para(f"Note: on the local cloud every process shares this machine's "
                     f"{int(cores.min()) if not cores.empty else '?'} CPU cores: these numbers "
                     "measure overhead, not scaling."))
    png = _plot(table, out_dir / "torch_speedup.png")
    doc.add(Image(png, "Speedup vs processes (dashed: ideal linear speedup)"))
    long = table.reset_index().melt(id_vars=["base", "mode", "workers", "per_vm", "processes"],
                                    var_name="column", value_name="value")
    long.insert(0, "table", "torch")
    return [png], [long]
