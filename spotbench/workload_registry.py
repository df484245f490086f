"""The workload lookup: a spec's `workload.name` → its `Workload` descriptor.

The descriptors are data (`spotbench.workload`) listed in `workloads.registry.WORKLOADS`;
this module reads that list and is imported by what needs a workload by name (spec, plan,
images, the report), never by a descriptor, so no import cycle runs through it.
"""

from __future__ import annotations

from spotbench.workload import Workload
from workloads.registry import WORKLOADS


def registry() -> dict[str, Workload]:
    """Every workload, by name (`workloads.registry.WORKLOADS`)."""
    return WORKLOADS


def get_workload(name: str) -> Workload:
    """The descriptor of workload `name`; a ValueError naming the known ones otherwise."""
    found = WORKLOADS.get(name)
    if found is None:
        raise ValueError(f"unknown workload {name!r}; choose one of {', '.join(WORKLOADS)}")
    return found
