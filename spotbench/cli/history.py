"""History commands: `spotbench query`, `spotbench compact`, `spotbench history`."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import typer
from rich.table import Table as RichTable
from rich.text import Text

from spotbench.cli._common import EXIT_BAD_INPUT, Column, console, dropped_note, fail, fit_table, spec_or_exit
from spotbench.terminal import plain

SpecArg = typer.Argument(..., help="sweep spec (YAML); its `results` URL is read", metavar="SPEC")
ResultsOpt = typer.Option(
    None, "--results", envvar="SPOTBENCH_RESULTS_URL",
    help="read this results URL (file://, gs://, s3://) instead of the spec's",
)

QUERY_HELP = """Run SQL (DuckDB) over every run's records of SPEC.

Tables: `records` (one row per value: the Result fields, params and metadata as JSON, plus `attempt` and `path`), `attempts` (one row per stored group attempt: preempted, started_at, ended_at, billed_s, cost_usd, members, values) and `runs` (the run ledger). Timestamps are UTC. Run `spotbench compact SPEC` first when the history is long.

Example: spotbench query SPEC "SELECT run, avg(value) AS us FROM records WHERE metric = 'latency' AND NOT preempted AND metadata->>'size_bytes' = '8' GROUP BY run ORDER BY run"
"""

def _results_url(spec_path: Path, results: str | None) -> str:
    if results:
        return results if "://" in results else "file://" + str(Path(results).resolve())
    from spotbench.clouds import get_provider

    spec = spec_or_exit(spec_path)
    try:  # a gcp stack's bucket when the spec names none; aws: says to pass --results
        return get_provider(spec.cloud).results_url(spec)
    except ValueError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
        raise  # unreachable: fail exits


def _open_catalog(url: str):
    from spotbench.history.catalog import Catalog

    try:
        return Catalog(url)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the results at {url}: {exc}")


def query(
    spec_path: Path = SpecArg,
    sql: str = typer.Argument(..., metavar="SQL", help="the query (tables: records, attempts, runs)"),
    as_json: bool = typer.Option(False, "--json", help="print rows as a JSON list of objects"),
    as_csv: bool = typer.Option(False, "--csv", help="print rows as CSV with a header"),
    results: str | None = ResultsOpt,
) -> None:
    from spotbench.history.catalog import QueryError

    if as_json and as_csv:
        fail("choose one of --json and --csv", EXIT_BAD_INPUT)
    url = _results_url(spec_path, results)
    with _open_catalog(url) as cat:
        try:
            table = cat.query(sql)
        except QueryError as exc:
            fail(f"query failed: {exc}", EXIT_BAD_INPUT)
    if as_json:
        typer.echo(json.dumps(table.dicts(), indent=2, default=str))
    elif as_csv:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(table.columns)
        writer.writerows(table.rows)
        text = buf.getvalue()  # a terminal gets it escaped; a pipe or file the values as stored
        sys.stdout.write(plain(text) if sys.stdout.isatty() else text)
    else:
        out = RichTable(title=f"{len(table.rows)} rows from {url}", title_justify="left")
        for col in table.columns:
            out.add_column(col, overflow="fold")
        for row in table.rows:
            out.add_row(*(Text("" if v is None else plain(str(v))) for v in row))
        console.print(out)


query.__doc__ = QUERY_HELP


def compact(
    spec_path: Path = SpecArg,
    results: str | None = ResultsOpt,
) -> None:
    """Compact each closed run into one Parquet file (runs/<run>/records.parquet).

    Queries over a long history then read a thousand files, not fifty thousand. The JSONL
    files are kept; open runs and runs already compacted are left alone."""
    url = _results_url(spec_path, results)
    with _open_catalog(url) as cat:
        compacted = cat.compacted_runs()
        closed = [r for (r,) in cat.query("SELECT run FROM runs WHERE closed_at IS NOT NULL ORDER BY run").rows]
        todo = [r for r in closed if r not in compacted]
        for run in todo:
            path = cat.compact(run)
            typer.echo(f"{run}: {path}" if path else f"{run}: no records")
    typer.echo(f"{len(closed)} closed runs: {len(todo)} compacted now, "
               f"{len(compacted)} before; open runs are left alone")




def history(
    spec_path: Path = SpecArg,
    size: list[int] = typer.Option(
        [], "--size", help="OSU latency message size in bytes to follow (repeat; default 8 and 1048576)",
    ),
    max_pvalue: float = typer.Option(
        0.001, "--max-pvalue", min=1e-12, max=0.5,
        help="significance: a change point's p-value (Bonferroni-adjusted t-test) must be below this",
    ),
    min_change: float = typer.Option(
        0.0, "--min-change", min=0, help="ignore change points smaller than this many percent",
    ),
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", metavar="PCT", min=0,
        help="exit 1 when a series' current level is a regression of at least PCT percent "
             "(with --since: any regression from that run on)",
    ),
    since: str | None = typer.Option(
        None, "--since", metavar="RUN", help="only regressions at or after this run id count for --fail-on-regression",
    ),
    as_json: bool = typer.Option(False, "--json", help="print series and change points as JSON"),
    results: str | None = ResultsOpt,
) -> None:
    """Series over runs per matrix point and metric, with change points and their significance.

    Followed: OSU latency (at --size), OSU bibw at 1 MiB, TF steps/s and time to train, and the
    cost of each run. A run's value is the median over the trials' complete attempts (the
    report's statistic); preempted and partial attempts are left out and counted. Change points: E-Divisive means with a
    t-test (Apache Otava's method; docs/history.md). Direction-aware: latency, time and cost
    up is a regression; bandwidth and steps/s down is one.
    """
    from spotbench.history.trends import history as compute

    url = _results_url(spec_path, results)
    spec = None
    if results is None or spec_path.is_file():
        spec = spec_or_exit(spec_path)
    sizes = {"latency": tuple(size)} if size else None
    with _open_catalog(url) as cat:
        hist = compute(cat, spec, sizes=sizes, max_pvalue=max_pvalue, min_change=min_change / 100)
    regressions = (hist.regressions(fail_on_regression, since)
                   if fail_on_regression is not None else [])
    if as_json:
        out = hist.to_dict()
        if fail_on_regression is not None:
            out["fail_on_regression_pct"] = fail_on_regression
            out["failing"] = regressions
        typer.echo(json.dumps(out, indent=2, default=str))
    else:
        _print_history(hist, url)
        if fail_on_regression is not None:
            verdict = (f"[bold red]{len(regressions)} regression(s) of {fail_on_regression:g}% or more[/]"
                       if regressions else f"no regression of {fail_on_regression:g}% or more")
            console.print(verdict, highlight=False, markup=True)
    if regressions:
        raise typer.Exit(1)


def _print_history(hist, url: str) -> None:
    # here: the report package imports pandas, scipy (seconds for every `spotbench` command)
    from spotbench.report.numbers import p_value, pct, with_unit

    if not hist.series:
        console.print(f"no tracked metrics in {url} yet (run the sweep first)", highlight=False)
        return
    columns = [Column("series"), Column("runs", "right", drop=2), Column("first", "right"),
               Column("latest", "right"), Column("attempts (excluded)", "right", drop=1),
               Column("change points", "right")]
    rows = [[s.name, str(len(s.values)), with_unit(s.values[0], s.unit), with_unit(s.values[-1], s.unit),
             f"{sum(s.attempts)} ({sum(s.preempted)})", str(len(s.change_points))] for s in hist.series]
    series, dropped = fit_table(f"{hist.sweep}: {len(hist.runs)} runs, {len(hist.series)} series", columns, rows)
    console.print(series)
    changes = hist.changes()
    if not changes:
        console.print(f"no change point at p < {hist.max_pvalue:g}", highlight=False)
        return
    columns = [Column("series"), Column("run", key=True), Column("date", drop=1), Column("before", "right"),
               Column("after", "right"), Column("change", "right"), Column("p", "right", drop=2),
               Column("kind")]
    rows = [[c["series"], c["run"], c["date"][:16], with_unit(c["before_mean"], c["unit"]),
             with_unit(c["after_mean"], c["unit"]), pct(c["rel_change"]),
             p_value(c["pvalue"]).removeprefix("p = "), c["kind"]] for c in changes]
    table, gone = fit_table("change points", columns, rows)
    console.print(table)
    if dropped or gone:
        console.print(dropped_note(dropped + gone), highlight=False, markup=False)


def market(
    spec_path: Path = SpecArg,
    as_json: bool = typer.Option(False, "--json", help="print the statistics as JSON"),
    results: str | None = ResultsOpt,
) -> None:
    """Spot-market statistics from this sweep's own history.

    Per zone × machine type × accelerator: preemptions per VM-hour, failed and capacity-failed starts per start, time
    from the start tick to the first result, retries per completed group, and the real cost
    per completed result with preempted attempts included (`spotbench estimate` prices
    retries with it). Figures the store does not hold show as —. The rows are also stored
    as the store's dated market snapshot (market/<time>.json), which orders the candidate
    zones of `lifecycle: created` at start."""
    from spotbench.history.market import market as compute
    from spotbench.history.market import publish

    url = _results_url(spec_path, results)
    with _open_catalog(url) as cat:
        stats = compute(cat)
        publish(cat, stats)  # the snapshot control orders candidate zones by
    if as_json:
        typer.echo(json.dumps(stats, indent=2, default=str))
        return
    if not stats:
        console.print(f"no attempts in {url} yet (run the sweep first)", highlight=False)
        return
    # (header, key, format, drop order at a narrow terminal: 0 = always shown)
    cols = [("zone", "zone", "{}", 0), ("machine", "machine_type", "{}", 0), ("accel.", "accelerator", "{}", 6),
            ("done/ attempts", None, "", 0), ("VM-h", "vm_hours", "{:.3g}", 5),
            ("preempt/ VM-h", "preemptions_per_vm_hour", "{:.3g}", 0),
            ("failed/ start", "failed_starts_per_start", "{:.2f}", 4),
            ("capacity/ start", "capacity_failures_per_start", "{:.2f}", 3),
            ("tick→ result s", "first_result_s", "{:.0f}", 7), ("retries/ done", "retries_per_completed", "{:.2f}", 2),
            ("USD/ done", "cost_per_completed_usd", "{:.4g}", 1), ("× happy path", "retry_overhead", "{:.2f}", 0)]
    rows = []
    for s in stats:
        cells = []
        for _, key, form, _ in cols:
            if key is None:
                cells.append(f"{s['completed']}/{s['attempts']}")
            else:
                v = s[key]
                cells.append("—" if v is None else form.format(v))
        rows.append(cells)
    table, dropped = fit_table(f"spot market as seen by {url}",
                               [Column(h, "left" if k in ("zone", "machine_type", "accelerator") else "right",
                                       key=k in ("zone", "machine_type"), drop=d) for h, k, _, d in cols], rows)
    console.print(table)
    if dropped:
        console.print(dropped_note(dropped), highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command(help=QUERY_HELP)(query)
    app.command()(compact)
    app.command()(history)
    app.command()(market)
