"""Operations commands: status, schedule pause|resume|run-now, teardown, ssh, exec, collect.

Every option has an environment-variable twin (shown in --help), so cron jobs and CI can
configure them once (see also the thin twins in `scripts/`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from spotbench.facts import CLOUDS  # the registry: the --cloud choices

if TYPE_CHECKING:
    from spotbench.ops.schedule import ScheduleInfo
    from spotbench.ops.status import SweepStatus
    from spotbench.spec import SweepSpec

from spotbench.cli._common import (
    EXIT_BAD_INPUT, Column, console, credentials_or_exit, credentials_problem, dropped_note,
    err_console, explained, fail, fit_table, spec_or_exit, styled, warn,
)

schedule_app = typer.Typer(help="Pause, resume or fire now a sweep's start/stop pair.", no_args_is_help=True)

SpecArg = typer.Argument(..., help="sweep spec (YAML)", metavar="SPEC")
JsonOpt = typer.Option(False, "--json", help="print JSON instead of a table")
ResultsOpt = typer.Option(
    None, "--results", envvar="SPOTBENCH_RESULTS_URL",
    help="results URL [default: the spec's `results`; gcp: the stack's bucket "
         "gs://spotbench-SWEEP-PROJECT/SWEEP; aws: required unless the spec names one]",
)
RootOpt = typer.Option(None, "--state-root", envvar="SPOTBENCH_STATE_ROOT", help="local state dir (.spotbench)")


# ---- status --------------------------------------------------------------------------
def status(
    spec_path: Path | None = typer.Argument(None, help="sweep spec; omit to list local sweeps", metavar="[SPEC]"),
    as_json: bool = JsonOpt,
    results: str | None = ResultsOpt,
    root: Path | None = RootOpt,
) -> None:
    """Every group with members, state, zone, age, deadline, spend, last result, schedule."""
    if spec_path is None:
        _local_overview(root, as_json)
        return
    spec = spec_or_exit(spec_path)
    report = _sweep_report(spec, results, root)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2, default=str))
        return
    _print_groups(spec, report)
    _print_schedule(report.schedule)
    _print_failures(report)
    if report.spend is not None:
        console.print(spend_sentence(report.spend), highlight=False, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False, markup=False)


def _sweep_report(spec: SweepSpec, results: str | None, root: Path | None) -> SweepStatus:
    """The sweep's status from what can be reached: the results store always, the cloud and
    its schedule when credentials allow (a warning for each that cannot be reached)."""
    from spotbench.ops import status as st
    from spotbench.ops.context import cloud_for, results_url_for
    from spotbench.ops.schedule import control_for
    from spotbench.results import ResultStore

    try:
        url = results_url_for(spec, results)
    except ValueError as exc:  # SettingMissing: only the deployed stack knows the bucket
        fail(str(exc), EXIT_BAD_INPUT)
    # before any SDK call (their retries without credentials take a minute): results in the
    # cloud's bucket cannot be read at all; a local copy still shows the plan and results
    problem = credentials_problem(spec.cloud)
    if problem and "://" in url and not url.startswith(("file://", "local://")):
        fail(problem)
    store = ResultStore(url)
    cloud = control = None
    if problem:
        warn(problem, prefix=f"cannot reach {spec.cloud}: ")
    else:
        try:
            cloud = cloud_for(spec, root)
        except Exception as exc:  # noqa: BLE001 - status shows what it can
            warn(explained(exc), prefix=f"cannot reach {spec.cloud}: ")
        try:
            control = control_for(spec, root)
        except Exception as exc:  # noqa: BLE001
            warn(explained(exc), prefix="schedule state unavailable: ")
    return st.sweep_status(spec, cloud, store, control)


def _print_groups(spec: SweepSpec, report: SweepStatus) -> None:
    from spotbench.ops import status as st

    columns = [Column("group", key=True), Column("state"), Column("members"), Column("zone", drop=3),
               Column("age", drop=2), Column("deadline", drop=4), Column("last result", drop=1)]
    rows = []
    for g in report.groups:
        members = "\n".join(f"{m.name.removeprefix(g.id + '-')}:{m.role} {m.state}"
                            + (f" ({m.error})" if m.error else "") for m in g.members)
        deadline = g.deadline.strftime("%Y-%m-%d %H:%M:%SZ") if g.deadline else "-"
        rows.append([g.id, g.state, members, g.zone or "-", st.fmt_age(g.age_s), deadline, g.last_result or "-"])
    table, dropped = fit_table(f"{spec.name} on {spec.cloud}" + (f" · run {report.run}" if report.run else ""),
                               columns, rows)
    console.print(table)
    if dropped:
        console.print(dropped_note(dropped), highlight=False, markup=False)


def _print_schedule(sch: ScheduleInfo) -> None:
    paused = {True: "PAUSED", False: "active", None: "unknown"}[sch.paused]
    if sch.cron:
        console.print(f"schedule: '{sch.cron}' {sch.timezone} · {paused} · next start {sch.next_start} · "
                      f"next stop {sch.next_stop} {sch.detail}", highlight=False, markup=False)
    else:
        console.print(f"schedule: none (runs on demand) · {paused}", highlight=False, markup=False)


def _print_failures(report: SweepStatus) -> None:
    for g in report.groups:
        if g.failure is not None:
            err_console.print(styled("failed: ", "bold red", g.failure.line()), highlight=False)
            if g.failure.stderr_tail:
                err_console.print("  its stderr ends with:\n" + "\n".join(
                    "    " + line for line in g.failure.stderr_tail.splitlines()),
                    highlight=False, markup=False)


def spend_sentence(spend: dict) -> str:
    """`spend: 0.0123 USD spent, 0.0040 USD committed by running groups; budget 5 USD (…)`."""
    def usd(v: object) -> str:
        return f"{v:.4f} USD" if isinstance(v, int | float) else "unknown"

    text = f"spend: {usd(spend.get('spent'))} spent"
    if spend.get("committed") is None:
        text += ", committed by running groups unknown (a machine type has no price)"
    else:
        text += f", {usd(spend.get('committed'))} committed by running groups"
    budget = spend.get("budget")
    if budget is None:
        text += "; no budget set (add `budget: USD` to the spec to cap spend)"
    else:
        left = budget - (spend.get("spent") or 0) - (spend.get("committed") or 0)
        text += f"; budget {budget:g} USD, {usd(max(left, 0.0))} left"
    if spend.get("unpriced_runs"):
        text += f"; {spend['unpriced_runs']} stored attempt(s) have no price and are not counted"
    return text


def _local_overview(root: Path | None, as_json: bool) -> None:
    from spotbench.clouds import get_provider
    from spotbench.facts import facts_of
    from spotbench.ops.context import state_root

    found = [r for name in CLOUDS if facts_of(name).shares_host
             for r in get_provider(name).orphans(None, root=root).find(None)]
    if as_json:
        typer.echo(json.dumps([r.__dict__ for r in found], indent=2))
        return
    if not found:
        console.print(f"no local sweeps under {state_root(root)}; give a SPEC for a cloud sweep", markup=False)
    for r in found:
        console.print(f"{r.sweep}  {r.kind}  {r.id}  {r.state}", highlight=False, markup=False)


# ---- schedule --------------------------------------------------------------------------
def _schedule(spec_path: Path, action: str, root: Path | None, as_json: bool = False) -> None:
    from spotbench.ops.schedule import control_for

    spec = spec_or_exit(spec_path)
    credentials_or_exit(spec.cloud)
    verb = action.replace("_", "-")
    try:
        control = control_for(spec, root)
        message = getattr(control, action)()
    except Exception as exc:  # noqa: BLE001 - one clear line, exit 1
        fail(f"{verb} {spec.name}: {explained(exc)}")
    if as_json:
        typer.echo(json.dumps({"sweep": spec.name, "cloud": spec.cloud, "action": verb, "message": message}))
        return
    console.print(message, highlight=False, markup=False)


@schedule_app.command("pause")
def schedule_pause(spec_path: Path = SpecArg, root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
    """Stop starting groups (the deadline stop still fires for running ones)."""
    _schedule(spec_path, "pause", root, as_json)


@schedule_app.command("resume")
def schedule_resume(spec_path: Path = SpecArg, root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
    """Let the start ticks fire again."""
    _schedule(spec_path, "resume", root, as_json)


@schedule_app.command("run-now")
def schedule_run_now(spec_path: Path = SpecArg, root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
    """Fire the start tick now."""
    _schedule(spec_path, "run_now", root, as_json)


# ---- teardown --------------------------------------------------------------------------
def teardown(
    spec_path: Path | None = typer.Argument(None, help="sweep spec (optional with --all-sweeps)", metavar="SPEC"),
    yes: bool = typer.Option(False, "--yes", envvar="SPOTBENCH_YES", help="really delete (default: dry run)"),
    all_sweeps: bool = typer.Option(False, "--all-sweeps", envvar="SPOTBENCH_ALL_SWEEPS",
                                    help="every spotbench-labelled resource, of any sweep"),
    cloud: str | None = typer.Option(None, "--cloud", envvar="SPOTBENCH_CLOUD",
                                     help=f"{'|'.join(CLOUDS)} (default: the spec's)"),
    stack: str | None = typer.Option(None, "--stack", envvar="SPOTBENCH_STACK",
                                     help="Pulumi stack to destroy (default: the sweep's name)"),
    regions: str | None = typer.Option(None, "--regions", envvar="SPOTBENCH_REGIONS",
                                       help="aws: comma-separated regions (default: every enabled region)"),
    project: str | None = typer.Option(None, "--project", envvar="SPOTBENCH_GCP_PROJECT", help="gcp project"),
    root: Path | None = RootOpt,
    as_json: bool = JsonOpt,
) -> None:
    """pulumi destroy, then remove every orphan labelled managed-by=spotbench. Results stay."""
    from spotbench.facts import facts_of
    from spotbench.ops.teardown import sweeper_for
    from spotbench.ops.teardown import teardown as run_teardown

    spec = spec_or_exit(spec_path) if spec_path is not None else None
    if spec is None and not all_sweeps:
        fail("give SPEC, or --all-sweeps with --cloud", 2)
    which = cloud or (spec.cloud if spec else None)
    if which is None:
        fail(f"--all-sweeps without SPEC needs --cloud {'|'.join(CLOUDS)}", 2)
    credentials_or_exit(which)
    try:
        sweeper = sweeper_for(which, spec, root=root, project=project,
                              regions=[r.strip() for r in regions.split(",")] if regions else None)
    except ValueError as exc:
        fail(str(exc), 2)
    deployed_by_stack = facts_of(which).deployed_by_stack
    pulumi_stack = None if not deployed_by_stack or spec is None else (stack or spec.name)
    echo = (lambda line: err_console.print(line, highlight=False, markup=False)) if as_json else (
        lambda line: console.print(line, highlight=False, markup=False))
    destroy_stack = None
    if pulumi_stack is not None:
        from infra.destroy import pulumi_destroy  # Pulumi's Automation API: only infra/ imports it

        destroy_stack = functools.partial(pulumi_destroy, pulumi_stack)
    report = run_teardown(None if all_sweeps else spec.name, sweeper, yes=yes,
                          destroy_stack=destroy_stack, echo=echo)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    if report.failed:
        raise typer.Exit(1)


# ---- ssh / exec / collect --------------------------------------------------------------
SpecOpt = typer.Option(..., "--spec", "-s", envvar="SPOTBENCH_SPEC", help="sweep spec (YAML)")
GroupArg = typer.Argument(..., help="group id (see `spotbench status`)")


def _access(
    spec_path: Path, group_id: str, known_hosts: Path | None, user: str, key: str | None, via: str,
    jump: str | None, port: int, hosts: list[str] | None, root: Path | None,
):
    from spotbench.clouds import get_provider
    from spotbench.ops.context import cloud_for, sweep_dir
    from spotbench.ops.remote import NEUTRAL_VIAS, AccessConfig, targets_for

    spec = spec_or_exit(spec_path)
    group = next((g for g in spec.plan() if g.id == group_id), None)
    if group is None:
        fail(f"{spec.name} has no group {group_id!r}; `spotbench plan {spec_path}` lists them", 2)
    provider = get_provider(spec.cloud)
    vias = (*NEUTRAL_VIAS, *provider.ssh_vias)  # the cloud's own ways are its provider's
    if via not in vias:
        fail(f"--via {via!r}: choose {', '.join(vias[:-1])} or {vias[-1]} (cloud {spec.cloud})", 2)
    cfg = AccessConfig(
        known_hosts=known_hosts or sweep_dir(spec.name, root) / "known_hosts",
        user=user, key_filename=key, via=via, jump=jump, port=port,
        **provider.access_options(spec, via),
    )
    overrides = dict(h.split("=", 1) for h in hosts or [])
    cloud = None if len(overrides) >= len(group.members) else cloud_for(spec, root)
    return spec, group, cfg, targets_for(group, cloud, cfg, overrides)


def _vias_help() -> str:
    """direct|jump and each cloud's own ways (`Provider.ssh_vias`), named by cloud."""
    from spotbench.clouds import get_provider

    return "|".join(("direct", "jump", *(f"{v} ({n})" for n in CLOUDS for v in get_provider(n).ssh_vias)))


