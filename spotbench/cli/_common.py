"""Helpers shared by the CLI modules: loading a spec with a clean exit on errors, and
printing messages that hold user text.

User text (spec values, file names, exception messages) is never parsed as Rich markup:
`[bold]` in a value prints as `[bold]`, and `[/]` cannot crash the printer. Styled prefixes
are built with `rich.text.Text`, the message appended as plain text.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from spotbench.cli import extras
from spotbench.spec import SpecError, SweepSpec, load_spec, spec_warnings

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

EXIT_BAD_INPUT = 2
current_cloud: str | None = None  # the cloud of the spec this command loaded (install hints)


def styled(prefix: str, style: str, message: str) -> Text:
    """`prefix` in `style`, then `message` verbatim (no markup, no highlighting)."""
    return Text.assemble((prefix, style), message)


def warn(message: str, prefix: str = "warning: ") -> None:
    err_console.print(styled(prefix, "yellow", message), highlight=False)


def spec_or_exit(path: Path) -> SweepSpec:
    """Load SPEC or print every problem and exit with code 2 (nothing is started).

    A Pulumi stack file (Pulumi.<stack>.yaml) is followed to its `spotbench:spec`. Names the
    shipped catalogs do not know (a newer machine type or zone) are printed as warnings."""
    try:
        spec = load_spec(path)
    except SpecError as exc:
        err_console.print(styled("invalid spec\n", "bold red", str(exc)), highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for field, value, message in spec_warnings(spec):
        shown = SpecError(str(path), [(field, value, message)]).render()
        warn(shown)
    global current_cloud
    current_cloud = spec.cloud
    return spec


def explained(exc: BaseException, cloud: str | None = None) -> str:
    """A missing extra as what to install (spotbench/cli/extras.py); any other error as it is."""
    return extras.explain(exc, cloud or current_cloud) or str(exc)


def credentials_problem(cloud: str) -> str | None:
    """Why this machine cannot call `cloud` (its SDK extra missing, or no credentials), as
    one line saying what to do; None when it can."""
    from spotbench.clouds import get_provider

    missing = extras.sdk_missing(cloud)
    if missing:
        return missing
    try:
        problem = get_provider(cloud).credentials_problem()
    except ModuleNotFoundError as exc:
        return explained(exc, cloud)
    return f"{cloud}: {problem}" if problem else None


def credentials_or_exit(cloud: str) -> None:
    """Before calling `cloud`: its extra is installed and this machine has credentials, or
    one line saying what to do and exit 1 — never the SDKs' retries and tracebacks."""
    problem = credentials_problem(cloud)
    if problem:
        fail(problem)


def fail(message: str, code: int = 1) -> None:
    err_console.print(styled("error: ", "bold red", message), highlight=False)
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
