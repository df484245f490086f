"""`spotbench report RESULTS_URL`: tables, plots and costs from stored results."""

from __future__ import annotations

from pathlib import Path

import typer

from spotbench.cli._common import EXIT_BAD_INPUT, console, fail, print_answer


def _url(value: str) -> str:
    """Accept a URL or a plain local path (turned into an absolute file:// URL)."""
    if "://" in value:
        return value.rstrip("/")
    return "file://" + str(Path(value).resolve())


def report(
    results_url: str = typer.Argument(
        ..., metavar="RESULTS_URL", help="results URL (file://, gs://, s3://) or a local folder"
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", envvar="SPOTBENCH_REPORT_DIR", help="output folder [default: reports/<sweep>]"
    ),
    reference: Path | None = typer.Option(
        None, "--reference", envvar="SPOTBENCH_REFERENCE",
        help="CSV of published/earlier numbers in the Result columns, shown beside ours with the ratio",
    ),
    prices: Path | None = typer.Option(
        None, "--prices", envvar="SPOTBENCH_PRICES", help="CSV of price rows overriding/adding to the catalog"
    ),
    base: str | None = typer.Option(
        None, "--base", envvar="SPOTBENCH_REPORT_BASE",
        help="base configuration for normalised cost, e.g. machine_type=n1-standard-4",
    ),
    baseline: str | None = typer.Option(
        None, "--baseline", envvar="SPOTBENCH_REPORT_BASELINE", metavar="RUN",
        help="run id the History section compares the latest run with [default: each series' first run]",
    ),
    objective: list[str] | None = typer.Option(
        None, "--objective", metavar="METRIC[:max|min]",
        help="open with the best trial by METRIC, a leaderboard and the search's plots "
             "(repeat for a Pareto front) [default: the --spec's search.objective]",
    ),
    spec_path: Path | None = typer.Option(None, "--spec", help="sweep spec whose search.objective ranks the trials"),
    as_json: bool = typer.Option(False, "--json", help="print the written files and failed groups as JSON"),
) -> None:
    """Write Markdown, a self-contained HTML page, PNG plots and CSV for RESULTS_URL."""
    from spotbench.report import NoResults, default_out_dir, write_report

    url = _url(results_url)
    for label, path in (("--reference", reference), ("--prices", prices)):
        if path is not None and not path.is_file():
            fail(f"{label} {path}: file not found", EXIT_BAD_INPUT)
    objectives = _objectives(objective, spec_path)
    try:
        paths = write_report(url, out or default_out_dir(url), reference=reference, prices=prices, base=base,
                             baseline=baseline, objectives=objectives)
    except NoResults as exc:
        fail(str(exc))
    except ValueError as exc:  # bad reference/prices/base input
        fail(str(exc), EXIT_BAD_INPUT)
    if as_json:
        _print_json(url, paths)
        return
    print_answer(paths.rankings)  # the answer first: the ranking, per USD
    for line in paths.summary:  # then runs, failures, change points (record text)
        console.print(line, highlight=False, soft_wrap=True)
    typer.echo(f"report:   {paths.markdown}")
    typer.echo(f"html:     {paths.html}")
    typer.echo(f"csv:      {paths.csv}")
    for png in paths.png:
        typer.echo(f"plot:     {png}")


def _objectives(given: list[str] | None, spec_path: Path | None) -> list:
    """--objective values, else the spec's search.objective (none: no search section)."""
    from spotbench.report.trials import objectives_of_spec, parse_objectives

    try:
        if given:
            return parse_objectives(list(given))
        if spec_path is not None:
            from spotbench.cli._common import spec_or_exit

            return objectives_of_spec(spec_or_exit(spec_path))
    except ValueError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    return []


def _print_json(url: str, paths) -> None:  # noqa: ANN001 - ReportPaths
    import json

    from spotbench.failures import failures
    from spotbench.results import ResultStore

    failed = failures(ResultStore(url).read())
    typer.echo(json.dumps({
        "results": url, "markdown": str(paths.markdown), "html": str(paths.html), "csv": str(paths.csv),
        "records_csv": str(paths.records_csv) if paths.records_csv else None,
        "png": [str(p) for p in paths.png],
        "failures": [{"run": f.run, "group": f.group, "reason": f.reason, "exit_code": f.exit_code,
                      "stderr_tail": f.stderr_tail} for f in failed.values()],
    }, indent=2))


def register(app: typer.Typer) -> None:
    app.command()(report)
