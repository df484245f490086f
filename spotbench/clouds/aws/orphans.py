"""AWS orphan sweep: instances, spot requests and EC2 Fleets tagged `managed-by=spotbench`,
every region.

`lifecycle: created` makes a group's instances at start with instant EC2 Fleets tagged with
the group's labels (spotbench/clouds/aws/fleet.py): a created instance whose group was lost
(a function that died between two fleets, a stack destroyed mid-run) carries the sweep's
tags like any member and is found and terminated here; its fleet record is found too and
deleted with `TerminateInstances` (EC2: an instant fleet must terminate its instances when
deleted).

Candidate zones may span regions (`spotbench/clouds/aws/regions.py`): a group lost in any
candidate region is found, since the sweep looks in every region it is given, by default
every region the account has enabled (tests/clouds/test_aws_regions_capacity.py finds one in
the second candidate region).

This lists with boto3 directly (not through `spotbench.clouds.aws.ec2`) because the driver
only operates a spec's own candidate regions, and teardown must also find spot requests and
look in every region the account has enabled, whether or not a stack still knows them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from spotbench.clouds.base import Resource
from spotbench.labels import MANAGED_BY, SWEEP_LABEL

LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
LIVE_REQUEST_STATES = ["open", "active", "disabled"]
LIVE_FLEET_STATES = ("submitted", "active", "modifying")


def teardown_policy() -> dict[str, Any]:
    """The IAM policy `spotbench teardown` needs (listed in docs/aws.md, proved in tests/iam).

    Listing has no resource-level permissions on EC2. Spot requests are cancelled whatever
    their tags: a request made with an instance's launch (`pulumi up`) carries no tags; the
    sweep cancels only the requests of instances tagged as the sweep's (cancelling a
    persistent request terminates its instance if it is stopped, EC2's interruption docs).
    Instances are terminated only when tagged `managed-by=spotbench`.
    """
    (key, value), = MANAGED_BY.items()
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "FindSweepResources", "Effect": "Allow",
         "Action": ["ec2:DescribeRegions", "ec2:DescribeInstances",
                    "ec2:DescribeSpotInstanceRequests", "ec2:DescribeFleets"], "Resource": "*"},
        {"Sid": "DeleteSpotbenchFleets", "Effect": "Allow",
         "Action": "ec2:DeleteFleets", "Resource": "arn:aws:ec2:*:*:fleet/*",
         "Condition": {"StringEquals": {f"aws:ResourceTag/{key}": value}}},
        {"Sid": "CancelSpotRequests", "Effect": "Allow",
         "Action": "ec2:CancelSpotInstanceRequests", "Resource": "*"},
        {"Sid": "TerminateSpotbenchInstances", "Effect": "Allow",
         "Action": "ec2:TerminateInstances", "Resource": "arn:aws:ec2:*:*:instance/*",
         "Condition": {"StringEquals": {f"aws:ResourceTag/{key}": value}}},
    ]}


class AwsSweeper:
    cloud = "aws"

    def __init__(
        self,
        regions: list[str] | None = None,
        endpoint_url: str | None = None,
        session: Any = None,
    ):
        import boto3

        self.session = session or boto3.session.Session()
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        self._regions = regions

    def _ec2(self, region: str) -> Any:
        return self.session.client("ec2", region_name=region, endpoint_url=self.endpoint_url)

    def regions(self) -> list[str]:
        """The regions to search: the given ones, else every region enabled for the account."""
        if not self._regions:
            home = self.session.region_name or "us-east-1"
            found = self._ec2(home).describe_regions()["Regions"]
            self._regions = sorted(r["RegionName"] for r in found)
        return self._regions

    @staticmethod
    def _filters(sweep: str | None) -> list[dict[str, Any]]:
        (key, value), = MANAGED_BY.items()
        filters = [{"Name": f"tag:{key}", "Values": [value]}]
        if sweep:
            filters.append({"Name": f"tag:{SWEEP_LABEL}", "Values": [sweep]})
        return filters

    def release(self, sweep: str | None) -> list[str]:
        """Before `pulumi destroy`: cancel the persistent spot request of every live instance
        of `sweep`. The provider's delete of an `aws.ec2.Instance` terminates it without
        cancelling its request (hashicorp/terraform-provider-aws#38142), and EC2 then opens
        the request again and launches a replacement into the subnet the stack is deleting.
        EC2 terminates the stopped ones itself once their request is cancelled."""
        notes = []
        for region in self.regions():
            found = [r for r in self._find_in(region, sweep) if r.kind == "spot-request"]
            for request in found:
                self.delete(request)
            if found:
                notes.append(f"cancelled {len(found)} spot request(s) in {region} before "
                             "destroying the stack (a persistent request relaunches its instance)")
        return notes

    def find(self, sweep: str | None) -> list[Resource]:
        out: list[Resource] = []
        for region in self.regions():
            out.extend(self._find_in(region, sweep))
        return out

    def _find_in(self, region: str, sweep: str | None) -> Iterator[Resource]:
        ec2 = self._ec2(region)
        requests: dict[str, Resource] = {}
        state_filter = {"Name": "state", "Values": LIVE_REQUEST_STATES}
        for req in ec2.describe_spot_instance_requests(
            Filters=[*self._filters(sweep), state_filter]
        )["SpotInstanceRequests"]:
            rid = req["SpotInstanceRequestId"]
            requests[rid] = Resource("aws", "spot-request", rid, region, _sweep_tag(req), req["State"])
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[
                *self._filters(sweep),
                {"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES},
            ]
        )
        instances: list[Resource] = []
        for page in pages:
            for reservation in page["Reservations"]:
                for inst in reservation["Instances"]:
                    owner = _sweep_tag(inst)
                    instances.append(
                        Resource("aws", "instance", inst["InstanceId"], region, owner, inst["State"]["Name"])
                    )
                    # a persistent request relaunches its instance: cancel it too, tagged or not
                    rid = inst.get("SpotInstanceRequestId")
                    if rid and rid not in requests:
                        requests[rid] = Resource("aws", "spot-request", rid, region, owner, "untagged")
        yield from requests.values()
        yield from instances
        yield from self._fleets(ec2, region, sweep)

    def _fleets(self, ec2: Any, region: str, sweep: str | None) -> Iterator[Resource]:
        """The sweep's EC2 Fleets still on record (instant fleets of the created lifecycle)."""
        (key, value), = MANAGED_BY.items()
        for page in ec2.get_paginator("describe_fleets").paginate():
            for f in page.get("Fleets", []):
                tags = {t["Key"]: t["Value"] for t in f.get("Tags", [])}
                if tags.get(key) != value or (sweep and tags.get(SWEEP_LABEL) != sweep):
                    continue
                if f.get("FleetState") in LIVE_FLEET_STATES:
                    yield Resource("aws", "fleet", f["FleetId"], region, tags.get(SWEEP_LABEL),
                                   f["FleetState"])

    def delete(self, resource: Resource) -> None:
        ec2 = self._ec2(resource.where)
        if resource.kind == "spot-request":
            answer = ec2.cancel_spot_instance_requests(SpotInstanceRequestIds=[resource.id])
            done = {r["SpotInstanceRequestId"] for r in answer.get("CancelledSpotInstanceRequests", [])}
            if resource.id not in done:
                raise RuntimeError(f"EC2 did not confirm cancelling {resource.id}: {answer}")
        elif resource.kind == "instance":
            answer = ec2.terminate_instances(InstanceIds=[resource.id])
            states = {i["InstanceId"]: i["CurrentState"]["Name"] for i in answer["TerminatingInstances"]}
            if states.get(resource.id) not in ("shutting-down", "terminated"):
                raise RuntimeError(f"instance {resource.id} is {states.get(resource.id)!r} after terminate")
        elif resource.kind == "fleet":  # an instant fleet: deleting it terminates its instances
            answer = ec2.delete_fleets(FleetIds=[resource.id], TerminateInstances=True)
            done = {f["FleetId"] for f in answer.get("SuccessfulFleetDeletions", [])}
            if resource.id not in done:
                raise RuntimeError(f"EC2 did not confirm deleting fleet {resource.id}: {answer}")
        else:
            raise ValueError(f"aws sweeper cannot delete a {resource.kind}")


def _sweep_tag(obj: dict[str, Any]) -> str | None:
    return next((t["Value"] for t in obj.get("Tags", []) if t["Key"] == SWEEP_LABEL), None)
