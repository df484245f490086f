"""The `container` workload: one member runs the user's command; metrics come from what
it writes (see `workloads/container/__init__.py`)."""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import Field, field_validator

from spotbench.workload import Images, Params, UserImage, Workload


class ContainerParams(Params):
    """Any image + command: the command's own numbers become results."""

    name: Literal["container"] = "container"
    command: list[str] = Field(
        min_length=1,
        description="what to run: a list of arguments, or one string split like a shell does",
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment for it")

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        if isinstance(v, str):
            try:
                return shlex.split(v)
            except ValueError as exc:
                raise ValueError(f"cannot split the command like a shell: {exc}") from None
        return v


def roles(params: ContainerParams) -> list[tuple[str, int]]:
    return [("member", 0)]


WORKLOAD = Workload(
    name="container",
    params=ContainerParams,
    module="workloads.container",
    roles=roles,
    role_codes={"member": "m"},
    images=Images(),  # no default: the spec's `image:` is the benchmark
    # on a cloud VM the spec's image runs the command as it is; images/runner collects
    user_image=UserImage(runner="runner", command=lambda p: list(p.command),
                         env=lambda p: dict(p.env)),
    report="workloads.container.report:section",
    description=ContainerParams.__doc__ or "",
)
