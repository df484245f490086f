"""The answer first: the configurations ranked by the primary metric, per dollar and by
cost per result (issue #39). One home, called by the report, `spotbench run` and
`spotbench report`.

    for r in ranking.rank(df):          # one Ranking per workload in the results
        r.lines()                       # "Best OSU latency @ 8 B: … (24.5 µs ±3.1%, 3 trials)"
        r.shown()                       # display table, best first, the best marked

- a configuration is every swept axis kept apart: the report's `config` label (machine
  type, accelerator, spot, varying parameters) plus the parameters it leaves out
  (`workers`, which the TF section puts in its own column);
- the primary metric is the first metric the workload's descriptor follows (`history`, at
  its first size) — the report's key numbers use the same — else the first metric by name,
  lower-is-better for a time unit;
- every statistic is over the latest run's complete trials (preempted, contaminated and
  failed attempts are left out): the median, its spread (coefficient of variation, in %)
  and the number of trials; per trial: the metric (mean of its values at the size), its
  cost (`cost_usd`, the group run's total), its cost rate (cost / run time, USD per hour)
  and its performance per dollar = performance / USD per hour, performance being the
  metric (higher is better) or its inverse (lower is better);
- "per USD" is shown relative to the best configuration (×1 = the best), so a latency and a
  throughput read alike; the raw values are in summary.csv;
- the Pareto front (performance vs cost per result) is named when the fastest and the best
  per dollar are not the same configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from spotbench.history.trends import size_text
from spotbench.report.data import measured, varying_params
from spotbench.report.numbers import num, unit_label, with_unit
from spotbench.workload_registry import registry

# units whose smaller values are better when a workload does not say
_TIME_UNITS = {"s", "ms", "us", "µs", "usec", "ns", "sec", "seconds"}


@dataclass(frozen=True)
class Primary:
    workload: str
    metric: str
    label: str
    better: str  # "lower" | "higher"
    size: int | None = None

    @property
    def title(self) -> str:
        return self.label + (f" @ {size_text(self.size)}" if self.size is not None else "")


def key_metrics(df: pd.DataFrame) -> list[tuple[str, str, int | None]]:
    """(workload, metric, size or None) in the order the descriptors name them (`history`);
    every metric by name for a workload that names none."""
    out: list[tuple[str, str, int | None]] = []
    known = registry()
    for workload in sorted(df["workload"].unique()):
        sub = df[df["workload"] == workload]
        w = known.get(workload)
        tracked = list(w.history) if w is not None else []
        if not tracked:
            out += [(workload, m, None) for m in sorted(sub["metric"].unique())]
            continue
        for t in tracked:
            have = sub[sub["metric"] == t.metric]
            if have.empty:
                continue
            sizes = set(have["size_bytes"].dropna().astype(int))
            chosen = [s for s in t.sizes if s in sizes] if t.sizes else []
            out += [(workload, t.metric, s) for s in chosen] if chosen else [(workload, t.metric, None)]
    return out


def primary_metric(df: pd.DataFrame, workload: str) -> Primary | None:
    """The metric a workload's configurations are ranked by (see the module's docstring)."""
    first = next((k for k in key_metrics(df) if k[0] == workload), None)
    if first is None:
        return None
    _, metric, size = first
    w = registry().get(workload)
    tracked = {t.metric: t for t in (w.history if w is not None else ())}
    if metric in tracked:
        return Primary(workload, metric, tracked[metric].label, tracked[metric].better, size)
    units = df[(df["workload"] == workload) & (df["metric"] == metric)]["unit"].dropna()
    unit = str(units.iloc[0]) if not units.empty else ""
    return Primary(workload, metric, metric, "lower" if unit in _TIME_UNITS else "higher", size)


def key_text(records: list) -> str | None:
    """One attempt's key number as every command shows it (`status`' last result): its
    workload's primary metric at its size (the ranking's), mean of its values there, in
    people's units — `OSU latency @ 8 B = 22.02 µs`; else its first record's
    (`ops=5 ops/s (+2 more)`); None for no record."""
    if not records:
        return None
    w = registry().get(records[0].workload)
    for t in (w.history if w is not None else ()):
        have = [r for r in records if r.metric == t.metric]
        sizes = {(r.metadata or {}).get("size_bytes") for r in have}
        size = next((s for s in t.sizes if s in sizes), None)
        at = [r for r in have if size is None or (r.metadata or {}).get("size_bytes") == size]
        if at:
            label = t.label + (f" @ {size_text(size)}" if size is not None else "")
            return f"{label} = {with_unit(sum(r.value for r in at) / len(at), at[0].unit)}"
    first = records[0]
    return f"{first.metric}={with_unit(first.value, first.unit)}" + (
        f" (+{len(records) - 1} more)" if len(records) > 1 else "")


def configurations(df: pd.DataFrame) -> pd.Series:
    """Each record's configuration with every swept axis apart: the report's `config` plus
    the varying parameters it leaves out (`workers`)."""
    extra = [k for k in varying_params(df) if k == "workers"]
    if not extra:
        return df["config"]
    return pd.Series([c + "".join(f" · {k}={p.get(k)}" for k in extra if k in p)
                      for c, p in zip(df["config"], df["params"], strict=True)], index=df.index)


def _cv(values: pd.Series) -> float:
    if len(values) < 2 or values.mean() == 0:
        return float("nan")
    return float(values.std(ddof=1) / values.mean())


@dataclass
class Ranking:
    """One workload's configurations, best first by the primary metric. `table` holds the
    numbers (index: configuration): metric (median), metric_cv, trials, of (trials run), cost_usd,
    cost_cv, usd_per_hour, per_usd (performance / USD per hour), per_usd_cv, per_usd_rel
    (÷ the best's), pareto (on the performance-vs-cost front)."""

    primary: Primary
    unit: str
    table: pd.DataFrame
    best: dict[str, str] = field(default_factory=dict)  # "metric" | "per_usd" | "cost" → config

    @property
    def priced(self) -> bool:
        """Whether any configuration cost something (the local cloud costs nothing)."""
        return bool((self.table["cost_usd"].fillna(0) > 0).any())

    @property
    def disagree(self) -> bool:
        """The best by the metric is not the cheapest: more than one configuration on the
        performance-vs-cost front."""
        return self.priced and len(self.pareto()) > 1

    def pareto(self) -> list[str]:
        return [str(c) for c in self.table.index[self.table["pareto"]]]

    def lines(self) -> list[str]:
        """The answer in sentences: the best by each measure, with spread and trials."""
        t, p = self.table, self.primary
        best = self.best["metric"]
        row = t.loc[best]
        out = [f"Best {p.title} ({p.better} is better): {best}: {self.value_text(best)}, "
               f"{int(row['trials'])} trial{'s' if row['trials'] != 1 else ''}."]
        if not self.priced:
            out.append("No cost recorded (the local cloud is free): ranked by the metric only.")
            return out
        if "per_usd" in self.best:
            c = self.best["per_usd"]
            out.append(f"Best {p.label} per USD: {c}: {self.per_usd_text(c)}, "
                       f"{int(t.at[c, 'trials'])} trials.")
        if "cost" in self.best:
            c = self.best["cost"]
            out.append(f"Cheapest result: {c}: {num(t.at[c, 'cost_usd'], 3)} USD per trial "
                       f"({_spread(t.at[c, 'cost_cv'])}).")
        if self.disagree:
            out.append("Performance and cost disagree; the Pareto front (none of them both "
                       "better and cheaper than another): " + "; ".join(self.pareto()) + ".")
        return out

    def per_usd_text(self, config: str) -> str:
        """A rate (`steps/s`) per USD/h as work per USD (`41,900 steps per USD`); any other
        metric relative to the best (`×0.8 of the best`); with its spread."""
        t = self.table
        spread = _spread(t.at[config, "per_usd_cv"])
        if self.primary.better == "higher" and self.unit.endswith("/s"):
            return f"{num(t.at[config, 'per_usd'] * 3600, 3)} {self.unit[:-2]} per USD ({spread})"
        return f"×{num(t.at[config, 'per_usd_rel'], 3)} of the best ({spread})"

    def value_text(self, config: str) -> str:
        return (f"{with_unit(self.table.at[config, 'metric'], self.unit)} "
                f"({_spread(self.table.at[config, 'metric_cv'])})")

    def shown(self) -> pd.DataFrame:
        """The table for people: rank, configuration, each number with its spread, trials,
        the best of each measure marked with ★."""
        t = self.table
        out = pd.DataFrame(index=pd.Index([str(c) for c in t.index], name="configuration"))
        out.insert(0, "#", [str(i + 1) for i in range(len(t))])
        out[f"{self.primary.title} ({unit_label(self.unit)})"] = [
            self._mark(c, "metric", self.value_text(c)) for c in t.index]
        out["trials"] = [f"{int(t.at[c, 'trials'])} of {int(t.at[c, 'of'])}" for c in t.index]
        if self.priced:
            out["per USD"] = [
                self._mark(c, "per_usd", f"×{num(t.at[c, 'per_usd_rel'], 3)} ({_spread(t.at[c, 'per_usd_cv'])})")
                for c in t.index]
            out["USD per result"] = [
                self._mark(c, "cost", f"{num(t.at[c, 'cost_usd'], 3)} ({_spread(t.at[c, 'cost_cv'])})")
                for c in t.index]
            out["USD/h"] = [num(v, 3) for v in t["usd_per_hour"]]
            if self.disagree:
                out["Pareto"] = ["yes" if t.at[c, "pareto"] else "" for c in t.index]
        return out

    def _mark(self, config: str, measure: str, text: str) -> str:
        return ("★ " + text) if self.best.get(measure) == config else text

    def long(self) -> pd.DataFrame:
        """summary.csv rows: table=ranking, config, column, value (the raw numbers)."""
        long = self.table.reset_index().melt(id_vars=["config"], var_name="column", value_name="value")
        long.insert(0, "table", f"ranking {self.primary.title}")
        return long


def _spread(cv: float) -> str:
    if pd.isna(cv):
        return "±—"
    return "±0%" if abs(cv) < 5e-6 else f"±{num(100 * cv, 2)}%"  # float noise of equal values is 0


def _trials(df: pd.DataFrame, p: Primary) -> pd.DataFrame:
    """One row per complete trial (attempt) of the latest run: config, value, cost, rate."""
    latest = df[df["run"] == df["run"].max()]
    sel = latest[(latest["workload"] == p.workload) & (latest["metric"] == p.metric) & measured(latest)]
    if p.size is not None:
        sel = sel[sel["size_bytes"] == p.size]
    sel = sel.assign(rank_config=configurations(df).reindex(sel.index),
                     seconds=(sel["ended_at"] - sel["started_at"]).dt.total_seconds())
    keys = ["rank_config", "group", "started_at"]
    per = sel.groupby(keys).agg(value=("value", "mean"), cost=("cost_usd", "first"),
                                seconds=("seconds", "first")).reset_index()
    per["usd_per_hour"] = (per["cost"] / per["seconds"] * 3600).where(per["seconds"] > 0)
    perf = per["value"] if p.better == "higher" else 1 / per["value"].where(per["value"] != 0)
    per["per_usd"] = (perf / per["usd_per_hour"]).where(per["usd_per_hour"] > 0)
    return per


def _pareto(table: pd.DataFrame, better: str) -> pd.Series:
    """True where no other configuration is at least as good on the metric and on the cost
    per result, and better on one."""
    sign = -1 if better == "higher" else 1
    v, c = sign * table["metric"], table["cost_usd"]
    front = []
    for i in table.index:
        dominated = ((v <= v[i]) & (c <= c[i]) & ((v < v[i]) | (c < c[i]))).drop(i).any()
        front.append(not dominated and not pd.isna(c[i]))
    return pd.Series(front, index=table.index)


def _rank_one(df: pd.DataFrame, p: Primary) -> Ranking | None:
    per = _trials(df, p)
    if per.empty:
        return None
    latest = df[(df["run"] == df["run"].max()) & (df["workload"] == p.workload)]
    runs_of = latest.assign(rank_config=configurations(df).reindex(latest.index)) \
        .groupby("rank_config")["group"].nunique()
    g = per.groupby("rank_config")
    table = pd.DataFrame({
        "metric": g["value"].median(), "metric_cv": g["value"].agg(_cv), "trials": g.size(),
        "cost_usd": g["cost"].median(), "cost_cv": g["cost"].agg(_cv),
        "usd_per_hour": g["usd_per_hour"].median(),
        "per_usd": g["per_usd"].median(), "per_usd_cv": g["per_usd"].agg(_cv),
    })
    table.index.name = "config"
    table["of"] = runs_of.reindex(table.index).fillna(table["trials"]).astype(int)
    table = table.sort_values("metric", ascending=p.better == "lower", kind="stable")
    best = {"metric": str(table.index[0])}
    if table["per_usd"].notna().any():
        best["per_usd"] = str(table["per_usd"].idxmax())
        table["per_usd_rel"] = table["per_usd"] / table["per_usd"].max()
    else:
        table["per_usd_rel"] = float("nan")
    if (table["cost_usd"].fillna(0) > 0).any():
        best["cost"] = str(table["cost_usd"].idxmin())
    table["pareto"] = _pareto(table, p.better)
    unit = str(df[(df["workload"] == p.workload) & (df["metric"] == p.metric)]["unit"].iloc[0])
    return Ranking(p, unit, table, best)


def rank(df: pd.DataFrame) -> list[Ranking]:
    """One Ranking per workload in the results (its primary metric), workloads by name."""
    out = []
    for workload in sorted(df["workload"].unique()):
        p = primary_metric(df, workload)
        r = _rank_one(df, p) if p is not None else None
        if r is not None:
            out.append(r)
    return out


def plot(r: Ranking, path: Path) -> Path:
    """Performance vs cost per result, the Pareto front joined (lower cost to the left)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = r.table[r.table["cost_usd"].notna()]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ax.scatter(t["cost_usd"], t["metric"], color="grey")
    front = t[t["pareto"]].sort_values("cost_usd")
    ax.plot(front["cost_usd"], front["metric"], marker="o", color="tab:blue", label="Pareto front")
    for config, row in t.iterrows():
        ax.annotate(str(config), (row["cost_usd"], row["metric"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xlabel("cost per result (USD)")
    ax.set_ylabel(f"{r.primary.title} ({unit_label(r.unit)}, {r.primary.better} is better)")
    ax.set_title("Performance vs cost")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
