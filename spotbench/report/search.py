"""The report of a search (or a matrix) opens with the answer: the best trial, its
parameters, its validation and test objective and its cost; then the leaderboard sorted by
the objective (also `leaderboard.csv`), best-so-far against trials and against dollars
spent, the objective against each parameter, parameter importances, parallel coordinates,
and, for several objectives, the Pareto front.

Importances and the Pareto front are Optuna's: the trials are put in an in-memory study
(`optuna.trial.create_trial`, distributions from the values seen) and asked
`optuna.importance.get_param_importances` (fANOVA, fixed seed) and `study.best_trials`
(the non-dominated trials of a multi-objective study).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from spotbench.report.data import param_text  # noqa: E402
from spotbench.report.document import Block, Heading, Image, Para, TableBlock  # noqa: E402
from spotbench.report.escape import write_csv  # noqa: E402
from spotbench.report.numbers import num  # noqa: E402
from spotbench.report.trials import Objective, Trial, best, metrics_of, rank, varying  # noqa: E402

MAX_ROWS = 50  # leaderboard rows shown (every trial is in the CSV)


def by_objective(table: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """`table` (first index level: `config`) with its configurations best first by the
    report's objective (`df.attrs["objective"]`, the median of complete records); as it
    was without one. Configurations without the metric keep their order, after the rest."""
    objective = df.attrs.get("objective")
    if objective is None or table.empty or "metric" not in df:
        return table
    ok = df[(df["metric"] == objective.metric) & ~df["preempted"]]
    medians = ok.groupby("config")["value"].median()
    configs = list(dict.fromkeys(table.index.get_level_values(0)))
    scored = sorted((c for c in configs if c in medians.index), key=lambda c: -objective.sign * medians[c])
    order = scored + [c for c in configs if c not in medians.index]
    return table.reindex(order, level=0) if table.index.nlevels > 1 else table.reindex(order)


def test_metric(objective: Objective) -> str | None:
    """The held-out twin of a validation objective (`val_accuracy` → `test_accuracy`)."""
    for prefix in ("val_", "validation_"):
        if objective.metric.startswith(prefix):
            return "test_" + objective.metric[len(prefix):]
    return None


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def pruning(notes: list[dict[str, Any]]) -> list[Block]:
    """What the pruner saved: control's note of each pruned group (`note_pruned`: the
    seconds it would still have run × its price per hour). Nothing when none was pruned."""
    usable = [n for n in notes if isinstance(n.get("saved_usd"), (int, float))
              and isinstance(n.get("ran_s"), (int, float)) and isinstance(n.get("expected_s"), (int, float))]
    if not usable:
        return []
    saved = sum(float(n["saved_usd"]) for n in usable)
    spared = sum(max(0.0, float(n["expected_s"]) - float(n["ran_s"])) for n in usable)
    which = ", ".join(sorted((str(n.get("trial", n.get("group"))) for n in usable), key=lambda t: (len(t), t)))
    count = f"{len(usable)} trial{'s' if len(usable) != 1 else ''}"
    return [Para(f"Pruning saved {_usd(saved)}: the pruner stopped {count} early (trial {which}), "
                 f"{num(spared / 60)} machine-minutes they would still have run at their price per hour.")]


def answer(found: list[Trial], objectives: list[Objective], pruned: list[dict[str, Any]] | None = None) -> list[Block]:
    """The first blocks: which trial won, with what, at what cost; what pruning saved."""
    main = objectives[0]
    top = best(found, main)
    searched = varying(found)
    done = sum(1 for t in found if t.state == "complete")
    head = Heading("Best trial", 2, anchor="best-trial")
    if top is None:
        return [head, Para(f"No complete trial reported {main.metric} yet ({len(found)} trials, "
                           f"{done} complete).", strong=True), *pruning(pruned or [])]
    twin = test_metric(main)
    parts = [f"Best of {len(found)} trials ({done} complete) by {main}: {top.label} "
             f"(group {', '.join(top.groups)}), {main.metric} = {num(top.values[main.metric])}"]
    if twin and twin in top.values:
        parts.append(f"{twin} = {num(top.values[twin])} (held out: reported, never optimized)")
    parts.append(f"cost {_usd(top.total_usd)}")
    params = ", ".join(f"{k}={param_text(top.params.get(k))}" for k in searched) or "no parameter varies"
    return [head, Para("; ".join(parts) + ".", strong=True), Para(f"Its parameters: {params}."),
            *pruning(pruned or [])]


def leaderboard(found: list[Trial], objectives: list[Objective]) -> pd.DataFrame:
    """Every trial, best first by the first objective (numbers as numbers: the CSV's)."""
    main = objectives[0]
    metrics = [o.metric for o in objectives]
    twin = test_metric(main)
    if twin and twin in metrics_of(found) and twin not in metrics:
        metrics.append(twin)
    rows = []
    for place, t in enumerate(rank(found, main), 1):
        row: dict[str, Any] = {"rank": place if main.metric in t.values else None, "trial": t.number,
                               "group": " ".join(t.groups), "state": t.state}
        row.update({k: t.params.get(k) for k in varying(found)})
        row.update({m: t.values.get(m) for m in metrics})
        row.update({"attempts": t.attempts, "cost_usd": t.cost_usd, "artifacts_bytes": t.artifacts_bytes,
                    "storage_usd_month": t.storage_usd_month})
        rows.append(row)
    return pd.DataFrame(rows)


def _shown(board: pd.DataFrame) -> pd.DataFrame:
    out = board.head(MAX_ROWS).copy()
    for col in out.columns:
        if col in ("rank", "trial", "attempts", "artifacts_bytes"):
            out[col] = [("" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{int(v):,}")
                        for v in out[col]]
        elif col in ("cost_usd", "storage_usd_month"):
            out[col] = [_usd(None if pd.isna(v) else float(v)) for v in out[col]]
        elif col not in ("group", "state"):
            out[col] = [param_text(v) if not isinstance(v, float) else num(v) for v in out[col]]
    return out.set_index("rank")


def best_so_far(found: list[Trial], objective: Objective) -> pd.DataFrame:
    """In the order trials finished: the best value so far and the dollars spent by then."""
    done = sorted((t for t in found if objective.metric in t.values and t.finished_at),
                  key=lambda t: (t.finished_at, t.number))
    rows, spent, top = [], 0.0, None
    for i, t in enumerate(done, 1):
        value = t.values[objective.metric]
        top = value if top is None or objective.better(value, top) else top
        spent += t.total_usd or 0.0
        rows.append({"trials": i, "usd": spent, "value": value, "best": top})
    return pd.DataFrame(rows)


def _plot_progress(curve: pd.DataFrame, objective: Objective, path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), dpi=110)
    for ax, x, label in ((axes[0], "trials", "trials finished"), (axes[1], "usd", "USD spent")):
        ax.scatter(curve[x], curve["value"], s=12, color="#999", label="trial")
        ax.step(curve[x], curve["best"], where="post", color="#c44e52", label="best so far")
        ax.set_xlabel(label)
        ax.set_ylabel(objective.metric)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"best {objective.metric} so far", fontsize=10)
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _plot_params(found: list[Trial], objective: Objective, params: list[str], path: Path) -> Path:
    scored = [t for t in found if objective.metric in t.values]
    cols = min(3, len(params))
    rows = math.ceil(len(params) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), dpi=110, squeeze=False)
    for ax, name in zip(axes.flat, params, strict=False):
        xs = [t.params.get(name) for t in scored]
        ys = [t.values[objective.metric] for t in scored]
        if _numeric(xs):
            ax.scatter(xs, ys, s=14, color="#4c72b0")
        else:
            labels = sorted({param_text(x) for x in xs})
            ax.scatter([labels.index(param_text(x)) for x in xs], ys, s=14, color="#4c72b0")
            ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=30)
        ax.set_xlabel(name)
        ax.set_ylabel(objective.metric, fontsize=8)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(params):]:
        ax.axis("off")
    return _save(fig, path)


