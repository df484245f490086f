"""The report's first screen: what ran, what failed, what changed, and the key numbers.

    blocks = summary.blocks(df, hist)     # Heading, Paras, one TableBlock

- one line on the runs and groups (complete, preempted/incomplete);
- the change points of the history (regressions first, the newest first), each one line
  with before → after in people's numbers; "no change point" when there are runs enough;
- one row per configuration: the median of the latest run's complete values of each key
  metric (the metrics each Workload descriptor's `history` follows, at its sizes; every
  metric for a workload that names none), the trials behind them, and the cost per run.

Everything else (every trial, every size) is further down and in records.csv.
"""

from __future__ import annotations

import pandas as pd

from spotbench.history.trends import History, size_text
from spotbench.report.data import measured
from spotbench.report.document import Block, Heading, Para, TableBlock
from spotbench.report.numbers import num, p_value, pct, unit_label, with_unit
from spotbench.report.ranking import configurations, key_metrics
from spotbench.report.search import by_objective
from spotbench.workload_registry import registry

MAX_CHANGES = 5  # change points listed in the summary; the History section has them all


def _label(df: pd.DataFrame, workload: str, metric: str, size: int | None) -> str:
    w = registry().get(workload)
    names = {t.metric: t.label for t in (w.history if w is not None else ())}
    label = names.get(metric, metric)
    return label + (f" @ {size_text(size)}" if size is not None else "")


def key_numbers(df: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: the latest run's median of each key metric (display strings)."""
    latest = df[df["run"] == df["run"].max()]
    latest = latest.assign(config=configurations(df).reindex(latest.index))  # every swept axis apart
    configs = sorted(latest["config"].unique())
    table = pd.DataFrame(index=pd.Index(configs, name="configuration"))
    for workload, metric, size in key_metrics(latest):
        sel = latest[(latest["workload"] == workload) & (latest["metric"] == metric) & measured(latest)]
        if size is not None:
            sel = sel[sel["size_bytes"] == size]
        if sel.empty:
            continue
        unit = str(sel["unit"].iloc[0])
        medians = sel.groupby("config")["value"].median()
        table[_label(df, workload, metric, size)] = [
            with_unit(medians.get(c), unit) if c in medians else "—" for c in configs]
    per_group = latest.assign(ok=measured(latest)).groupby(["config", "group"]).agg(ok=("ok", "any"))
    done = per_group.groupby(level="config")["ok"].agg(["sum", "size"])
    table["complete trials"] = [f"{int(done.at[c, 'sum'])} of {int(done.at[c, 'size'])}" for c in configs]
    cost = latest.groupby(["config", "group", "started_at"])["cost_usd"].first().groupby(level="config").sum(
        min_count=1)
    if cost.notna().any():
        table["cost of the run"] = [("—" if pd.isna(cost.get(c)) else num(cost.get(c), 3) + " USD")
                                    for c in configs]
    objective = df.attrs.get("objective")
    if objective is not None:  # a search's (or matrix's) objective: its column, best first
        sel = latest[(latest["metric"] == objective.metric) & ~latest["preempted"]]
        medians = sel.groupby("config")["value"].median()
        if not medians.empty and objective.metric not in table:
            table.insert(0, objective.metric, [num(medians.get(c)) if c in medians else "—" for c in configs])
        return by_objective(table, _with_attrs(latest, df))
    return table


def _with_attrs(frame: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame.attrs = dict(df.attrs)
    return frame


def _change_line(c: dict) -> str:
    before = with_unit(c["before_mean"], c["unit"])
    after = with_unit(c["after_mean"], c["unit"])
    return (f"{c['kind'].capitalize()}: {c['series']}: {before} → {after} ({pct(c['rel_change'])}) "
            f"from run {c['run']} ({p_value(c['pvalue'])})")


def change_blocks(hist: History | None, runs: int) -> list[Block]:
    if hist is None:
        return [Para(f"{runs} run: no history yet (change points need several runs).", anchor="change-points")] \
            if runs == 1 else []
    newest_first = sorted(hist.changes(), key=lambda c: c["run"], reverse=True)
    changes = sorted(newest_first, key=lambda c: c["kind"] != "regression")  # stable: regressions first
    if not changes:
        return [Para(f"No change point over {len(hist.runs)} runs (p < {hist.max_pvalue:g}).",
                     anchor="change-points")]
    out: list[Block] = []
    for i, c in enumerate(changes[:MAX_CHANGES]):
        out.append(Para(_change_line(c), anchor="change-points" if i == 0 else "",
                        strong=c["kind"] == "regression"))
    if len(changes) > MAX_CHANGES:
        out.append(Para(f"… and {len(changes) - MAX_CHANGES} more change points in History below."))
    return out


def blocks(df: pd.DataFrame, hist: History | None, failed: list[str] | None = None) -> list[Block]:
    """The Summary's blocks. `failed`: one line per failed group (the failures banner's
    lines, which follows the summary): counted here, in bold, before the change points."""
    runs = df["run"].nunique()
    groups = df.assign(ok=measured(df)).groupby(["run", "group"])["ok"].any()  # a failed group is not complete
    complete = int(groups.sum())
    cut = len(groups) - complete
    ran = (f"{runs} run{'s' if runs != 1 else ''} ({df['run'].min()}"
           + (f" … {df['run'].max()}" if runs > 1 else "") + f"), {len(groups)} group runs: "
           f"{complete} complete" + (f", {cut} preempted, failed or incomplete (left out of every average)"
                                    if cut else "") + ".")
    out: list[Block] = [Heading("Summary", anchor="summary"), Para(ran)]
    if failed:
        shown = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more" if len(failed) > 3 else "")
        out.append(Para(f"{len(failed)} group{'s' if len(failed) != 1 else ''} failed (see Failures "
                        f"below): {shown}", anchor="failures", strong=True))
    out += change_blocks(hist, runs)
    table = key_numbers(df)
    if len(table.columns):
        units = sorted({unit_label(u) for u in df[measured(df)]["unit"].dropna().unique()})
        out.append(TableBlock(table, "Key numbers: median of the latest run's complete trials "
                                     f"({', '.join(units)}); every trial and size below and in "
                                     "records.csv", anchor="key-numbers"))
    return out
