"""A GCP sweep's dependency graph grows linearly with its groups: each run group waits for
its own members' firewall rule (its VMs need that rule, no other group's), not for every
group's rule (groups² dependencies: at 500 groups, 250,000 edges for Pulumi to resolve
and check for cycles at every declaration — bench/infra_scale.py)."""

from __future__ import annotations

import pulumi

from spotbench.spec import load_spec
from tests.infra.conftest import snapshot

CONFIG = {"gcp:project": "proj-1", "gcp:region": "us-central1"}
FIREWALL = "gcp:compute/firewall:Firewall"


def test_each_group_waits_for_its_own_firewall_only():
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec({"name": "t", "cloud": "gcp", "zone": "us-central1-a",
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["n2-standard-2"]},
                      "trials": 6, "schedule": {"cron": "0 3 * * *"}, "deadline": "20m"})
    waits: dict[str, list[str]] = {}

    def record(args: pulumi.ResourceTransformationArgs):
        if args.type_ == "spotbench:gcp:RunGroup":
            deps = args.opts.depends_on or []
            waits[args.name] = [d._name for d in deps if getattr(d, "_type", "") == FIREWALL]
        return None

    def prog():
        pulumi.runtime.register_stack_transformation(record)
        GcpSweep(spec.name, GcpSweepArgs(spec=spec))

    snap = snapshot(prog, CONFIG)
    rules = {f.name: f.inputs for f in snap.of_type(FIREWALL)}
    groups = [g.id for g in spec.plan()]
    assert sorted(waits) == sorted(groups) and len(groups) == 6
    for gid in groups:
        (rule,) = waits[gid]  # one rule, not the 6 groups' rules
        assert rules[rule]["sourceTags"] == rules[rule]["targetTags"] == [gid]
