"""`spotbench report`: results → Markdown, one self-contained HTML page, PNG plots, CSV.

    paths = write_report("file:///…/results/osu-local", Path("reports/osu-local"))

Sections are added per workload found in the results (each workload's descriptor names its
section builder) plus costs; each builds tables/plots from one shared DataFrame
(`data.frame`) and adds nothing when its workload has no rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import pandas as pd

from spotbench.report import data, cost, history, ranking, reference as reference_mod, scaling, search, summary
from spotbench.report import trials as trials_mod
from spotbench.report import contaminated as contaminated_section
from spotbench.report import failures as failures_section
from spotbench.report.document import Document, Heading, Image, Para, TableBlock, to_html, to_markdown
from spotbench.report.escape import out_folder_name, write_csv, write_file
from spotbench.report.meta import typed_records
from spotbench.results import ResultStore
from spotbench.workload_registry import registry

__all__ = ["NoResults", "ReportPaths", "write_report", "default_out_dir"]


class NoResults(LookupError):
    """The results URL holds no records yet."""


@dataclass(frozen=True)
class ReportPaths:
    markdown: Path
    html: Path
    csv: Path  # every table in long form (table, config, …, column, value)
    png: list[Path] = field(default_factory=list)
    records_csv: Path | None = None  # the raw records, one row per value
    summary: list[str] = field(default_factory=list)  # the Summary's sentences (runs, failures, changes)
    answer: list[str] = field(default_factory=list)  # the ranking's sentences: best by metric, per USD, cost
    rankings: list[ranking.Ranking] = field(default_factory=list)  # for a terminal table (`run`, `report`)


def default_out_dir(results_url: str) -> Path:
    """`reports/<name>`, the name from the URL the user gave (its last part, made one safe
    path segment). Never from a record: a record's `sweep` is whatever a VM wrote."""
    return Path("reports") / out_folder_name(results_url.rstrip("/").rsplit("/", 1)[-1] or "results")


# Labels are data (metric names and units from records): matplotlib's mathtext would parse
# `$…$` in them, and a malformed formula raises. Plots show text as it is.
PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}


def write_report(
    results_url: str,
    out_dir: Path,
    *,
    reference: Path | None = None,
    prices: Path | None = None,
    base: str | None = None,
    baseline: str | None = None,
    objectives: list | None = None,
) -> ReportPaths:
    """`baseline`: the run the history section compares the latest run with (default: each
    series' first run). `objectives` (`"metric:max"`, `{metric, direction}`, or the spec's
    `search.objective`): the report opens with the best trial and a Search section, and
    the workloads' tables list configurations best first (`report/search.py`)."""
    store = ResultStore(results_url)
    records = store.read()
    if not records:
        raise NoResults(
            f"no results under {results_url}: run the sweep first (`spotbench run SPEC`) "
            "or check the URL (it is the spec's `results`, e.g. file:///abs/path)"
        )
    records, dropped = typed_records(records)  # a badly typed value never reaches a reader
    if prices is not None:  # re-price with the user's rows (historical or negotiated prices)
        from spotbench.costs import annotate

        records = annotate(records, prices)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    df = data.frame(records)
    sweeps = ", ".join(sorted(df["sweep"].unique()))
    doc = Document(f"spotbench report: {sweeps}")
    loaded = history.load(results_url, df)  # None: fewer than two runs
    summary_at = len(doc.blocks)  # the summary goes first, once the failures are known
    doc.add(Para(
        f"Results: {results_url} · {df['run'].nunique()} run{'s' if df['run'].nunique() != 1 else ''} · "
        f"{len(df):,} values from "
        f"{df['group'].nunique()} groups · clouds: {', '.join(sorted(df['cloud'].unique()))}."
    ))
    failed = failures_section.section(df, doc)  # the banner: failed groups before any chart
    contaminated_section.section(df, doc)  # attempts kept apart (stalled, overlapped), and why
    goals = trials_mod.parse_objectives(objectives)
    found = trials_mod.trials(records) if goals else []
    if found:
        df.attrs["objective"] = goals[0]  # tables list configurations best first
    first = summary.blocks(df, loaded[0] if loaded else None, failed)
    doc.insert(summary_at, *first)
    ranked = ranking.rank(df)
    answer_blocks, pngs, ranked_long = _answer(ranked, out_dir)
    doc.insert(summary_at, *answer_blocks)  # the answer opens the report
    search_blocks, search_pngs = search.section(found, goals, out_dir) if found else ([], [])
    if found:  # a search's best trial before anything else; its leaderboard after the summary
        told = search.answer(found, goals, pruned=store.pruning_notes())
        doc.insert(summary_at, *told)
        first = [*told, *first]
        doc.add(*search_blocks)
    pngs += search_pngs
    exports: list[pd.DataFrame] = []

    problems = store.skipped + dropped + (df.attrs.get("problems") or [])
    if problems:
        shown = problems[:20] + ([f"… and {len(problems) - 20} more"] if len(problems) > 20 else [])
        doc.add(Para(f"Ignored {len(problems)} malformed record(s), value(s) or file(s) in the "
                     "results: " + "; ".join(shown)))

    with matplotlib.rc_context(PLAIN_TEXT):
        for add_section in _sections():
            p, e = add_section(df, doc, out_dir, reference=reference, prices=prices, base=base,
                               results_url=results_url, baseline=baseline, loaded=loaded)
            pngs += p
            exports += e

    md = out_dir / "report.md"
    write_file(md, to_markdown(doc, out_dir))
    page = out_dir / "report.html"
    write_file(page, to_html(doc))
    summary_csv = out_dir / "summary.csv"
    write_csv(pd.concat(exports, ignore_index=True) if exports else pd.DataFrame(), summary_csv)
    write_csv(pd.concat(ranked_long, ignore_index=True) if ranked_long else pd.DataFrame(),
              out_dir / "ranking.csv")
    records_csv = out_dir / "records.csv"
    write_csv(df.drop(columns=["config", "sample"]), records_csv)
    return ReportPaths(markdown=md, html=page, csv=summary_csv, png=pngs, records_csv=records_csv,
                       summary=[b.text for b in first if isinstance(b, Para)],
                       answer=[line for r in ranked for line in r.lines()], rankings=ranked)


