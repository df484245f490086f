"""Helpers shared by the CLI modules: loading a spec with a clean exit on errors."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from spotbench.spec import SpecError, SweepSpec, load_spec

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

EXIT_BAD_INPUT = 2


def spec_or_exit(path: Path) -> SweepSpec:
    """Load SPEC or print every problem and exit with code 2 (nothing is started)."""
    try:
        return load_spec(path)
    except SpecError as exc:
        err_console.print(f"[bold red]invalid spec[/]\n{exc}", highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def policy_or_exit(spec: SweepSpec, spec_path: Path | None) -> SweepSpec:
    """SPEC with its guardrails (spotbench/policy.py) applied: one line per violation and
    exit 2 when it breaks them; the returned spec carries the effective policy."""
    from spotbench.policy import PolicyError, effective

    try:
        carried, problems = effective(spec, spec_path)
    except PolicyError as exc:
        err_console.print(f"[bold red]invalid policy:[/] {exc}", highlight=False, markup=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if problems:
        err_console.print(f"[bold red]spec {spec.name} breaks the policy[/]", highlight=False)
        for line in problems:
            err_console.print(f"  - {line}", highlight=False, markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    return carried
