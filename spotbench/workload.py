"""What a workload means to spotbench: one `Workload` descriptor per workload.

A descriptor is plain data: the spec's config model for the workload, its member roles (in
rank order, from the config), the port its members listen on, the extra ports and container
env a cloud VM needs, its default images (CPU/GPU, folders under `images/`), the metrics it
writes and the report section that shows them; for a bring-your-own-image workload, how the
user's image runs beside spotbench's (`UserImage`). spec, plan, infra, the local runner and the
report ask the descriptor instead of knowing workloads by name.

This module is the descriptor *type* only: descriptors import it and nothing else of
spotbench's, so it never imports them. They are listed in an explicit dict,
`workloads.registry.WORKLOADS` (no decorators, no discovery), and looked up with
`spotbench.workload_registry.get_workload(name)`. Adding a workload = its package under
`workloads/` (entrypoint + descriptor) and one line in that dict; see
docs/adding-a-workload.md.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd


class Params(BaseModel):
    """Base of every workload's config model: unknown keys are errors, values are frozen.
    A subclass declares `name: Literal["<workload>"] = "<workload>"` (the spec's tag)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    if TYPE_CHECKING:  # each subclass's own field (a Literal tag), declared for the checker only
        name: str


@dataclass(frozen=True)
class Images:
    """Default images (folders under `images/`, names in the stack's registry); None: the
    spec must give `image:`."""

    cpu: str | None = None
    gpu: str | None = None


# Where the container of a workload whose descriptor says `mpi` finds its ssh files (login
# key, authorized keys, host key, known_hosts): the boot path mounts them there read-only.
SSH_DIR_IN_CONTAINER = "/etc/spotbench/ssh"

# The local cloud hands a user-image workload's `env(params)` to its member in this process
# variable (JSON); the member context carries the params with declared secrets masked.
USER_ENV = "SPOTBENCH_USER_ENV"


@dataclass(frozen=True)
class UserImage:
    """A workload whose spec `image:` is the user's own and may know nothing of spotbench.

    On a cloud VM the boot runs spotbench's `runner` image (a folder under `images/`, whose
    entrypoint is the workload's module) with `check DIR` (inside an open run? else exit
    `EXIT_OUTSIDE_RUN`), then the user's image with `command(params)` and `env(params)`, its
    results folder DIR/results mounted and `SPOTBENCH_RESULTS_DIR` naming it, its stdout
    captured to DIR/stdout.txt, then the runner again with `collect DIR --exit-code N
    [--stopped]` (store what it reported, call `done`). See infra/user_image.py.
    """

    runner: str
    command: Callable[[Any], list[str]]  # params → the command the user's image runs
    env: Callable[[Any], dict[str, str]]  # params → its environment (no spotbench context)
    # params → the env keys the spec declared secret (fetched at boot, never in a document)
    secret: Callable[[Any], frozenset[str]] = field(default=lambda params: frozenset())


@dataclass(frozen=True)
class Tracked:
    """A metric `spotbench history` follows over runs, and which direction is better."""

    metric: str  # a metric name the workload writes
    label: str  # how tables and plots name it
    better: Literal["lower", "higher"]
    sizes: tuple[int, ...] = ()  # message sizes (metadata size_bytes) to follow; () = any/none


TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")


def template_names(value: Any) -> set[str]:
    """The `${name}`s in `value` (text, lists and dicts of it; a secret's text too)."""
    if hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    if isinstance(value, str):
        return set(TEMPLATE.findall(value))
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return set().union(*(template_names(v) for v in items)) if items else set()


def fill_templates(value: Any, values: dict[str, Any]) -> Any:
    """`value` with each `${name}` of `values` replaced by its value's text (other `${...}`,
    e.g. a shell's own variables, are left as they are). A secret stays a secret."""
    if hasattr(value, "get_secret_value"):
        return type(value)(fill_templates(value.get_secret_value(), values))
    if isinstance(value, str):
        return TEMPLATE.sub(lambda m: _text(values[m[1]]) if m[1] in values else m[0], value)
    if isinstance(value, dict):
        return {k: fill_templates(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [fill_templates(v, values) for v in value]
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class Workload:
    name: str  # the spec's `workload.name`
    params: type[Params]  # the spec's config model (pydantic)
    module: str  # what a member runs: `python -m <module>` (the images' entrypoint too)
    roles: Callable[[Any], list[tuple[str, int]]]  # params → (role, index) in rank order
    role_codes: dict[str, str] = field(default_factory=dict)  # role → short code in member names
    port: int = 0  # the port members listen on, on clouds (the local cloud picks free ones)
    env: dict[str, str] = field(default_factory=dict)  # extra container env on a cloud VM
    mpi: bool = False  # members run MPI over ssh: the stack makes keys and known_hosts
    images: Images = Images()
    user_image: UserImage | None = None  # the spec's image runs the command; `runner` collects
    metrics: tuple[str, ...] = ()  # metric names it writes (empty: the user's own)
    report: str | None = None  # "module:function(df, doc, out_dir) -> (pngs, frames)"
    history: tuple[Tracked, ...] = ()  # metrics followed across runs (spotbench history)
    description: str = ""
    # Python modules a member imports when it runs on this machine (the local cloud): checked
    # before `spotbench run` and by `preflight`, named with the extra that installs them
    # (spotbench/cli/extras.py), so a missing one is never a crash retried as a preemption
    local_modules: tuple[str, ...] = ()
    # params → whether members keep checkpoints under `checkpoints/` in the results store
    # (they read them back, replace and delete them: the clouds' member identities need it)
    checkpoints: Callable[[Any], bool] = field(default=lambda params: False)
    # config fields where `${name}` names a parameter (a search's or a matrix key that is no
    # field): each trial's value is written in (`fill_templates`); container: command, env
    templated: tuple[str, ...] = ()
    # params → service ports each member listens on (tf-mnist: one per TF task of a VM,
    # `processes_per_vm`): the local cloud picks that many free ones per member, a cloud VM
    # uses `port`, `port` + 1, … (its members reach each other on every port); the ports
    # beyond the first are the member's `Peer.extra_ports`
    member_ports: Callable[[Any], int] = field(default=lambda params: 1)

    def parameter_names(self, base: Params) -> set[str]:
        """What a matrix key or a search parameter may name besides the machine keys: the
        config's fields, and the `${name}`s in its templated fields (a container's command)."""
        fields = set(type(base).model_fields) - {"name"}
        return fields | set().union(*(template_names(getattr(base, f)) for f in self.templated))

    def config_for(self, base: Params, values: dict[str, Any], skip: tuple[str, ...] = ()) -> Params:
        """`base` with `values` (but `skip`, e.g. the machine keys): its fields set, the other
        parameters written into the templated fields (`${name}`), validated by the model."""
        values = {k: v for k, v in values.items() if k not in skip}
        fields = set(type(base).model_fields)
        merged = {**base.model_dump(), **{k: v for k, v in values.items() if k in fields}}
        free = {k: v for k, v in values.items() if k not in fields}
        for name in self.templated if free else ():
            merged[name] = fill_templates(merged[name], free)
        return type(base).model_validate(merged)

    def image(self, gpu: bool) -> str:
        """The default image of a group with/without GPU; ValueError when there is none."""
        name = self.images.gpu if gpu else self.images.cpu
        if name is None:
            raise ValueError(f"workload {self.name!r} has no default image; set `image:` in the spec")
        return name

    def member_code(self, role: str) -> str:
        return self.role_codes.get(role, role)

    def report_section(self) -> Callable[[pd.DataFrame, Any, Path], tuple[list, list]] | None:
        if self.report is None:
            return None
        module, _, fn = self.report.partition(":")
        return getattr(importlib.import_module(module), fn)

