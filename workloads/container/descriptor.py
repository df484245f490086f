"""The `container` workload: one member runs the user's command; metrics come from what
it writes (see `workloads/container/__init__.py`).

The command's `env` values are parameters (a matrix's or a search's `${name}` among them):
shown in the plan, records, report rows and group keys like any field. Only the keys the
spec declares secret (`secret_env: [API_TOKEN]`: tokens, passwords) are masked: their values
are `SecretStr`s, so every serialised form of the params — the member context in GCE
metadata or EC2 user-data, records, `records.csv`, the functions' `SPOTBENCH_SPEC` — holds
`**********`. The env reaches the command only through `user_env(params)`: on a cloud VM
written in the boot document, or, when it holds a declared secret, from Secret Manager / SSM
at boot (infra/user_image.py); locally through the member's own process environment
(`USER_ENV`).
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

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
    env: dict[str, str | SecretStr] = Field(
        default_factory=dict,
        description="extra environment for it: parameters, shown like any field (a matrix's or "
                    "search's `${name}` may fill them); the keys in `secret_env` are masked")
    secret_env: list[str] = Field(
        default_factory=list,
        description="the `env` keys whose values are secret (API_TOKEN, passwords): masked as "
                    "********** in every stored or shown form, delivered at boot from the "
                    "cloud's secret store, never in metadata, records or reports")
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

    @model_validator(mode="before")
    @classmethod
    def _declared_secrets(cls, data: Any) -> Any:
        """The values of the keys `secret_env` names become secrets; a name that is no `env`
        key is an error (a typo would leave the token in clear)."""
        if not isinstance(data, dict) or not data.get("secret_env"):
            return data
        declared, env = data["secret_env"], data.get("env") or {}
        if not isinstance(declared, list) or not isinstance(env, dict):
            return data
        missing = [k for k in declared if k not in env]
        if missing:
            raise ValueError(f"secret_env {missing!r}: no such key in env (keys: "
                             f"{sorted(env) or 'none'}); name the env keys whose values are secret")
        wrapped = {k: SecretStr(v) if k in declared and isinstance(v, str) else v for k, v in env.items()}
        return {**data, "env": wrapped}

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
    """The command's environment, values in clear (for the boot and the member)."""
    return {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in params.env.items()}


def secret_keys(params: ContainerParams) -> frozenset[str]:
    """The env keys the spec declared secret (`secret_env`)."""
    return frozenset(k for k, v in params.env.items() if isinstance(v, SecretStr))


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
                         env=user_env, secret=secret_keys),
    report="workloads.container.report:section",
    templated=("command", "env"),  # `${name}`: a search's or matrix's parameter
    description=ContainerParams.__doc__ or "",
)