_ACCESS_OPTS = dict(
    known_hosts=typer.Option(None, "--known-hosts", envvar="SPOTBENCH_KNOWN_HOSTS",
                             help="host keys the stack recorded (default .spotbench/<sweep>/known_hosts)"),
    user=typer.Option("spotbench", "--user", envvar="SPOTBENCH_SSH_USER"),
    key=typer.Option(None, "--key", envvar="SPOTBENCH_SSH_KEY", help="private key file"),
    via=typer.Option("direct", "--via", envvar="SPOTBENCH_SSH_VIA", help=_vias_help()),
    jump=typer.Option(None, "--jump", envvar="SPOTBENCH_SSH_JUMP", help="bastion user@host[:port]"),
    port=typer.Option(22, "--port", envvar="SPOTBENCH_SSH_PORT"),
    hosts=typer.Option(None, "--host", envvar="SPOTBENCH_SSH_HOSTS",
                       help="MEMBER=HOST[:PORT] (repeatable) instead of the cloud's addresses"),
)


def _print_outcomes(outcomes) -> int:
    bad = 0
    for o in outcomes:
        if o.error:
            bad += 1
            err_console.print(styled("", "red", f"{o.member}: {o.error}"), highlight=False)
            continue
        for line in (o.stdout + o.stderr).splitlines():
            console.print(f"{o.member}: {line}", highlight=False, markup=False)
        if o.exit_code:
            bad += 1
            err_console.print(styled("", "yellow", f"{o.member}: exit {o.exit_code}"), highlight=False)
        for path in o.files:
            console.print(f"{o.member}: stored {path}", highlight=False, markup=False)
    return 1 if bad else 0


