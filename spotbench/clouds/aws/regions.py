"""`lifecycle: created` with candidate zones in several regions (issue #26).

EC2 Fleet, launch templates and subnets are regional (docs/platform.md, "Several regions on
AWS"): one `CreateFleet` can only choose among the zones of the region its client calls.
`AwsRegions` holds one `AwsCloud` per candidate region, each with an EC2 client named for
that region (the functions run in the sweep's home region: a client for another region must
name it, AWS_REGION would not), and

- `start(labels, zones)`: the regions in the order of their first zone in `zones` (control's
  order, spotbench/control/zones.py); in each, the fleets of `AwsCloud.place` over that
  region's zones in the same order (Priority by order). A region that refuses (no capacity in
  any of its zones, or an account limit: quotas are per region) keeps nothing: its fleets
  terminate what they made (all or nothing); the next region is asked only then. A group
  never spans two zones, hence never two regions;
- `query` / `stop` / `terminate`: every candidate region (a group retried after a
  preemption may have left its reclaimed members in one region and run in another);
- `find(instance_id)`: whichever region knows the id (the `done` caller's instance).

A spec whose candidates are all in its home region gets a plain `AwsCloud`
(`spotbench.clouds.aws.provider`), as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spotbench.clouds.aws import fleet
from spotbench.clouds.aws.ec2 import AwsCloud, AwsCloudError, _to_instance, unplaced
from spotbench.clouds.base import ConsoleOutput, Instance


class AwsRegions(AwsCloud):
    """The created lifecycle over `regions` (first choice first); `region` is the home."""

    def __init__(self, region: str, regions: Sequence[str], endpoint_url: str | None = None,
                 session: Any = None, **options: Any) -> None:
        options["lifecycle"] = "created"
        super().__init__(region, endpoint_url, session, **options)
        self.regions = list(dict.fromkeys(regions)) or [region]
        self.clouds = {r: AwsCloud(r, endpoint_url, session, **options) for r in self.regions}

    def query(self, labels: Mapping[str, str]) -> list[Instance]:
        live = {r: c._describe(labels) for r, c in self.clouds.items()}
        every = [raw for raws in live.values() for raw in raws]
        out = []
        for r, cloud in self.clouds.items():  # reclaimed: no live instance in ANY region
            out += [*live[r], *cloud._reclaimed_members(labels, every)]
        return [_to_instance(raw) for raw in out]

    def start(self, labels: Mapping[str, str], zones: Sequence[str] = ()) -> list[Instance]:
        templates = {r: c.templates(labels) for r, c in self.clouds.items()}
        if not any(templates.values()):
            raise AwsCloudError(
                f"no launch templates tagged {dict(labels)} in {', '.join(self.regions)}: the "
                "sweep's stack declares them with `lifecycle: created`; run `pulumi up`")
        running = self._running(labels, templates)
        if running is not None:
            return running
        zone_region = {z: r for r, per in templates.items() for m in per.values() for z in m}
        order = [z for z in zones if z in zone_region] if zones else sorted(zone_region)
        errors: list[fleet.FleetError] = []
        for region in dict.fromkeys(zone_region[z] for z in order):
            mine = [z for z in order if zone_region[z] == region]
            placed = self.clouds[region].place(labels, templates[region], mine)
            if placed.ids:
                return self.clouds[region].made(placed)
            errors += placed.errors  # this region refused and kept nothing: the next one
        members = {m: z for per in templates.values() for m, z in per.items()}
        return unplaced(labels, members, order, errors)

    def _running(self, labels: Mapping[str, str],
                 templates: Mapping[str, Mapping[str, Mapping[str, fleet.Template]]]
                 ) -> list[Instance] | None:
        """The group, when it already runs whole in one region; else None, after terminating
        what is left of an earlier launch in any region (a member preempted, …)."""
        live = {r: c._describe(labels) for r, c in self.clouds.items()}
        where = [r for r, raws in live.items() if raws]
        if len(where) == 1 and AwsCloud.complete(live[where[0]], templates[where[0]]):
            return self.clouds[where[0]]._refresh(live[where[0]], {})
        for r in where:
            self.clouds[r].terminate(labels)
        return None

    def stop(self, labels: Mapping[str, str]) -> list[Instance]:
        return self.terminate(labels)  # made at start: a stop leaves nothing

    def terminate(self, labels: Mapping[str, str]) -> list[Instance]:
        return [i for c in self.clouds.values() for i in c.terminate(labels)]

    def console_output(self, instance: Instance, start: int = 0) -> ConsoleOutput:
        """From the region the instance is in (its zone's), else the first that knows it."""
        for cloud in self.clouds.values():
            if instance.zone and instance.zone.startswith(cloud.region):
                return cloud.console_output(instance, start)
        for cloud in self.clouds.values():
            if cloud.find(instance.name) is not None:
                return cloud.console_output(instance, start)
        raise AwsCloudError(f"instance {instance.name} is in none of {', '.join(self.regions)}")

    def find(self, instance_id: str) -> Instance | None:
        for cloud in self.clouds.values():
            found = cloud.find(instance_id)
            if found is not None:
                return found
        return None

