"""`spotbench preview SPEC`: what `pulumi up` would declare, offline (Pulumi mocks)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from spotbench.cli._common import (
    EXIT_BAD_INPUT, Column, console, fail, fit_table, policy_or_exit, spec_or_exit,
)


def preview(
    spec_path: Path = typer.Argument(..., help="sweep spec (YAML)", metavar="SPEC"),
    cloud: str = typer.Option(
        None, "--cloud", envvar="SPOTBENCH_CLOUD", help="gcp or aws (default: the spec's cloud)"
    ),
    project: str = typer.Option(
        None, "--project", envvar="SPOTBENCH_GCP_PROJECT",
        help="GCP project to show in names and URLs (default: spec gcp.project or a placeholder)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print the resources as JSON"),
) -> None:
    """Run the Pulumi program for SPEC under mocks and list the resources it declares.

    Needs no Pulumi CLI, credentials or network: review a sweep before `pulumi up`.
    A spec that breaks the team's guardrails (spotbench-policy.yaml) is refused.
    """
    from spotbench.facts import CLOUDS, facts_of

    spec = policy_or_exit(spec_or_exit(spec_path), spec_path)
    stacked = [name for name in CLOUDS if facts_of(name).deployed_by_stack]
    if cloud is not None and cloud not in stacked:
        fail(f"--cloud {cloud!r}: preview knows {' and '.join(stacked)}", EXIT_BAD_INPUT)
    if spec.cloud not in stacked:
        fail(f"spec {spec.name!r} is for cloud {spec.cloud!r}; preview shows {' and '.join(stacked)} "
             "stacks (use `spotbench plan` for local sweeps)", EXIT_BAD_INPUT)
    from infra.preview import preview as run_preview  # imports pulumi: only when asked
    from spotbench import preview as pv

    try:
        declared = run_preview(spec_path, cloud=cloud, project=project)
    except Exception as exc:  # RunError / ValueError from the program: show, exit 2
        fail(str(exc).strip() or type(exc).__name__, EXIT_BAD_INPUT)
        return
    if as_json:
        typer.echo(pv.as_json(declared))
        return
    custom = [d for d in declared if d.custom]
    title = f"{spec.name}: {len(custom)} resources on {spec.cloud} (offline preview)"
    summary, _ = fit_table(f"{title}, by type", [Column("type", key=True), Column("count", "right"),
                                                 Column("what")],
                           [[t.kind, str(t.count), t.detail] for t in pv.by_type(custom)])
    console.print(summary)
    console.print("every resource with its key properties below; `--json` for all of them",
                  highlight=False, markup=False)
    rows = []
    for d in custom:
        props = pv.key_properties(d)
        text = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in props.items())
        if d.secrets:
            text += f" [secret: {', '.join(sorted(d.secrets))}]"
        rows.append([pv.kind_of(d.type), d.name, text])  # plain text: JSON values hold brackets
    table, _ = fit_table(title, [Column("type"), Column("name"), Column("key properties")], rows)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(preview)
