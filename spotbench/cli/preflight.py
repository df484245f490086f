"""`spotbench preflight SPEC`: ask the cloud whether the sweep can be deployed and run."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from spotbench.cli._common import console, spec_or_exit


def preflight(
    spec_path: Path = typer.Argument(..., help="sweep spec (YAML)", metavar="SPEC"),
    as_json: bool = typer.Option(False, "--json", help="print the problems as JSON"),
) -> None:
    """Check SPEC against its cloud before `pulumi up`: installs, tools, credentials, APIs, quota, budget.

    First what this machine lacks: the cloud's extras (`make setup CLOUD=gcp|aws`) and the
    tools its walkthrough runs (pulumi, gcloud or aws, docker).
    Checks the credentials, the enabled APIs, the machine types and accelerators in the
    zone/region, spot quota for the largest number of VMs and GPUs running at once, the
    team's guardrails and the budget for one run.

    Prints one line per problem with the command or change that fixes it; exits 1 when
    there is any, 0 when the sweep is good to deploy. Uses your cloud credentials
    (gcloud ADC / the AWS credential chain); nothing is created.
    """
    import os

    from spotbench.clouds.provider import SettingMissing
    from spotbench.preflight import Problem
    from spotbench.preflight import preflight as run

    from spotbench.cli import extras

    spec = spec_or_exit(spec_path)
    # first what this machine lacks: an extra missing stops the cloud's checks (they import it)
    found = extras.missing(spec.cloud)
    needed = extras.workload_missing(spec.cloud, spec.workload.name)  # the tf extra for tf-local
    found += [needed] if needed is not None else []
    problems = [Problem(m.check, m.message, m.fix) for m in found]
    if not any(m.check == "extras" for m in found):
        try:
            problems += run(spec, spec_path, dict(os.environ))
        except SettingMissing as exc:
            problems.append(Problem("settings", str(exc), "add it to the spec or the environment"))
    if as_json:
        typer.echo(json.dumps([p.to_dict() for p in problems], indent=2))
    elif problems:
        for problem in problems:
            console.print(f"✗ {problem.line()}", highlight=False, markup=False, soft_wrap=True)
    else:
        console.print(f"[green]✓[/] {spec.name}: ready to deploy on {spec.cloud}", highlight=False,
                      markup=True)
    raise typer.Exit(1 if problems else 0)


def register(app: typer.Typer) -> None:
    app.command()(preflight)
