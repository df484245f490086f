"""`spotbench estimate SPEC`: cost per group, per schedule tick and per month, line by line."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from spotbench.cli._common import (
    EXIT_BAD_INPUT, Column, console, dropped_note, fail, fit_table, spec_or_exit,
    err_console, styled,
)


def num(value: float, sig: int = 4) -> str:
    """spotbench.report.numbers.num, imported when a table is printed: importing the report
    package (pandas, matplotlib, scipy) costs seconds, and every `spotbench` command (`--help`
    too) imports this module"""
    from spotbench.report.numbers import num as report_num

    return report_num(value, sig)


def _qty(value: float) -> str:
    return num(value, 4)


def _lines_table(title: str, lines, total: float):
    columns = [Column("item"), Column("quantity", "right", drop=2), Column("unit", drop=3),
               Column("USD/unit", "right", drop=4), Column("USD", "right"), Column("note", drop=1)]
    rows = [[ln.item, _qty(ln.quantity), ln.unit, num(ln.unit_usd, 4), _money(ln.usd), ln.note]
            for ln in lines]
    rows.append(["total", "", "", "", _money(total), ""])
    return fit_table(title, columns, rows)


def _money(value: float) -> str:
    return f"{value:,.2f}" if value >= 0.01 or value == 0 else num(value, 2)


def estimate(
    spec_path: Path = typer.Argument(..., metavar="SPEC", help="sweep spec (YAML)"),
    prices: Path | None = typer.Option(
        None, "--prices", envvar="SPOTBENCH_PRICES", help="CSV of price rows overriding/adding to the catalog"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the estimate as JSON (with the assumptions used)"),
    assume: list[str] = typer.Option(
        [], "--assume", metavar="KEY=VALUE",
        help="override an assumption (repeatable): boot_s, run_s (VM uptime per tick after boot), "
             "function_s_per_call, function_mb, calls_per_tick, disk_type, month_days, free_tier=on|off",
    ),
) -> None:
    """What SPEC will cost: per group run, per schedule tick and per month, with every
    assumption printed; change any with --assume KEY=VALUE, e.g.

        spotbench estimate SPEC --assume run_s=600 --assume month_days=30 --assume free_tier=on
    """
    from spotbench.costs import MissingPrice, load_catalog
    from spotbench.estimate import Estimate, estimate as compute, headline, usd
    from spotbench.history.market import market_of

    spec = spec_or_exit(spec_path)
    try:
        est = compute(spec, load_catalog(prices), market=market_of(spec.results_url()), assume=assume)
    except MissingPrice as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except ValueError as exc:  # a bad --prices file or --assume
        fail(str(exc), EXIT_BAD_INPUT)
    search = None
    if spec.search is not None:  # the whole search: n trials × repeats, capped by the budget
        from spotbench.estimate import search_line, search_summary

        search = search_summary(est, len({g.trial for g in spec.plan()}), spec.search.repeats)
    if as_json:
        typer.echo(json.dumps({**est.to_dict(), **({"search": search} if search else {})},
                              indent=2, default=str))
        return
    for line in headline(est):
        console.print(line, highlight=False, markup=False)
    if search is not None:
        console.print(search_line(search), highlight=False, markup=False)
    console.print()
    columns = [Column("group", key=True), Column("machine"), Column("members", "right", drop=5),
               Column("run s", "right", drop=3), Column("from", drop=1),
               Column("billed s/member", "right", drop=4), Column("USD", "right"),
               Column("GPU USD", "right", drop=6), Column("until deadline USD", "right", drop=2),
               Column("retries ×", "right", drop=7)]
    rows = [[g.group, g.machine_type, str(g.members), num(g.run_s), g.run_source, str(g.billed_s),
             _money(g.compute_usd + g.gpu_usd), _money(g.gpu_usd), _money(g.deadline_usd),
             f"{g.retry_overhead:.2f}"] for g in est.groups]
    if spec.role_provisioning:  # a role's own provisioning (#36): how each group's members are priced
        columns.insert(2, Column("provisioning"))
        rows = [[*r[:2], g.provisioning, *r[2:]] for r, g in zip(rows, est.groups)]
    dropped: list[str] = []
    table, gone = fit_table("per group run (USD = compute + GPU)", columns, rows)
    console.print(table)
    dropped += gone
    table, gone = _lines_table("per run (one schedule tick: every group once)", est.per_tick,
                               Estimate.total(est.per_tick))
    console.print(table)
    dropped += gone
    if est.per_month is not None:
        table, gone = _lines_table(f"per month ({est.ticks_per_month:.4g} runs)", est.per_month,
                                   Estimate.total(est.per_month))
        console.print(table)
        dropped += gone
    if dropped:
        console.print(dropped_note(sorted(set(dropped))), highlight=False, markup=False)
    console.print(_saving_line(est), highlight=False)
    def value(v) -> str:
        if v is None:
            return "auto"
        if isinstance(v, bool):
            return "on" if v else "off"
        return f"{v:g}" if isinstance(v, float) else str(v)

    shown = ", ".join(f"{k}={value(v)}" + (" (--assume)" if k in est.overridden else "")
                      for k, v in est.assumed.items())
    console.print(f"assumptions: {shown}", highlight=False, markup=False)
    console.print("\n".join(f"  - {n}" for n in est.assumptions), highlight=False, markup=False)
    if est.prices:
        console.print("price tables:", highlight=False, markup=False)
        console.print("\n".join(f"  - {n}" for n in est.prices), highlight=False, markup=False)
    if est.price_warning:  # wrapped to the terminal like the tables above
        err_console.print(styled("warning: ", "yellow", est.price_warning), highlight=False,
                          soft_wrap=False)


def register(app: typer.Typer) -> None:
    app.command()(estimate)


def _saving_line(est: "Estimate") -> str:  # noqa: F821 - imported where the command runs
    """What stopping at `done` saves against running to the deadline; with no earlier results
    the run time *is* the deadline, so there is no figure to give yet."""
    from spotbench.estimate import usd

    if all(g.run_source == "deadline" for g in est.groups):
        return ("self-stop: no saving estimated yet (no earlier results: the expected run time "
                "is the deadline itself); run the sweep once and estimate again")
    saving = f"self-stop saves {usd(est.self_stop_saving_tick)} per run"
    if est.self_stop_saving_month is not None:
        saving += f", {usd(est.self_stop_saving_month)} per month"
    return saving + " against stopping only at the deadline"
