"""What teardown finds and removes: one `Resource` per cloud object, and the report.

A `Sweeper` lists the spotbench-labelled objects of one cloud (whether or not a Pulumi
stack still knows them) and deletes one at a time, raising on failure so the caller can
report the reason and carry on with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

# Lower runs first: a persistent spot request would relaunch its instance, and a static
# address cannot go while an instance still holds it.
DELETE_ORDER = {"spot-request": 0, "instance": 1, "process": 1, "address": 2, "functions-server": 3}


@dataclass(frozen=True)
class Resource:
    cloud: str  # local | gcp | aws
    kind: str  # instance | spot-request | address | process | functions-server
    id: str  # name / instance id / request id
    where: str  # zone, region or state dir
    sweep: str | None = None
    state: str = ""

    def describe(self) -> str:
        extra = f" [{self.state}]" if self.state else ""
        sweep = f" sweep={self.sweep}" if self.sweep else ""
        return f"{self.cloud} {self.kind} {self.id} in {self.where}{sweep}{extra}"


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


class Sweeper(Protocol):
    cloud: str

    def find(self, sweep: str | None) -> list[Resource]:
        """Every spotbench-labelled object (of `sweep`, or of any sweep when None)."""
        ...

    def delete(self, resource: Resource) -> None:
        """Remove one object; raise with a readable message when that fails."""
        ...
