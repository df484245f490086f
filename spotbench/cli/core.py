"""Core commands: plan, run, report."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from spotbench.cli._common import console, spec_or_exit

SpecArg = typer.Argument(..., exists=False, help="sweep spec (YAML)", metavar="SPEC")


def plan(
    spec_path: Path = SpecArg,
    as_json: bool = typer.Option(False, "--json", help="print the groups as JSON"),
) -> None:
    """Show the run groups SPEC expands to (matrix × trials), with their members."""
    spec = spec_or_exit(spec_path)
    groups = spec.plan()
    if as_json:
        out = [
            {
                "id": g.id, "trial": g.trial, "point": g.point, "machine_type": g.machine_type,
                "accelerator": g.accelerator, "accelerator_count": g.accelerator_count,
                "labels": g.labels,
                "members": [{"name": m.name, "role": m.role, "rank": m.rank} for m in g.members],
            }
            for g in groups
        ]
        typer.echo(json.dumps(out, indent=2, default=str))
        return
    table = Table(title=f"{spec.name}: {len(groups)} groups on {spec.cloud}")
    for col in ("group", "trial", "matrix point", "machine", "members"):
        table.add_column(col)
    for g in groups:
        point = ", ".join(f"{k}={v}" for k, v in g.point.items()) or "-"
        members = ", ".join(f"{m.name.removeprefix(g.id + '-')}:{m.role}" for m in g.members)
        table.add_row(g.id, str(g.trial), point, g.machine_type, members)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(plan)
