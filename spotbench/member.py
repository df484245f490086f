"""What a workload process learns about itself at boot: the `SPOTBENCH_*` environment.

The whole context travels as one JSON value in `SPOTBENCH_CONTEXT` (cloud-init writes it
to the container's env file, the local cloud puts it in the process env). The most used
fields are mirrored as plain variables (`SPOTBENCH_ROLE`, `SPOTBENCH_RANK`, …) for shell
helpers and humans reading `env`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from spotbench.facts import facts_of
from spotbench.plan import Member, RunGroup

ENV_KEY = "SPOTBENCH_CONTEXT"
# A VM made from a template whose boot document serves several members (GCP's created
# lifecycle) carries one group context and learns which member it is at boot: this names it,
# and `from_env` takes that member's name, role, index and rank from the context's members
# (the document then grows with the group, not with its square: infra/gcp/cloud_init.py).
MEMBER_KEY = "SPOTBENCH_MEMBER"
# A member that starts outside an open run (a cloud booted it: GCE at creation, EC2 when
# spot capacity returns) exits with this code without writing anything; the VM's unit
# then powers the VM off (infra.units.workload_unit).
EXIT_OUTSIDE_RUN = 3


class Peer(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    role: str
    index: int
    rank: int
    host: str  # internal IP on clouds, 127.0.0.1 locally
    port: int  # the member's service port (TF gRPC, MPI exec agent / sshd)
    machine_type: str = ""  # its VM type when its role has its own (`role_machine_types`)
    extra_ports: tuple[int, ...] = ()  # its further service ports (`Workload.member_ports`)


class MemberContext(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sweep: str
    group: str
    trial: int
    cloud: str
    workload: str
    params: dict[str, Any]
    name: str  # this member's instance name
    role: str
    index: int
    rank: int
    members: list[Peer]
    results_url: str
    done_url: str | None = None
    token: str | None = None  # local cloud: bearer token of this member; clouds use identity
    machine_type: str = "local"
    accelerator: str | None = None
    accelerator_count: int = 0  # GPUs per member (the spec's `accelerator_count`)
    zone: str | None = None
    spot: bool = False
    placement: str = "none"
    deadline_s: int | None = None  # the group's deadline from its run's start (clouds)
    scaling: dict[str, Any] | None = None  # the spec's `scaling` (records carry it)
    work: dict[str, Any] | None = None  # the spec's `work` (records carry it)

    @classmethod
    def for_member(
        cls,
        group: RunGroup,
        member: Member,
        *,
        addresses: Mapping[str, tuple[str, int]],
        cloud: str,
        results_url: str,
        done_url: str | None,
        token: str | None = None,
        zone: str | None = None,
        spot: bool = False,
        deadline_s: int | None = None,
        extra_ports: Mapping[str, Sequence[int]] | None = None,
    ) -> MemberContext:
        """Build the context of `member`; `addresses` maps member name → (host, port),
        `extra_ports` member name → its further service ports (`Workload.member_ports`)."""
        extra = extra_ports or {}
        peers = [
            Peer(name=m.name, role=m.role, index=m.index, rank=m.rank,
                 host=addresses[m.name][0], port=addresses[m.name][1],
                 extra_ports=tuple(extra.get(m.name, ())),
                 machine_type=m.machine_type or group.machine_type)
            for m in group.members
        ]
        return cls(
            sweep=group.sweep, group=group.id, trial=group.trial, cloud=cloud,
            workload=group.workload, params=group.record_params, name=member.name,
            role=member.role, index=member.index, rank=member.rank, members=peers,
            results_url=results_url, done_url=done_url, token=token,
            machine_type=group.machine_type, accelerator=group.accelerator,
            accelerator_count=group.accelerator_count if group.accelerator else 0, zone=zone,
            spot=spot, placement=group.placement, deadline_s=deadline_s,
            scaling=group.scaling, work=group.work,
        )

    def to_env(self) -> dict[str, str]:
        return {
            ENV_KEY: self.model_dump_json(),
            "SPOTBENCH_SWEEP": self.sweep,
            "SPOTBENCH_GROUP": self.group,
            "SPOTBENCH_ROLE": self.role,
            "SPOTBENCH_RANK": str(self.rank),
            "SPOTBENCH_RESULTS_URL": self.results_url,
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MemberContext:
        env = os.environ if env is None else env
        raw = env.get(ENV_KEY)
        if not raw:
            raise RuntimeError(
                f"{ENV_KEY} is not set: workloads are started by a spotbench cloud "
                "(`spotbench run SPEC`), which passes each member its context"
            )
        ctx = cls.model_validate(json.loads(raw))
        member = env.get(MEMBER_KEY)
        return ctx.as_member(member) if member and member != ctx.name else ctx

    def as_member(self, name: str) -> MemberContext:
        """The same group's context as seen by its member `name`."""
        peer = next((p for p in self.members if p.name == name), None)
        if peer is None:
            raise RuntimeError(f"{MEMBER_KEY}={name!r} is no member of group {self.group}")
        return self.model_copy(update={"name": peer.name, "role": peer.role,
                                       "index": peer.index, "rank": peer.rank})

    def peers(self, role: str | None = None) -> list[Peer]:
        return [p for p in self.members if role is None or p.role == role]

    @property
    def shares_host(self) -> bool:
        """The group's members run on this one machine (the local cloud): ports are picked
        free, MPI reaches peers through their exec agent, tasks share the cores."""
        return facts_of(self.cloud).shares_host

    @property
    def boots_outside_runs(self) -> bool:
        """A stack created this member's VM: it boots at creation and (AWS persistent spot)
        whenever capacity returns, not only when a run starts it."""
        return facts_of(self.cloud).deployed_by_stack

    @property
    def me(self) -> Peer:
        return next(p for p in self.members if p.name == self.name)