def _distribution(values: list[Any]):  # noqa: ANN202 - an optuna distribution
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if _numeric(values) and all(isinstance(v, int) for v in values):
        return IntDistribution(min(values), max(values))
    if _numeric(values):
        return FloatDistribution(float(min(values)), float(max(values)))
    return CategoricalDistribution(sorted({param_text(v) for v in values}))


def study_of(found: list[Trial], objectives: list[Objective], params: list[str]):  # noqa: ANN201 - optuna.Study
    """An in-memory Optuna study holding the complete trials (for its importance and Pareto
    tools); None when fewer than two trials have every objective."""
    import optuna

    scored = [t for t in found if all(o.metric in t.values for o in objectives)
              and all(k in t.params for k in params)]
    if len(scored) < 2:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {k: _distribution([t.params[k] for t in scored]) for k in params}
    study = optuna.create_study(directions=[o.direction for o in objectives])
    for t in scored:
        study.add_trial(optuna.trial.create_trial(
            params={k: _as(dists[k], t.params[k]) for k in params}, distributions=dists,
            values=[t.values[o.metric] for o in objectives], user_attrs={"trial": t.number}))
    return study


def _as(dist: Any, value: Any) -> Any:
    """`value` as `dist` holds it (float, int, or the category's text)."""
    from optuna.distributions import FloatDistribution, IntDistribution

    if isinstance(dist, FloatDistribution):
        return float(value)
    if isinstance(dist, IntDistribution):
        return int(value)
    return param_text(value)


