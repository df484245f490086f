"""The `container` workload: one member runs the user's command; metrics come from what
it writes (see `workloads/container/__init__.py`).

The command's `env` is treated as secret (API tokens, passwords): its values are
`SecretStr`s, so every serialised form of the params — the member context in GCE metadata
or EC2 user-data, records, `records.csv`, the functions' `SPOTBENCH_SPEC` — holds
`**********`; the values reach the command only through `user_env(params)`: on a cloud VM
from Secret Manager / SSM at boot (infra/user_image.py), locally through the member's own
process environment (`USER_ENV`).
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from spotbench.workload import Images, Params, UserImage, Workload

ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # what `docker --env-file` and a shell take
ENV_VALUE_FORBIDDEN = ("\n", "\r", "\x00")  # one env-file line per variable


class ContainerParams(Params):
    """Any image + command: the command's own numbers become results."""

    name: Literal["container"] = "container"
    command: list[str] = Field(
        min_length=1,
        description="what to run: a list of arguments, or one string split like a shell does",
    )
    env: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="extra environment for it (secret: never stored in metadata, records or reports)")
    nodes: int = Field(
        1, ge=1, le=64,
        description="members (VMs) the command runs on, each told its rank, the world size, the "
                    "leader's address and port and a hostfile (workloads/container/nodes.py); "
                    "the leader's exit and metrics decide")

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: object) -> object:
        if not isinstance(v, dict):
            return v
        for key, value in v.items():
            if not isinstance(key, str) or not ENV_KEY.match(key):
                raise ValueError(f"env key {key!r}: a name of letters, digits and '_', not "
                                 "starting with a digit (like API_TOKEN)")
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if isinstance(text, str) and any(c in text for c in ENV_VALUE_FORBIDDEN):
                raise ValueError(f"env {key}: a value cannot hold a line break or NUL (one "
                                 "line per variable in the container's env file)")
        return v

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        if isinstance(v, str):
            try:
                return shlex.split(v)
            except ValueError as exc:
                raise ValueError(f"cannot split the command like a shell: {exc}") from None
        return v


def user_env(params: ContainerParams) -> dict[str, str]:
    """The command's environment, values in clear (for the boot's secret and the member)."""
    return {k: v.get_secret_value() for k, v in params.env.items()}


def roles(params: ContainerParams) -> list[tuple[str, int]]:
    """member 0 is the leader (its exit and metrics decide); members 1… follow."""
    return [("member", i) for i in range(params.nodes)]


WORKLOAD = Workload(
    name="container",
    params=ContainerParams,
    module="workloads.container",
    roles=roles,
    role_codes={"member": "m"},
    images=Images(),  # no default: the spec's `image:` is the benchmark
    # on a cloud VM the spec's image runs the command as it is; images/runner collects
    user_image=UserImage(runner="runner", command=lambda p: list(p.command),
                         env=user_env),
    report="workloads.container.report:section",
    templated=("command", "env"),  # `${name}`: a search's or matrix's parameter
    description=ContainerParams.__doc__ or "",
)
