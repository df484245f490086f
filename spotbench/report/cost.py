"""Cost section: cost per run, cost of a fixed amount of work, normalised to a base config.

One row per configuration (and worker count for TF): complete runs, mean run time, VMs per
run, mean cost per run (each stored group run counted once), and for TF the cost and time
to do the spec's `work: {steps: N}` (records carry it; default `WORK_STEPS`) training steps; `normalised` = this row's cost / the base row's cost
(per WORK_STEPS steps for TF, per run otherwise), as GPU-vs-CPU cloud comparisons report it.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import pandas as pd  # noqa: E402

from spotbench.prices import notes as price_notes  # noqa: E402
from spotbench.report.data import fmt  # noqa: E402
from spotbench.report.document import Document, Heading, Image, Para, TableBlock  # noqa: E402
from spotbench.report.escape import save_figure  # noqa: E402

WORK_STEPS = 10_000


def work_steps(df: pd.DataFrame) -> float:
    """The steps cost-vs-time prices: the spec's `work: {steps: N}` (records carry it), else
    WORK_STEPS."""
    given = {m["work"]["steps"] for m in df["metadata"]
             if isinstance(m, dict) and isinstance(m.get("work"), dict) and "steps" in m["work"]}
    return float(given.pop()) if len(given) == 1 else float(WORK_STEPS)


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """One row per stored group run: config, workers, members, seconds, cost, steps/s."""
    d = df.assign(
        workers=[int(p.get("workers", 0)) or None for p in df["params"]],
        seconds=(df["ended_at"] - df["started_at"]).dt.total_seconds(),
        key=df["run"] + "/" + df["group"] + "/" + df["started_at"].astype(str),
    )
    first = d.groupby("key").first()
    sps = d[d["metric"] == "steps_per_s"].groupby("key")["value"].mean()
    return first.assign(steps_per_s=sps.reindex(first.index))


def summary(df: pd.DataFrame, base: str | None = None) -> pd.DataFrame:
    r = runs(df)
    ok = r[~r["preempted"]]
    if ok.empty:
        return pd.DataFrame()
    idx = ["config", "workers"]
    ok = ok.assign(workers=ok["workers"].fillna(0).astype(int))
    table = ok.groupby(idx).agg(
        runs=("seconds", "size"), seconds=("seconds", "mean"), members=("members", "max"),
        cost_usd=("cost_usd", lambda s: s.mean() if s.notna().all() else float("nan")),
        steps_per_s=("steps_per_s", "mean"),
    )
    table["preempted"] = r[r["preempted"]].assign(workers=lambda x: x["workers"].fillna(0).astype(int)) \
        .groupby(idx).size().reindex(table.index).fillna(0).astype(int)
    steps = work_steps(df)
    table.attrs["work_steps"] = steps
    table["work_s"] = steps / table["steps_per_s"]
    table["work_usd"] = table["cost_usd"] / table["seconds"] * table["work_s"]
    measure = "work_usd" if table["work_usd"].notna().any() else "cost_usd"
    base_key = _base_row(table, ok, base)
    base_cost = table.at[base_key, measure] if base_key is not None else float("nan")
    table["normalised"] = table[measure] / base_cost if base_cost else float("nan")
    table.attrs["base"] = base_key
    table.attrs["measure"] = measure
    return table


def _base_row(table: pd.DataFrame, ok: pd.DataFrame, base: str | None):
    if not base:
        return table.index[0]
    key, _, value = base.partition("=")
    if not value:
        raise ValueError(f"--base {base!r}: give key=value, e.g. machine_type=n1-standard-4 or workers=1")
    for idx in table.index:
        rows = ok[(ok["config"] == idx[0]) & (ok["workers"] == idx[1])]
        for _, row in rows.iterrows():
            have = row.get(key) if key in row.index else row["params"].get(key)
            if str(have) == value:
                return idx
    raise ValueError(f"--base {base}: no configuration with {key}={value} in the results")


def _plots(table: pd.DataFrame, out_dir: Path, cost_plot: bool = True) -> list[Path]:
    """Throughput vs VMs (TF); cost vs time unless nothing cost anything (`cost_plot`: a
    cost axis of ±0.04 USD around 0 says nothing)."""
    pngs = []
    tf = table[table["steps_per_s"].notna()]
    if not tf.empty:
        fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole VMs
        for config, sub in tf.groupby(level="config"):
            ax.plot(sub["members"], sub["steps_per_s"], marker="o", label=str(config))
        ax.set_xlabel("VMs per run")
        ax.set_ylabel("steps/s")
        ax.set_title("Throughput vs number of VMs")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        pngs.append(out_dir / "throughput_vs_vms.png")
        save_figure(fig, pngs[-1])
        plt.close(fig)
    x, y = ("work_s", "work_usd") if table["work_usd"].notna().any() else ("seconds", "cost_usd")
    pts = table[table[x].notna() & table[y].notna()]
    if cost_plot and not pts.empty:
        fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
        for (config, workers), row in pts.iterrows():
            label = f"{config}" + (f" ×{workers}w" if workers else "")
            ax.scatter(row[x], row[y])
            ax.annotate(label, (row[x], row[y]), fontsize=7, xytext=(3, 3), textcoords="offset points")
        what = f"{table.attrs['work_steps']:,.0f} steps" if x == "work_s" else "one run"
        ax.set_xlabel(f"time for {what} (s)")
        ax.set_ylabel(f"cost for {what} (USD)")
        ax.set_title("Cost vs time (lower left is better)")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        pngs.append(out_dir / "cost_vs_time.png")
        save_figure(fig, pngs[-1])
        plt.close(fig)
    return pngs


def _price_tables(df: pd.DataFrame, doc: Document) -> None:
    """Which price tables priced the runs, and a warning for prices older than the run."""
    lines, late = price_notes.recorded(
        ((m or {}).get("price_date"), (m or {}).get("price_source"), started)
        for m, started in runs(df)[["metadata", "started_at"]].itertuples(index=False))
    if lines:
        doc.add(Para("Price tables: " + "; ".join(lines) + "."
                     + (f" Warning: {late}." if late else "")))


def section(df: pd.DataFrame, doc: Document, out_dir: Path, base: str | None = None):
    table = summary(df, base)
    if table.empty:
        return [], []
    doc.add(Heading("Cost"))
    unpriced = int(df.groupby(["run", "group"])["cost_usd"].first().isna().sum())
    base_key = table.attrs["base"]
    steps = f"{table.attrs['work_steps']:,.0f} steps"
    per = steps if table.attrs["measure"] == "work_usd" else "run"
    doc.add(Para(
        f"Cost per run = instance time of the run (billed per second, one-minute minimum) × VMs, "
        f"from each record's cost_usd. Normalised = cost per {per} / that of the base "
        f"configuration ({base_key[0]}" + (f", {base_key[1]} workers" if base_key[1] else "")
        + "; choose with --base key=value). Preempted runs are excluded from the means."
        + (f" {unpriced} group runs have no price (cost shown as —)." if unpriced else "")
    ))
    shown = pd.DataFrame(index=pd.MultiIndex.from_tuples(
        [(c, str(w) if w else "—") for c, w in table.index], names=["configuration", "workers"]))
    shown["runs"] = table["runs"].astype(int).astype(str).to_numpy()  # by position: indexes differ
    shown["preempted"] = table["preempted"].astype(str).to_numpy()
    shown["VMs"] = [fmt(v, 0) for v in table["members"]]
    shown["run time (s)"] = [fmt(v, 2) for v in table["seconds"]]
    shown["cost per run (USD)"] = [fmt(v, 4) for v in table["cost_usd"]]
    if table["work_usd"].notna().any():
        shown[f"time for {steps} (s)"] = [fmt(v, 2) for v in table["work_s"]]
        shown[f"cost for {steps} (USD)"] = [fmt(v, 4) for v in table["work_usd"]]
    shown["normalised cost"] = [fmt(v, 2) for v in table["normalised"]]
    doc.add(TableBlock(shown, "Cost per configuration (means of complete runs)"))
    priced = bool(table["cost_usd"].fillna(0).gt(0).any())  # the local cloud costs nothing
    if priced:  # no price table, no stale-price warning, for prices of 0
        _price_tables(df, doc)
    pngs = _plots(table, out_dir, cost_plot=priced)
    for png in pngs:
        doc.add(Image(png, png.stem.replace("_", " ")))
    long = table.reset_index().melt(id_vars=["config", "workers"], var_name="column", value_name="value")
    long.insert(0, "table", "cost")
    return pngs, [long]
