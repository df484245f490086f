"""Teardown: `pulumi destroy` for the stack, then an orphan sweep that leaves nothing behind.

The sweep does not trust the stack: it lists every object carrying `managed-by=spotbench`
(and the sweep's label, unless `all_sweeps`) in every zone/region of the cloud and removes
them — spot requests first (a persistent request would relaunch its instance), then
instances, then static addresses. Dry run unless `yes`. Results are never touched: no
sweeper lists buckets or the results store.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from spotbench import PROJECT_ROOT
from spotbench.clouds import get_provider
from spotbench.ops._resources import DELETE_ORDER, Resource, Sweeper, TeardownReport
from spotbench.spec import SweepSpec

Echo = Callable[[str], None]

__all__ = ["Resource", "TeardownReport", "sweeper_for", "pulumi_destroy", "teardown"]


def sweeper_for(
    cloud: str,
    spec: SweepSpec | None = None,
    *,
    root: Path | str | None = None,
    regions: list[str] | None = None,
    project: str | None = None,
) -> Sweeper:
    """The orphan sweeper of `cloud`. AWS searches `regions` (default: every enabled
    region); GCP searches every zone and region of the project (aggregated lists)."""
    return get_provider(cloud).orphans(spec, root=root, regions=regions, project=project)


def pulumi_command(stack: str, work_dir: Path = PROJECT_ROOT) -> str:
    return f"pulumi destroy --stack {stack} --cwd {work_dir} --yes"


def pulumi_destroy(stack: str, *, yes: bool, echo: Echo, work_dir: Path = PROJECT_ROOT) -> str:
    """Destroy (or, dry run, preview destroying) the stack through the Automation API.

    Without the Pulumi CLI, says so and gives the command to run; returns a one-line note.
    """
    if shutil.which("pulumi") is None:
        return (
            "the Pulumi CLI is not installed, so the stack was not destroyed; install it "
            "(https://www.pulumi.com/docs/install/) and run: " + pulumi_command(stack, work_dir)
        )
    from pulumi import automation as auto

    try:
        if (work_dir / "Pulumi.yaml").exists():  # a checkout: its project and stack config files
            stack_obj = auto.select_stack(stack_name=stack, work_dir=str(work_dir))
        else:  # an installed spotbench: the program ships as the `infra` package
            stack_obj = auto.select_stack(stack_name=stack, project_name="spotbench",
                                          program=_installed_program)
        if not yes:
            result = stack_obj.preview_destroy(on_output=echo)
            return f"pulumi: destroying stack {stack} would change {result.change_summary}"
        stack_obj.destroy(on_output=echo)
        return f"pulumi: stack {stack} destroyed"
    except Exception as exc:  # noqa: BLE001 - the orphan sweep still runs after this
        return f"pulumi destroy of stack {stack} failed ({exc}); run: " + pulumi_command(stack, work_dir)


def _installed_program() -> None:
    import runpy

    runpy.run_path(str(PROJECT_ROOT / "infra" / "__main__.py"), run_name="__main__")


def teardown(
    sweep: str | None,
    sweeper: Sweeper,
    *,
    yes: bool = False,
    stack: str | None = None,
    echo: Echo = print,
) -> TeardownReport:
    """Remove `sweep`'s resources (every spotbench resource when `sweep` is None).

    `stack`: the Pulumi stack to destroy first (None: no stack, e.g. local sweeps).
    """
    report = TeardownReport(dry_run=not yes)
    if stack is not None:
        note = pulumi_destroy(stack, yes=yes, echo=echo)
        report.notes.append(note)
        echo(note)
    try:
        found = sweeper.find(sweep)
    except Exception as exc:  # noqa: BLE001 - say what could not be searched
        report.notes.append(f"could not list {sweeper.cloud} resources: {exc}")
        report.failed.append((Resource(sweeper.cloud, "listing", "-", "-", sweep), str(exc)))
        echo(report.notes[-1])
        return report
    report.found = sorted(found, key=lambda r: (DELETE_ORDER.get(r.kind, 9), r.where, r.id))
    scope = f"sweep {sweep}" if sweep else "every sweep"
    echo(f"{len(report.found)} {sweeper.cloud} resource(s) of {scope} labelled managed-by=spotbench")
    for res in report.found:
        if not yes:
            echo(f"  would delete {res.describe()}")
            continue
        try:
            sweeper.delete(res)
        except Exception as exc:  # noqa: BLE001 - report it, carry on with the rest
            report.failed.append((res, str(exc) or type(exc).__name__))
            echo(f"  FAILED {res.describe()}: {exc}")
        else:
            report.removed.append(res)
            echo(f"  deleted {res.describe()}")
    echo(report.summary())
    return report
