"""Core commands: plan, run, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from spotbench.cli._common import (
    EXIT_BAD_INPUT, Column, console, dropped_note, err_console, fail, fit_table, policy_or_exit,
    print_answer,
    spec_or_exit,
)

if TYPE_CHECKING:
    from spotbench.spec import SweepSpec

EXIT_INCOMPLETE = 3  # `spotbench run`: the run ended with a group incomplete (or was cut short)
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP to `spotbench run`

SpecArg = typer.Argument(..., exists=False, help="sweep spec (YAML)", metavar="SPEC")


def plan(
    spec_path: Path = SpecArg,
    as_json: bool = typer.Option(False, "--json", help="print the groups as JSON"),
) -> None:
    """Show the run groups SPEC expands to (matrix × trials), with their members.

    Refuses (exit 2, one line per violation) a spec that breaks the team's guardrails
    (spotbench-policy.yaml next to the spec or in this folder, SPOTBENCH_POLICY, or the
    spec's own `policy:`).
    """
    spec = policy_or_exit(spec_or_exit(spec_path), spec_path)
    groups = spec.plan()
    _refuse_past_limits(spec, spec_path)
    if as_json:
        out = [
            {
                "id": g.id, "trial": g.trial, "point": g.point, "machine_type": g.machine_type,
                "accelerator": g.accelerator, "accelerator_count": g.accelerator_count,
                "labels": g.labels,
                "members": [{"name": m.name, "role": m.role, "rank": m.rank,
                             "provisioning": m.provisioning} for m in g.members],
            }
            for g in groups
        ]
        if spec.search is not None:  # the design: the points above, or the space and sampler
            from spotbench.search.design import space_lines

            typer.echo(json.dumps({"groups": out, "search": {
                **spec.search.model_dump(mode="json", exclude={"points"}),
                "design": space_lines(spec.search)}}, indent=2, default=str))
            return
        typer.echo(json.dumps(out, indent=2, default=str))
        return
    point = "matrix point" if spec.search is None else "trial parameters"
    columns = [Column("group", key=True), Column("trial", "right", drop=3), Column(point),
               Column("machine", drop=2), Column("members", drop=1)]
    rows = [[g.id, str(g.trial), ", ".join(f"{k}={v}" for k, v in g.point.items()) or "-", g.machine_type,
             ", ".join(f"{m.name.removeprefix(g.id + '-')}:{m.role}" for m in g.members)] for g in groups]
    table, dropped = fit_table(f"{spec.name}: {len(groups)} groups on {spec.cloud}", columns, rows)
    console.print(table)
    if dropped:
        console.print(dropped_note(dropped), highlight=False, markup=False)
    if spec.role_provisioning:  # a role's own provisioning (#36), e.g. a reserved master
        typer.echo(f"provisioning: {spec.provisioning}, but " + ", ".join(
            f"{r}: {p}" for r, p in sorted(spec.role_provisioning.items())))
    if spec.search is not None:
        from spotbench.search.design import space_lines

        adaptive = spec.search.method == "adaptive"
        typer.echo(f"search: {len(groups)} groups = {len(groups) // spec.search.repeats} trials × "
                   f"{spec.search.repeats} repeat{'s' if spec.search.repeats != 1 else ''}" + ("; each trial's parameters are asked in "
                                                       "control as a slot frees:" if adaptive else ":"))
        for line in space_lines(spec.search):
            typer.echo(f"  {line}")


def _refuse_past_limits(spec: SweepSpec, spec_path: Path) -> None:
    """A stack-deployed spec's program, run under mocks (`infra.preview`), measures what the
    deploy would send: a field past a cloud's limit refuses the plan (exit 2), each named
    with its size and the limit (spotbench.limits). Without the `infra` extra it says so."""
    from spotbench.facts import facts_of

    if not facts_of(spec.cloud).deployed_by_stack:
        return
    try:
        from infra.preview import LimitsExceeded, preview  # imports pulumi: only here
    except ImportError as exc:
        typer.echo(f"limits not measured ({exc.name} is not installed): `pip install "
                   "'spotbench[infra]'`, or `spotbench preview` where it is", err=True)
        return
    try:
        preview(spec_path)
    except LimitsExceeded as exc:
        fail(f"{spec_path}: past the clouds' limits (docs/platform.md, Limits):\n{exc}",
             EXIT_BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the program's own refusal: preview shows it
        typer.echo(f"limits not measured: the program stopped first ({str(exc).strip()[:300]}); "
                   f"`spotbench preview {spec_path}` shows why", err=True)


def run(
    spec_path: Path = SpecArg,
    on_schedule: bool = typer.Option(
        False, "--on-schedule", envvar="SPOTBENCH_ON_SCHEDULE",
        help="wait for the spec's cron ticks instead of firing one start tick now",
    ),
    grace: float = typer.Option(
        30.0, "--grace", envvar="SPOTBENCH_GRACE_S", min=0,
        help="seconds between SIGTERM and SIGKILL when a group is stopped (GCE spot: 30)",
    ),
    report_dir: Path = typer.Option(
        None, "--report-dir", envvar="SPOTBENCH_REPORT_DIR",
        help="where the report goes (default: reports/<sweep>)",
    ),
    no_report: bool = typer.Option(False, "--no-report", help="skip writing the report"),
    as_json: bool = typer.Option(False, "--json",
                                 help="print the outcome as JSON on stdout (progress goes to stderr)"),
) -> None:
    """Run SPEC on the local cloud: deploy, fire the start tick, wait, write the report.

    Each group's members run as local processes; the start/stop/done functions are served
    by the real functions-framework server on 127.0.0.1; results go to the spec's results
    URL. Ctrl-C (or SIGTERM) stops every group (nothing is left running).

    A group whose command cannot start, exits non-zero or reports no metric is `failed`
    (the tail of its stderr is shown) and is not retried in this run; a group over its
    deadline is stopped and retried, each attempt announced, up to 3 attempts per run.

    Exit codes: 0 every group complete; 3 a group ended incomplete (failed, preempted,
    over its deadline, refused by the budget) or the run was cut short (results store
    unwritable, functions unreachable); 1 another `spotbench run` of this sweep is live;
    130 interrupted (Ctrl-C, SIGTERM, SIGHUP); 2 bad input.
    """
    from spotbench.facts import facts_of

    spec = spec_or_exit(spec_path)
    if facts_of(spec.cloud).deployed_by_stack:
        fail(
            f"spec {spec.name} is for cloud {spec.cloud}: deploy it with `pulumi up` "
            f"(see docs/{spec.cloud}.md) or preview it with `spotbench preview {spec_path}`",
            code=EXIT_BAD_INPUT,
        )
    from spotbench.cli.extras import workload_missing

    needed = workload_missing(spec.cloud, spec.workload.name)
    if needed is not None:  # before anything starts: a member that cannot import is no preemption
        fail(f"{needed.message}: {needed.fix}", code=EXIT_BAD_INPUT)
    from spotbench.localrun.live import run_with_progress
    from spotbench.localrun.outcome import RunError
    from spotbench.localrun.takeover import AlreadyRunning

    reports = None if no_report else (report_dir or Path("reports") / spec.name)

    def one_run():  # noqa: ANN202 - (RunOutcome, report paths)
        return run_with_progress(
            spec, on_schedule=on_schedule, grace_s=grace, as_json=as_json, report_dir=reports,
            show_answer=lambda rankings: print_answer(rankings, to_stderr=as_json),
        )

    try:
        outcome, _ = _once(spec, one_run, reports or Path("reports") / spec.name, as_json,
                           on_schedule) if spec.run_once else one_run()
    except AlreadyRunning as exc:
        fail(str(exc), code=1)
    except RunError as exc:
        fail(str(exc), code=EXIT_INCOMPLETE)
    except KeyboardInterrupt:
        fail("interrupted: every group was stopped and the run closed", code=EXIT_INTERRUPTED)
    if not outcome.ok:
        raise typer.Exit(EXIT_INCOMPLETE)


def _once(spec: SweepSpec, one_run, logs_to: Path, as_json: bool, on_schedule: bool):  # noqa: ANN001, ANN202
    """`schedule: once` on the local cloud: the run, then nothing left but the results
    (`spotbench.ops.once`); the members' logs move beside the report."""
    from spotbench.localrun.takeover import AlreadyRunning
    from spotbench.ops.once import OnceLeftovers, run_then_teardown

    if on_schedule:
        fail("--on-schedule: the spec says `schedule: once` (one run, no cron); leave "
             "--on-schedule out, or give `schedule: {cron: ...}`", code=EXIT_BAD_INPUT)
    echo = (lambda line: err_console.print(line, highlight=False, markup=False)) if as_json else (
        lambda line: console.print(line, highlight=False, markup=False))
    try:
        result, _ended = run_then_teardown(spec, one_run, logs_to=logs_to, echo=echo,
                                           spare=(AlreadyRunning,))
    except OnceLeftovers as exc:
        fail(str(exc), code=EXIT_INCOMPLETE)
    return result


def register(app: typer.Typer) -> None:
    app.command()(plan)
    app.command()(run)
