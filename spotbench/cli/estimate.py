"""`spotbench estimate SPEC`: cost per group, per schedule tick and per month, line by line."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from spotbench.cli._common import EXIT_BAD_INPUT, console, fail, spec_or_exit


def _lines_table(title: str, lines, total: float) -> Table:
    table = Table(title=title, title_justify="left")
    for col, just in (("item", "left"), ("quantity", "right"), ("unit", "left"),
                      ("USD/unit", "right"), ("USD", "right"), ("note", "left")):
        table.add_column(col, justify=just)
    for ln in lines:
        table.add_row(*map(Text, (ln.item, f"{ln.quantity:,.4f}", ln.unit, f"{ln.unit_usd:.7g}",
                                  f"{ln.usd:,.4f}", ln.note)))
    table.add_row("[bold]total[/]", "", "", "", f"[bold]{total:,.4f}[/]", "")
    return table


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
    from spotbench.estimate import Estimate, estimate as compute
    from spotbench.history.market import market_of

    spec = spec_or_exit(spec_path)
    try:
        est = compute(spec, load_catalog(prices), market=market_of(spec.results_url()), assume=assume)
    except MissingPrice as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except ValueError as exc:  # a bad --prices file or --assume
        fail(str(exc), EXIT_BAD_INPUT)
    if as_json:
        typer.echo(json.dumps(est.to_dict(), indent=2, default=str))
        return
    groups = Table(title=f"{est.sweep} on {est.cloud} ({est.region}): per group run", title_justify="left")
    for col in ("group", "machine", "members", "run s", "from", "billed s/member", "compute USD", "GPU USD",
                "until deadline USD", "retries ×"):
        groups.add_column(col)
    for g in est.groups:
        groups.add_row(*map(Text, (g.group, g.machine_type, str(g.members), f"{g.run_s:.0f}", g.run_source,
                                   str(g.billed_s), f"{g.compute_usd:.4f}", f"{g.gpu_usd:.4f}",
                                   f"{g.deadline_usd:.4f}", f"{g.retry_overhead:.2f}")))
    console.print(groups)
    console.print(_lines_table("per schedule tick (one run of every group)", est.per_tick, Estimate.total(est.per_tick)))
    if est.per_month is not None:
        console.print(_lines_table(f"per month ({est.ticks_per_month:.4g} ticks)", est.per_month,
                                   Estimate.total(est.per_month)))
    saving = f"self-stop saves {est.self_stop_saving_tick:.4f} USD per tick"
    if est.self_stop_saving_month is not None:
        saving += f", {est.self_stop_saving_month:.2f} USD per month"
    if all(g.run_source == "deadline" for g in est.groups):
        saving += " (no earlier results: the expected run time is the deadline itself)"
    console.print(saving + " against stopping only at the deadline", highlight=False)
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


def register(app: typer.Typer) -> None:
    app.command()(estimate)