def importances(found: list[Trial], objective: Objective, params: list[str]) -> dict[str, float]:
    """Parameter → importance for `objective` (Optuna's fANOVA, seed 0); {} when there is
    too little to tell (fewer than two scored trials, or no parameter varies)."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator

    moving = [k for k in params if len({param_text(t.params.get(k)) for t in found}) > 1]
    study = study_of(found, [objective], moving) if moving else None
    if study is None:
        return {}
    try:
        return dict(optuna.importance.get_param_importances(study, evaluator=FanovaImportanceEvaluator(seed=0)))
    except (ValueError, RuntimeError):  # e.g. every value equal
        return {}


def pareto(found: list[Trial], objectives: list[Objective]) -> list[int]:
    """Trial numbers on the Pareto front of `objectives` (Optuna's `study.best_trials`)."""
    study = study_of(found, objectives, [])
    if study is None:
        return []
    return sorted(int(t.user_attrs["trial"]) for t in study.best_trials)


def _plot_bars(values: dict[str, float], title: str, path: Path) -> Path:
    names = list(values)
    fig, ax = plt.subplots(figsize=(6, 1.4 + 0.4 * len(names)), dpi=110)
    ax.barh(range(len(names)), list(values.values()), color="#55a868")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("importance (fANOVA; sums to 1)")
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def _plot_parallel(found: list[Trial], objective: Objective, params: list[str], path: Path) -> Path:
    scored = [t for t in found if objective.metric in t.values]
    axes_names = [*params, objective.metric]
    columns: dict[str, list[float]] = {}
    ticks: dict[str, tuple[list[float], list[str]]] = {}
    for name in axes_names:
        raw = [t.values[name] if name == objective.metric else t.params.get(name) for t in scored]
        if _numeric(raw):
            lo, hi = min(raw), max(raw)
            columns[name] = [(v - lo) / (hi - lo) if hi > lo else 0.5 for v in raw]
            ticks[name] = ([0.0, 1.0], [num(float(lo)), num(float(hi))])
        else:
            labels = sorted({param_text(v) for v in raw})
            step = 1 / max(1, len(labels) - 1)
            columns[name] = [labels.index(param_text(v)) * step if len(labels) > 1 else 0.5 for v in raw]
            ticks[name] = ([i * step for i in range(len(labels))], labels)
    values = [t.values[objective.metric] for t in scored]
    lo, hi = min(values), max(values)
    cmap = plt.get_cmap("viridis")
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(axes_names)), 3.6), dpi=110)
    for i, value in enumerate(values):
        shade = (value - lo) / (hi - lo) if hi > lo else 1.0
        shade = shade if objective.direction == "maximize" else 1 - shade
        ax.plot(range(len(axes_names)), [columns[n][i] for n in axes_names], color=cmap(shade),
                alpha=0.7, linewidth=1)
    for x, name in enumerate(axes_names):
        ax.axvline(x, color="#444", linewidth=0.8)
        for y, text in zip(*ticks[name], strict=True):
            ax.text(x + 0.03, y, text, fontsize=7, va="center")
    ax.set_xticks(range(len(axes_names)), axes_names, fontsize=8)
    ax.set_yticks([])
    ax.set_title(f"parallel coordinates (colour: {objective.metric}, bright = better)", fontsize=10)
    return _save(fig, path)


