"""The member context of every member of a group, and the extra container env a workload
needs on a cloud VM (GCP and AWS alike)."""

from __future__ import annotations

from collections.abc import Mapping

from spotbench.member import MemberContext
from spotbench.plan import RunGroup
from spotbench.workload_registry import get_workload


def workload_env(workload: str) -> dict[str, str]:
    """Extra container env a workload needs on a cloud VM (beyond the member context, which
    carries every peer's service port)."""
    desc = get_workload(workload)
    return dict(desc.env)


def member_contexts(
    group: RunGroup,
    ips: Mapping[str, str],
    *,
    cloud: str,
    results_url: str,
    done_url: str | None,
    zone: str | None,
    deadline_s: int | None = None,
) -> dict[str, MemberContext]:
    """member name → context, with every peer's (static IP, workload service port); each
    says whether its own member runs spot (its role's provisioning, `Member.spot`)."""
    port = group.descriptor.port
    addresses = {m.name: (ips[m.name], port) for m in group.members}
    # further service ports (TF tasks of `processes_per_vm`): the next ones up; the group's
    # rules and the host firewall admit every port between its members (docs/platform.md)
    extra = [port + j for j in range(1, group.descriptor.member_ports(group.params))]
    return {
        m.name: MemberContext.for_member(
            group, m, addresses=addresses, cloud=cloud, results_url=results_url,
            done_url=done_url, zone=zone, spot=m.spot, deadline_s=deadline_s,
            extra_ports=dict.fromkeys(addresses, extra),
        )
        for m in group.members
    }