def _answer(ranked: list[ranking.Ranking], out_dir: Path) -> tuple[list, list[Path], list[pd.DataFrame]]:
    """The report's opening: per workload the ranking's sentences and table, and the
    performance-vs-cost plot when the best by metric and the best per dollar differ."""
    blocks: list = []
    pngs: list[Path] = []
    for i, r in enumerate(ranked):
        blocks.append(Heading(f"The answer: {r.primary.title}", anchor="answer" if i == 0 else ""))
        blocks += [Para(line, strong=j == 0) for j, line in enumerate(r.lines())]
        blocks.append(TableBlock(r.shown(), "Configurations ranked by the primary metric (the latest "
                                            "run's complete trials: median ± coefficient of variation; "
                                            "per USD: performance per USD/h, × the best's; "
                                            "★ the best of each column)",
                                 anchor="ranking" if i == 0 else ""))
        if r.disagree:
            with matplotlib.rc_context(PLAIN_TEXT):
                pngs.append(ranking.plot(r, out_dir / f"pareto_{i + 1}.png"))
            blocks.append(Image(pngs[-1], "Performance vs cost per result (the line: the Pareto front)"))
    return blocks, pngs, [r.long() for r in ranked]


def _sections():
    """Section builders in report order; each returns (pngs, long-form CSV frames)."""

    def workload_section(builder):
        def section(df, doc, out_dir, **_):
            return builder(df, doc, out_dir)

        return section

    # one section per registered workload (its descriptor names the builder), in registry order
    workloads = [workload_section(b) for w in registry().values() if (b := w.report_section())]

    def scaling_section(df, doc, out_dir, **_):
        return scaling.section(df, doc, out_dir)

    def cost_section(df, doc, out_dir, base=None, **_):
        return cost.section(df, doc, out_dir, base)

    def reference_section(df, doc, out_dir, reference=None, **_):
        return reference_mod.section(df, doc, reference)

    def history_section(df, doc, out_dir, results_url=None, baseline=None, loaded=None, **_):
        return history.section(df, doc, out_dir, results_url, baseline, loaded=loaded)

    return [*workloads, scaling_section, cost_section, history_section, reference_section]
