"""`spotbench` command line. Each command group lives in its own module with a
`register(app)` function; this file only wires them together."""

from __future__ import annotations

import sys

import typer

from spotbench.cli import extras
from spotbench.cli import _common
from spotbench.cli import core
from spotbench.cli import report as report_cli
from spotbench.cli import estimate as estimate_cli
from spotbench.cli import preview as preview_cli
from spotbench.cli import preflight as preflight_cli
from spotbench.cli import ops as ops_cli
from spotbench.cli import history as history_cli
from spotbench.cli import prices as prices_cli
from spotbench.cli.help_text import flow_help
from spotbench.terminal import escape_logs
from spotbench.cli import runs as runs_cli

app = typer.Typer(
    name="spotbench",
    help=(
        "Benchmark sweeps on spot/preemptible VMs, priced and reported.\n\n"
        "Start with `spotbench plan SPEC` to see the groups a spec expands to, "
        "`spotbench run SPEC` to run it on the local cloud, and "
        "`spotbench report RESULTS` to turn results into tables and plots."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"spotbench {version('spotbench')}")
        except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
            typer.echo("spotbench (not installed: run `make setup`)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="print the version and exit"),
    debug: bool = typer.Option(False, "--debug", envvar="SPOTBENCH_DEBUG",
                               help="show the trace of an unexpected error"),
) -> None:
    """Benchmark sweeps on spot/preemptible VMs, priced and reported."""
    escape_logs()  # a warning naming a member's file or value prints it escaped


core.register(app)
report_cli.register(app)
estimate_cli.register(app)
preview_cli.register(app)
preflight_cli.register(app)
ops_cli.register(app)
history_cli.register(app)
prices_cli.register(app)
flow_help(app)  # one paragraph, one flowing line: no orphan words at 80 columns (#39)
runs_cli.register(app)


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """The `spotbench` command (and its twins in scripts/, which pass their `args`): a
    missing optional install is one line saying which extra to install
    (spotbench/cli/extras.py), never a traceback."""
    from spotbench.cli import errors

    errors.quiet_libraries(sys.argv[1:] if args is None else list(args))
    try:
        app(args=args, prog_name=prog_name)
    except ModuleNotFoundError as exc:
        why = extras.explain(exc, _common.current_cloud)
        if why is None:
            _unexpected(exc, args)
        _common.err_console.print(_common.styled("error: ", "bold red", why), highlight=False)
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - no traceback reaches a user (#39)
        _unexpected(exc, args)


def _unexpected(exc: BaseException, args: list[str] | None) -> None:
    """One line with the cause and the fix (spotbench/cli/errors.py), exit 1; the trace
    with `--debug` or SPOTBENCH_DEBUG=1."""
    from spotbench.cli import errors

    argv = sys.argv[1:] if args is None else list(args)
    if errors.debug_requested(argv):
        raise exc
    command = next((a for a in argv if not a.startswith("-")), "")
    _common.err_console.print(_common.styled(
        "error: ", "bold red", errors.one_line(exc, command, _common.current_cloud)), highlight=False)
    sys.exit(1)