KH, USER, KEY, VIA = (_ACCESS_OPTS[k] for k in ("known_hosts", "user", "key", "via"))
JUMP, PORT, HOSTS = (_ACCESS_OPTS[k] for k in ("jump", "port", "hosts"))


def exec_cmd(
    group_id: str = GroupArg,
    command: list[str] = typer.Argument(..., help="command to run on every member (after --)"),
    spec_path: Path = SpecOpt, known_hosts: Path | None = KH, user: str = USER, key: str | None = KEY,
    via: str = VIA, jump: str | None = JUMP, port: int = PORT, hosts: list[str] | None = HOSTS,
    root: Path | None = RootOpt,
) -> None:
    """Run a command on every member of a group at once; exit 1 when any member failed.

    Unreachable members are reported, the others served."""
    import shlex

    from spotbench.ops.remote import run_on_group

    _, _, cfg, targets = _access(spec_path, group_id, known_hosts, user, key, via, jump, port, hosts, root)
    if not targets:
        fail(f"no member of {group_id} is known to the cloud (is the group deployed?)")
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        fail("give the command after --, e.g. `spotbench exec GROUP -- uptime`", 2)
    line = command[0] if len(command) == 1 else shlex.join(command)  # one arg = a shell line
    raise typer.Exit(_print_outcomes(run_on_group(targets, cfg, line)))


