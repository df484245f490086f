"""Teardown: `pulumi destroy` for the stack (`infra.destroy`, handed in by the CLI), then an
orphan sweep that leaves nothing behind.

The sweep does not trust the stack: it lists every object carrying `managed-by=spotbench`
(and the sweep's label, unless `all_sweeps`) in every zone/region of the cloud and removes
them — spot requests first (a persistent request would relaunch its instance), then
instances, then static addresses. Dry run unless `yes`. Results are never touched: no
sweeper lists buckets or the results store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spotbench.clouds import get_provider
from spotbench.ops._resources import DELETE_ORDER, Resource, Sweeper, TeardownReport
from spotbench.spec import SweepSpec

Echo = Callable[[str], None]
# destroys the sweep's Pulumi stack first (yes=, echo=) → a one-line note; the CLI passes
# `infra.destroy.pulumi_destroy` bound to the stack (only infra/ imports Pulumi)
StackDestroyer = Callable[..., str]

__all__ = ["Resource", "TeardownReport", "sweeper_for", "teardown"]


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


def teardown(
    sweep: str | None,
    sweeper: Sweeper,
    *,
    yes: bool = False,
    destroy_stack: StackDestroyer | None = None,
    echo: Echo = print,
) -> TeardownReport:
    """Remove `sweep`'s resources (every spotbench resource when `sweep` is None).

    `destroy_stack(yes=, echo=)`: destroys the Pulumi stack first and returns a note
    (None: no stack, e.g. local sweeps).
    """
    report = TeardownReport(dry_run=not yes)
    release = getattr(sweeper, "release", None)  # AWS: cancel spot requests before destroy
    if destroy_stack is not None and yes and release is not None:
        for note in release(sweep):
            report.notes.append(note)
            echo(note)
    if destroy_stack is not None:
        note = destroy_stack(yes=yes, echo=echo)
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
