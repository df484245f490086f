"""The labels every spotbench resource carries (GCE labels and EC2 tags alike).

Teardown, status and the functions select a sweep's instances by these; they follow cloud
label rules (lowercase, ≤ 63 characters).
"""

from __future__ import annotations

MANAGED_BY = {"managed-by": "spotbench"}
SWEEP_LABEL = "spotbench-sweep"
GROUP_LABEL = "spotbench-group"
ROLE_LABEL = "spotbench-role"


def sweep_labels(sweep: str) -> dict[str, str]:
    """Labels every resource of a sweep carries (what teardown and queries select on)."""
    return {**MANAGED_BY, SWEEP_LABEL: sweep}