def collect_cmd(
    group_id: str = GroupArg,
    paths: list[str] = typer.Option(["/var/log/spotbench"], "--path", envvar="SPOTBENCH_COLLECT_PATHS",
                                    help="remote file or directory to fetch (repeatable)"),
    run: str | None = typer.Option(None, "--run", envvar="SPOTBENCH_RUN", help="run id (default: current/latest)"),
    results: str | None = ResultsOpt,
    spec_path: Path = SpecOpt, known_hosts: Path | None = KH, user: str = USER, key: str | None = KEY,
    via: str = VIA, jump: str | None = JUMP, port: int = PORT, hosts: list[str] | None = HOSTS,
    root: Path | None = RootOpt,
) -> None:
    """Fetch raw logs and tool output from every member into the results store."""
    from spotbench.ops.context import results_for
    from spotbench.ops.remote import collect

    spec, group, cfg, targets = _access(spec_path, group_id, known_hosts, user, key, via, jump, port, hosts, root)
    try:
        outcomes = collect(targets, cfg, results_for(spec, results), group.id, tuple(paths), run)
    except ValueError as exc:
        fail(str(exc))
    raise typer.Exit(_print_outcomes(outcomes))


def ssh_cmd(
    group_id: str = GroupArg,
    member: str | None = typer.Argument(None, help="member name or suffix (default: rank 0)"),
    spec_path: Path = SpecOpt, known_hosts: Path | None = KH, user: str = USER, key: str | None = KEY,
    via: str = VIA, jump: str | None = JUMP, port: int = PORT, hosts: list[str] | None = HOSTS,
    root: Path | None = RootOpt,
) -> None:
    """An interactive shell on one member of a group (host key checked, never auto-accepted)."""
    from spotbench.ops.remote import open_shell

    _, group, cfg, targets = _access(spec_path, group_id, known_hosts, user, key, via, jump, port, hosts, root)
    wanted = [t for t in targets if member is None or t.member in (member, f"{group.id}-{member}")]
    if not wanted:
        fail(f"no reachable member {member or ''} in {group.id}; members: {[m.name for m in group.members]}")
    raise typer.Exit(open_shell(wanted[0], cfg))


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.add_typer(schedule_app, name="schedule")
    app.command()(teardown)
    app.command("ssh")(ssh_cmd)
    app.command("exec", context_settings={"allow_interspersed_args": False})(exec_cmd)
    app.command("collect")(collect_cmd)
