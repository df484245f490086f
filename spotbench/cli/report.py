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
    as_json: bool = typer.Option(False, "--json", help="print the written files and failed groups as JSON"),
) -> None:
    """Write Markdown, a self-contained HTML page, PNG plots and CSV for RESULTS_URL."""
    from spotbench.report import NoResults, default_out_dir, write_report

    url = _url(results_url)
    for label, path in (("--reference", reference), ("--prices", prices)):
        if path is not None and not path.is_file():
            fail(f"{label} {path}: file not found", EXIT_BAD_INPUT)
    try:
        paths = write_report(url, out or default_out_dir(url), reference=reference, prices=prices, base=base,
                             baseline=baseline)
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
