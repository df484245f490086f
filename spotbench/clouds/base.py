"""The verbs every cloud speaks, and the states instances are reported in.

Pulumi *declares* instances (or the local cloud's `deploy`); a Cloud only *operates* them.
Every verb selects instances by labels (all given labels must match), is idempotent, and
returns the instances it acted on as they are afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable


class State(StrEnum):
    PENDING = "PENDING"  # asked to start, not running yet
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"  # off, can be started again
    TERMINATED = "TERMINATED"  # gone for good


ACTIVE = frozenset({State.PENDING, State.RUNNING, State.STOPPING})


@dataclass(frozen=True)
class Instance:
    name: str
    state: State
    labels: Mapping[str, str] = field(default_factory=dict)
    zone: str | None = None
    ip: str | None = None
    detail: str = ""  # e.g. a capacity error, an exit code
    id: str | None = None  # the provider's unique id (GCE's numeric id), when it has one

    def group(self) -> str | None:
        return self.labels.get("spotbench-group")


@runtime_checkable
class Cloud(Protocol):
    name: str

    def start(self, labels: Mapping[str, str]) -> list[Instance]: ...

    def stop(self, labels: Mapping[str, str]) -> list[Instance]: ...

    def terminate(self, labels: Mapping[str, str]) -> list[Instance]: ...

    def query(self, labels: Mapping[str, str]) -> list[Instance]: ...


def matches(instance_labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(instance_labels.get(k) == v for k, v in selector.items())


# ---- what teardown finds: the orphan finder of each cloud ------------------------
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


class Sweeper(Protocol):
    cloud: str

    def find(self, sweep: str | None) -> list[Resource]:
        """Every spotbench-labelled object (of `sweep`, or of any sweep when None)."""
        ...

    def delete(self, resource: Resource) -> None:
        """Remove one object; raise with a readable message when that fails."""
        ...
