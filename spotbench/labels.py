"""The labels every spotbench resource carries (GCE labels and EC2 tags alike), and how a
sweep's VM names begin.

Teardown, status and the functions select a sweep's instances by these labels; they follow
cloud label rules (lowercase, ≤ 63 characters).

A sweep's group ids (and so its VM and address names) are `<sweep>--<point>-t<trial>`:
sweep names cannot contain `--` (spec validation), so `<sweep>--` begins the names of that
sweep's VMs and of no other sweep's. IAM conditions that can only match names by prefix
(GCP's `resource.name.startsWith`) are exact with it: sweep `bench` is not granted the VMs
of sweep `bench-gpu` (`bench-gpu--…` does not start with `bench--`).
"""

from __future__ import annotations

MANAGED_BY = {"managed-by": "spotbench"}
SWEEP_LABEL = "spotbench-sweep"
GROUP_LABEL = "spotbench-group"
ROLE_LABEL = "spotbench-role"


def sweep_labels(sweep: str) -> dict[str, str]:
    """Labels every resource of a sweep carries (what teardown and queries select on)."""
    return {**MANAGED_BY, SWEEP_LABEL: sweep}


NAME_SEPARATOR = "--"  # between the sweep name and the rest of a group id / VM name


def name_prefix(sweep: str) -> str:
    """What the name of every VM of `sweep`, and of no other sweep, starts with."""
    if NAME_SEPARATOR in sweep:
        raise ValueError(f"sweep name {sweep!r} contains {NAME_SEPARATOR!r}")
    return sweep + NAME_SEPARATOR
