"""The verbs every cloud speaks, and the states instances are reported in.

Pulumi *declares* instances (or the local cloud's `deploy`); a Cloud only *operates* them.
Every verb selects instances by labels (all given labels must match), is idempotent, and
returns the instances it acted on as they are afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


class ErrorKind(StrEnum):
    """Why an instance is not doing what was asked: what control code branches on.

    The cloud's own words stay in `Instance.detail` for humans; code never parses them.
    """

    CAPACITY = "capacity"  # no capacity for this machine type/zone now (spot stockout): retry later
    QUOTA = "quota"  # a project/account quota or limit: retrying will not help until it is raised
    PREEMPTED = "preempted"  # the cloud took the VM back (spot reclaim) or it was stopped from outside
    CRASHED = "crashed"  # the workload exited with an error, was killed, or could not start
    API = "api"  # the cloud's API failed or an operation did not finish in time (transient)
    GONE = "gone"  # the instance no longer exists (deleted/terminated): redeploy it
    WAITING = "waiting"  # the cloud holds it for now (EC2: its spot request is not startable yet)


# Errors that mean "the cloud could not run it now": the group was not started.
UNAVAILABLE = frozenset({ErrorKind.CAPACITY, ErrorKind.QUOTA, ErrorKind.API, ErrorKind.GONE,
                         ErrorKind.WAITING})


@dataclass(frozen=True)
class Instance:
    """One VM (or local process) as a cloud reports it.

    `name` is the cloud's name for it (GCE instance name, EC2 instance id, local name), `id`
    the provider's unique id when it has one; `member` is the plan's member name; `error` is
    the typed outcome of the last verb or of the VM's last life (None: nothing went wrong);
    `detail` is the cloud's own words about it.
    """

    name: str
    state: State
    labels: Mapping[str, str] = field(default_factory=dict)
    zone: str | None = None
    ip: str | None = None
    detail: str = ""  # e.g. the capacity error's message, an exit code
    id: str | None = None  # the provider's unique id (GCE's numeric id), when it has one
    error: ErrorKind | None = None

    @property
    def member(self) -> str:
        """The plan's member name (AWS names instances by id and tags the member as `Name`)."""
        return self.labels.get("Name") or self.name

    def group(self) -> str | None:
        return self.labels.get("spotbench-group")

    @property
    def unavailable(self) -> bool:
        """Asked to start, the cloud could not run it (capacity, quota, API, gone)."""
        return self.state not in ACTIVE and self.error in UNAVAILABLE


@dataclass(frozen=True)
class ConsoleOutput:
    """What an instance printed (its workload's log on its console), read from `start`.

    A driver may offer `console_output(instance, start) -> ConsoleOutput` (not part of the
    `Cloud` protocol: `spotbench logs` asks with getattr). `start`/`next` are byte offsets
    when the cloud keeps them (GCE's serial port: `start` may come back later than asked,
    when older output was discarded from its 1 MB buffer; local files); `window` is True
    when the cloud only hands back its latest window and no offsets (EC2: the last 64 KB),
    so the caller tells new text from old by overlap (`spotbench.ops.logs`)."""

    text: str
    start: int = 0
    next: int = 0
    window: bool = False


@runtime_checkable
class Cloud(Protocol):
    name: str

    def start(self, labels: Mapping[str, str], zones: Sequence[str] = ()) -> list[Instance]:
        """Run the instances of `labels`. `zones`: the candidate zones, first choice first,
        for a cloud whose instances are made at start (`lifecycle: created`); a cloud of
        instances made beforehand (stopped) starts them where they are and ignores it.

        A created-lifecycle driver may also keep `last_refusals: list[list[Instance]]`: for
        its last `start`, the members as each zone it asked before its answer refused them
        (zone and typed error set); control notes each in the start ledger."""
        ...

    def stop(self, labels: Mapping[str, str]) -> list[Instance]: ...

    def terminate(self, labels: Mapping[str, str]) -> list[Instance]: ...

    def query(self, labels: Mapping[str, str]) -> list[Instance]: ...


def matches(instance_labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(instance_labels.get(k) == v for k, v in selector.items())


# ---- what teardown finds: the orphan finder of each cloud ------------------------
# Lower runs first: a persistent spot request would relaunch its instance, and a static
# address cannot go while an instance still holds it; deleting an instant EC2 Fleet
# terminates its instances, so it goes first (moto refuses it once they are gone).
DELETE_ORDER = {"spot-request": 0, "fleet": 0, "instance": 1, "process": 1, "address": 2, "functions-server": 3}


@dataclass(frozen=True)
class Resource:
    cloud: str  # local | gcp | aws
    kind: str  # instance | spot-request | fleet | address | process | functions-server
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
