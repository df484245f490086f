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