def _plot_pareto(found: list[Trial], objectives: list[Objective], front: list[int], path: Path) -> Path:
    a, b = objectives[0], objectives[1]
    scored = [t for t in found if a.metric in t.values and b.metric in t.values]
    on = [t for t in scored if t.number in front]
    fig, ax = plt.subplots(figsize=(5.5, 4), dpi=110)
    ax.scatter([t.values[a.metric] for t in scored], [t.values[b.metric] for t in scored], s=14,
               color="#999", label="trial")
    on.sort(key=lambda t: t.values[a.metric])
    ax.plot([t.values[a.metric] for t in on], [t.values[b.metric] for t in on], "o-", color="#c44e52",
            label="Pareto front")
    ax.set_xlabel(str(a))
    ax.set_ylabel(str(b))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def section(found: list[Trial], objectives: list[Objective], out_dir: Path) -> tuple[list[Block], list[Path]]:
    """The search's blocks after the answer, and the PNGs and CSV written."""
    main = objectives[0]
    params = varying(found)
    board = leaderboard(found, objectives)
    csv = out_dir / "leaderboard.csv"
    write_csv(board, csv)
    blocks: list[Block] = [Heading("Search", 2, anchor="search"),
                           TableBlock(_shown(board), f"Leaderboard: every trial by {main}, best first "
                                      f"(first {MAX_ROWS} shown; all in {csv.name}). Cost: its "
                                      "attempts' and a month of keeping its artifacts.")]
    pngs: list[Path] = []
    curve = best_so_far(found, main)
    if len(curve) >= 2:
        pngs.append(_plot_progress(curve, main, out_dir / "search_best_so_far.png"))
        blocks.append(Image(pngs[-1], f"best {main.metric} so far, against trials and against dollars spent"))
    if params and len(curve) >= 2:
        pngs.append(_plot_params(found, main, params, out_dir / "search_params.png"))
        blocks.append(Image(pngs[-1], f"{main.metric} against each parameter"))
        weights = importances(found, main, params)
        if weights:
            pngs.append(_plot_bars(weights, f"parameter importance for {main.metric}",
                                   out_dir / "search_importance.png"))
            blocks.append(Image(pngs[-1], "parameter importances (Optuna's fANOVA)"))
        pngs.append(_plot_parallel(found, main, params, out_dir / "search_parallel.png"))
        blocks.append(Image(pngs[-1], "parallel coordinates: one line per trial"))
    if len(objectives) >= 2:
        front = pareto(found, objectives)
        if front:
            blocks.append(Para(f"Pareto front of {', '.join(str(o) for o in objectives)}: trials "
                               f"{', '.join(str(n) for n in front)}."))
            pngs.append(_plot_pareto(found, objectives, front, out_dir / "search_pareto.png"))
            blocks.append(Image(pngs[-1], "Pareto front (first two objectives)"))
    return blocks, pngs
