"""Read the sweep spec from Pulumi stack config (`spotbench:spec`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from spotbench import PROJECT_ROOT
from spotbench.policy import PolicyError, effective
from spotbench.spec import SpecError, SweepSpec, load_spec


def spec_from_config(config: pulumi.Config) -> SweepSpec:
    try:
        raw: Any = config.get_object("spec")
    except pulumi.ConfigTypeError:  # a plain path is not JSON: read it as a string
        raw = None
    if raw is None:
        raw = config.get("spec")
    if raw is None:
        raise pulumi.RunError(
            "stack config 'spotbench:spec' is not set: "
            "`pulumi config set spotbench:spec examples/gcp-osu.yaml` (a path) or an object"
        )
    path: Path | None = None
    try:
        if isinstance(raw, dict):
            spec = load_spec(raw, origin="stack config spotbench:spec")
        else:
            path = Path(str(raw))
            path = path if path.is_absolute() else PROJECT_ROOT / path
            spec = load_spec(path, origin=str(raw))
    except SpecError as exc:
        raise pulumi.RunError(f"invalid spec\n{exc}") from None
    return with_policy(spec, path)


def with_policy(spec: SweepSpec, path: Path | None) -> SweepSpec:
    """The spec carrying its effective guardrails; a violation fails preview/up, one line each."""
    try:
        carried, problems = effective(spec, path)
    except PolicyError as exc:
        raise pulumi.RunError(f"invalid policy: {exc}") from None
    if problems:
        raise pulumi.RunError(f"spec {spec.name} breaks the policy\n"
                              + "\n".join(f"  - {p}" for p in problems))
    return carried
