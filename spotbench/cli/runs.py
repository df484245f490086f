"""Per-run commands: `artifacts` (a trial's stored files, the best by default), `logs` (what a
group's members print, `--follow` while it runs) and `stop` (one group, as the user's
decision: not preempted, not retried)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from spotbench.cli._common import (
    EXIT_BAD_INPUT, credentials_or_exit, explained, fail, spec_or_exit,
)

SpecArg = typer.Argument(..., help="sweep spec (YAML)", metavar="SPEC")
GroupArg = typer.Argument(..., help="group id (spotbench plan SPEC / status SPEC list them)", metavar="GROUP")
ResultsOpt = typer.Option(None, "--results", envvar="SPOTBENCH_RESULTS_URL",
                          help="results URL [default: the spec's, as `spotbench status` finds it]")
RootOpt = typer.Option(None, "--state-root", envvar="SPOTBENCH_STATE_ROOT", help="local state dir (.spotbench)")


def _remote(spec) -> None:  # noqa: ANN001 - SweepSpec
    credentials_or_exit(spec.cloud)  # the local cloud's provider needs none


def artifacts(
    spec_path: Path = SpecArg,
    best: bool = typer.Option(False, "--best", help="the best trial's files (by --metric, else the spec's search.objective)"),
    trial: int | None = typer.Option(None, "--trial", help="this trial's files instead of the best's"),
    group: str | None = typer.Option(None, "--group", help="the trial of this group (a matrix numbers trials per point)"),
    metric: str | None = typer.Option(None, "--metric", help="rank trials by this metric [default: the spec's search.objective]"),
    direction: str = typer.Option("max", "--direction", help="max or min: which end of --metric is best"),
    out: Path = typer.Option(Path("artifacts"), "--out", "-o", help="folder the files are written to"),
    results: str | None = ResultsOpt,
) -> None:
    """Download the files a trial stored (its $SPOTBENCH_ARTIFACTS_DIR: model weights…)."""
    from spotbench.ops.artifacts import NoArtifacts, download, objective_for
    from spotbench.ops.context import results_url_for
    from spotbench.results import ResultStore

    if not best and trial is None and group is None:
        fail("say which trial: --best, --trial N or --group GROUP", EXIT_BAD_INPUT)
    spec = spec_or_exit(spec_path)
    _remote(spec)
    try:
        objective = objective_for(spec, metric, direction)
        store = ResultStore(results_url_for(spec, results))
        got = download(store, out, objective=objective, trial=trial, group=group)
    except ValueError as exc:  # a bad --direction, the store's URL missing
        fail(str(exc), EXIT_BAD_INPUT)
    except NoArtifacts as exc:
        fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - the store's own words, never a traceback
        fail(explained(exc, spec.cloud))
    t = got.trial
    score = (f", {got.objective.metric} = {t.values[got.objective.metric]:.6g}"
             if got.objective and got.objective.metric in t.values else "")
    typer.echo(f"{t.label} (group {got.group}, run {got.run}, attempt {got.attempt}){score}")
    for path in got.files:
        typer.echo(f"  {path}")


def logs(
    spec_path: Path = SpecArg,
    group: str = GroupArg,
    follow: bool = typer.Option(False, "--follow", "-f", help="keep reading until the group is off (Ctrl-C ends)"),
    interval: float = typer.Option(2.0, "--interval", min=0.2, help="seconds between reads with --follow"),
    root: Path | None = RootOpt,
) -> None:
    """Print what GROUP's members print: local log files, GCE serial port, EC2 console."""
    from spotbench.ops.context import cloud_for
    from spotbench.ops.logs import NoLogs, group_of, tail

    spec = spec_or_exit(spec_path)
    _remote(spec)

    def emit(member: str, text: str) -> None:
        for line in text.splitlines(keepends=True):
            sys.stdout.write(f"[{member}] {line}" if line.endswith("\n") else f"[{member}] {line}\n")
        sys.stdout.flush()

    try:
        tail(cloud_for(spec, root), group_of(spec.plan(), group), emit, follow=follow, interval_s=interval)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    except NoLogs as exc:
        fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - the cloud's own words, never a traceback
        fail(explained(exc, spec.cloud))


def stop(
    spec_path: Path = SpecArg,
    group: str = GroupArg,
    results: str | None = ResultsOpt,
    root: Path | None = RootOpt,
) -> None:
    """Stop GROUP now (a losing trial): recorded as stopped by the user, not retried."""
    from spotbench.ops.logs import NoLogs
    from spotbench.ops.stop_group import stop_group

    spec = spec_or_exit(spec_path)
    _remote(spec)
    try:
        answer = stop_group(spec, group, results=results, root=root)
    except NoLogs as exc:  # an unknown group id
        fail(str(exc), EXIT_BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the cloud's or the lock's own words
        fail(explained(exc, spec.cloud))
    stopped = answer.get("stopped") or []
    where = f" in run {answer['run']}" if answer.get("run") else " (no run is open: nothing to retry)"
    typer.echo(f"stopped {group}{where}: {len(stopped)} instance(s) "
               f"({', '.join(stopped) or 'none was running'}); recorded as stopped by the user, not retried")
    started = answer.get("started") or []
    if started:
        typer.echo(f"next: {', '.join(started)} started in the freed slot")


def register(app: typer.Typer) -> None:
    app.command()(artifacts)
    app.command()(logs)
    app.command()(stop)
