"""The scaling section: speedup, parallel efficiency and cost per unit of work against the
spec's base on the spec's axis (`scaling: {axis: accelerator_count, base: 1}`; records carry
it, `WorkloadRun`), for whatever workload the sweep ran.

The axis value of a record is its workload parameter of that name (workers, nodes,
processes_per_vm, …), else its metadata's (accelerator_count). Throughput is the records'
`epochs_per_min` when the spec's `work` counts epochs (or no work is given and the workload
reports it), else `steps_per_s`. Per configuration (everything but the axis) and axis value,
over complete trials:

    speedup    = throughput(N) / throughput(base)
    efficiency = speedup / (N / base)
    time for the work = work / throughput;  cost for the work = the group's cost per second
                                             (cost_usd / run time) × that time
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from spotbench.failures import is_failure  # noqa: E402
from spotbench.report.cost import WORK_STEPS  # noqa: E402
from spotbench.report.data import fmt  # noqa: E402
from spotbench.report.document import Document, Heading, Image, Para, TableBlock  # noqa: E402

RATES = {"epochs": ("epochs_per_min", 60.0, "epochs"), "steps": ("steps_per_s", 1.0, "steps")}


def _setting(df: pd.DataFrame) -> tuple[str, float, str, float] | None:
    """(axis, base, work kind, work amount) from the records, None when no record carries a
    scaling (or they disagree)."""
    scalings = {(m["scaling"]["axis"], float(m["scaling"]["base"])) for m in df["metadata"]
                if isinstance(m, dict) and isinstance(m.get("scaling"), dict)}
    if len(scalings) != 1:
        return None
    axis, base = scalings.pop()
    works = {next(iter(m["work"].items())) for m in df["metadata"]
             if isinstance(m, dict) and isinstance(m.get("work"), dict)}
    if len(works) == 1:
        kind, amount = works.pop()
        return axis, base, kind, float(amount)
    kind = "epochs" if (df["metric"] == "epochs_per_min").any() else "steps"
    return axis, base, kind, 1.0 if kind == "epochs" else float(WORK_STEPS)


def _axis_value(params: dict, meta: dict, axis: str) -> float | None:
    value = params.get(axis, (meta or {}).get(axis))
    if value is None and axis == "accelerator_count":
        value = 0
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _base_label(label: str, axis: str) -> str:
    return " · ".join(p for p in label.split(" · ") if not p.startswith(f"{axis}="))


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Index (configuration, axis value): throughput, speedup, efficiency, work time and cost."""
    setting = _setting(df) if not df.empty else None
    if setting is None:
        return pd.DataFrame()
    axis, base, kind, amount = setting
    metric, per_s, _ = RATES[kind]
    ok = df[~df["preempted"] & ~df["metadata"].map(is_failure)]
    rows = ok[ok["metric"] == metric].assign(
        n=[_axis_value(p, m, axis) for p, m in zip(ok.loc[ok["metric"] == metric, "params"],
                                                    ok.loc[ok["metric"] == metric, "metadata"], strict=True)],
        base_config=lambda d: d["config"].map(lambda c: _base_label(c, axis)),
        run_s=lambda d: (d["ended_at"] - d["started_at"]).dt.total_seconds(),
    ).dropna(subset=["n"])
    if rows.empty:
        return pd.DataFrame()
    rows = rows.assign(usd_per_s=rows["cost_usd"] / rows["run_s"].where(rows["run_s"] > 0))
    table = rows.groupby(["base_config", "n"]).agg(
        rate=("value", "mean"), usd_per_s=("usd_per_s", "mean"), trials=("value", "size"))
    speedups = []
    for (config, n), row in table.iterrows():
        ref = table.loc[config]
        speedups.append(row["rate"] / ref.at[base, "rate"] if base in ref.index else float("nan"))
    table["speedup"] = speedups
    table["efficiency"] = table["speedup"] / (table.index.get_level_values("n") / base)
    table["work_s"] = amount / (table["rate"] / per_s)
    table["work_usd"] = table["usd_per_s"] * table["work_s"]
    table.attrs.update(axis=axis, base=base, kind=kind, amount=amount, metric=metric)
    return table


def _plot(table: pd.DataFrame, path: Path) -> Path:
    axis, base = table.attrs["axis"], table.attrs["base"]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    top = base
    for config, sub in table.groupby(level="base_config"):
        n = sub.index.get_level_values("n")
        ax.plot(n, sub["speedup"], marker="o", label=str(config))
        top = max(top, float(n.max()))
    ax.plot([base, top], [1, top / base], ls="--", color="grey", label="ideal (linear)")
    ax.set_xlabel(axis)
    ax.set_ylabel(f"speedup vs {axis}={base:g}")
    ax.set_title(f"Speedup over {axis}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def section(df: pd.DataFrame, doc: Document, out_dir: Path) -> tuple[list[Path], list[pd.DataFrame]]:
    table = summary(df)
    if table.empty:
        return [], []
    a = table.attrs
    work = f"{a['amount']:,.0f} {a['kind']}"
    doc.add(Heading(f"Scaling over {a['axis']}"))
    doc.add(Para(f"Against the spec's base {a['axis']}={a['base']:g}: speedup = {a['metric']}(N) / "
                 f"{a['metric']}(base), parallel efficiency = speedup / (N / base); the time and "
                 f"cost for {work} (the spec's `work`) = {work} at that throughput, priced at the "
                 "group's cost per second. Means of complete trials."))
    shown = pd.DataFrame(index=pd.MultiIndex.from_tuples(
        [(c, fmt(n)) for c, n in table.index], names=["configuration", a["axis"]]))
    for label, column in ((a["metric"], "rate"), ("speedup", "speedup"),
                          ("parallel efficiency", "efficiency"), (f"time for {work} (s)", "work_s"),
                          (f"cost for {work} (USD)", "work_usd")):
        shown[label] = [fmt(v) for v in table[column]]
    shown["trials"] = [fmt(v, 0) for v in table["trials"]]
    doc.add(TableBlock(shown, f"Scaling over {a['axis']} (base {a['base']:g})"))
    png = _plot(table, out_dir / "scaling.png")
    doc.add(Image(png, f"Speedup over {a['axis']} (dashed: ideal linear speedup)"))
    long = table.reset_index().melt(id_vars=["base_config", "n"], var_name="column", value_name="value")
    long.insert(0, "table", "scaling")
    return [png], [long]
