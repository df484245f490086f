"""Terminal side of `spotbench run`: a live progress line, a summary, the report."""

from __future__ import annotations

import logging
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from spotbench.localrun.runner import Progress, RunOutcome, run_local
from spotbench.spec import SweepSpec

console = Console()


def _line(p: Progress) -> str:
    running = ", ".join(sorted(p.running)) or "-"
    return f"[bold]{len(p.completed)}/{p.total}[/] groups complete · {p.message} · running: {running}"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def run_with_progress(spec: SweepSpec, *, on_schedule: bool, grace_s: float,
                      report_dir: Path | None) -> RunOutcome:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console.print(f"[bold]{spec.name}[/]: {len(spec.plan())} groups on the local cloud"
                  f"{' (waiting for cron ticks)' if on_schedule else ''}")
    with Live(console=console, refresh_per_second=4, transient=True) as live:
        outcome = run_local(spec, on_schedule=on_schedule, grace_s=grace_s,
                            on_progress=lambda p: live.update(_line(p)))
    table = Table(title=f"run {outcome.run}")
    table.add_column("group")
    table.add_column("result")
    refused = {r["group"]: r["reason"] for r in outcome.refused}
    for gid in outcome.completed:
        table.add_row(gid, "[green]complete[/]")
    for gid in outcome.incomplete:
        why = outcome.states.get(gid, "incomplete")
        if gid in refused:
            table.add_row(gid, Text(f"refused: {refused[gid]}", style="yellow"))
        elif gid in outcome.failures:
            table.add_row(gid, Text(f"failed: {outcome.failures[gid].reason}", style="red"))
        else:
            table.add_row(gid, Text(f"incomplete: {why}", style="red"))
    console.print(table, highlight=False)
    for gid, failure in sorted(outcome.failures.items()):
        console.print(Text(f"{gid} failed: {failure.reason}", style="bold red"), highlight=False)
        if failure.stderr_tail:
            console.print(Text("  its stderr ends with:\n" + _indent(failure.stderr_tail)),
                          highlight=False)
    for fault in outcome.faults:
        console.print(f"[yellow]noticed:[/] {fault}", highlight=False)
    if outcome.error:
        console.print(f"[bold red]run cut short:[/] {outcome.error}", highlight=False)
    console.print(f"results: {outcome.results_url}")
    console.print(f"logs:    {outcome.state_dir / 'logs'}")
    if report_dir is not None and outcome.run:
        from spotbench.report import write_report

        paths = write_report(outcome.results_url, report_dir)
        console.print(f"report:  {paths.markdown.resolve()}")
        console.print(f"         {paths.html.resolve()}")
    return outcome
