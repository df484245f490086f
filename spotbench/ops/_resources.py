"""What teardown reports. (`Resource` and `Sweeper` live in `spotbench.clouds.base`.)

A `Sweeper` lists the spotbench-labelled objects of one cloud (whether or not a Pulumi
stack still knows them) and deletes one at a time, raising on failure so the caller can
report the reason and carry on with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spotbench.clouds.base import DELETE_ORDER, Resource, Sweeper

__all__ = ["DELETE_ORDER", "Resource", "Sweeper", "TeardownReport"]


@dataclass
class TeardownReport:
    dry_run: bool
    found: list[Resource] = field(default_factory=list)
    removed: list[Resource] = field(default_factory=list)
    failed: list[tuple[Resource, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.dry_run:
            return (
                f"dry run: {len(self.found)} resource(s) would be removed; "
                "nothing was deleted (run again with --yes to delete)"
            )
        line = f"removed {len(self.removed)} resource(s)"
        if self.failed:
            reasons = "; ".join(f"{r.kind} {r.id}: {why}" for r, why in self.failed)
            line += f", {len(self.failed)} could not be removed: {reasons}"
        else:
            line += ", none left behind"
        return line

    def as_dict(self) -> dict:
        return {
            "dry_run": self.dry_run,
            "found": [r.__dict__ for r in self.found],
            "removed": [r.__dict__ for r in self.removed],
            "failed": [{**r.__dict__, "reason": why} for r, why in self.failed],
            "notes": self.notes,
        }
