"""Start latency of an AWS run group per instance lifecycle, through moto_server and the
capacity-refusing front (tests/ec2_spot_front.py): the time from `AwsCloud.start` to every
member running, as the start function sees it.

- `stopped`: the members exist stopped (persistent spot, created by the stack); a start is
  StartInstances (+ the running waiter);
- `created`: the members are made at start from the stack's launch templates by instant EC2
  Fleets (spotbench/clouds/aws/fleet.py), with the first candidate zone out of capacity
  (`created-failover`) or not (`created`).

moto answers in milliseconds and boots nothing: the figures compare the API round trips of
each path, not EC2's boot time (a real created start also pays the AMI's first boot and the
image pull that a stopped member paid at `pulumi up`; docs/aws.md).

    python bench/start_latency_aws.py [runs]        # JSON on stdout
`measure(runs)` returns the same dict for bench/start_latency.py.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402

from spotbench.clouds.aws.ec2 import AwsCloud  # noqa: E402
from spotbench.spec import load_spec  # noqa: E402
from tests.clouds.aws_templates import declare_templates  # noqa: E402
from tests.ec2_spot_front import SpotFront  # noqa: E402
from tests.moto_server import MotoServer  # noqa: E402

REGION = "us-east-1"
ZONES = [f"{REGION}a", f"{REGION}b"]


def _spec(lifecycle: str):
    zone = {"zones": ZONES} if lifecycle == "created" else {"zone": ZONES[0]}
    return load_spec({"name": "lat", "cloud": "aws", "region": REGION, "lifecycle": lifecycle,
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["g4dn.xlarge"]},
                      "trials": 1, "schedule": {"cron": "0 3 * * *"}, **zone})


def _stopped_members(ec2, spec) -> None:
    image = MotoServer.any_image(ec2)
    for group in spec.plan():
        for m in group.members:
            tags = {**group.member_labels(m), "Name": m.name}
            out = ec2.run_instances(
                ImageId=image, InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1,
                Placement={"AvailabilityZone": ZONES[0]},
                InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {
                    "SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"}},
                TagSpecifications=[{"ResourceType": "instance", "Tags": [
                    {"Key": k, "Value": v} for k, v in tags.items()]}])
            ec2.stop_instances(InstanceIds=[out["Instances"][0]["InstanceId"]])


def _one(moto: str, case: str) -> tuple[float, int]:
    """One start of a fresh group: seconds from AwsCloud.start to every member running, and
    the EC2 API calls the driver made (waiter polls included)."""
    MotoServer.reset_url(moto)
    lifecycle = "stopped" if case == "stopped" else "created"
    spec = _spec(lifecycle)
    group = spec.plan()[0]
    front = SpotFront(moto, region=REGION)
    with front as url:
        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=url)
        if lifecycle == "stopped":
            _stopped_members(ec2, spec)
        else:
            declare_templates(ec2, spec, ZONES)
        if case == "created-failover":
            front.exhaust(ZONES[0])
        cloud = AwsCloud(REGION, endpoint_url=url, wait_timeout_s=30, poll_s=1,
                         lifecycle=lifecycle)
        calls: list[str] = []
        cloud.ec2.meta.events.register("before-call.ec2.*",
                                       lambda model, **_: calls.append(model.name))
        started = time.perf_counter()
        out = cloud.start(group.labels, zones=ZONES)
        took = time.perf_counter() - started
        made = len(calls)
        if any(i.state.value != "RUNNING" for i in out):
            raise RuntimeError(f"{case}: not every member runs: {[i.detail for i in out]}")
        cloud.stop(group.labels)
    return took, made


def measure(runs: int = 3) -> dict:
    """{case: {median, min, max, api_calls}} for stopped, created and created-failover."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        os.environ.setdefault(key, value)
    out: dict = {"cloud": "aws", "runs": runs, "members": len(_spec("created").plan()[0].members),
                 "unit": "seconds, AwsCloud.start to every member running (moto_server)"}
    with MotoServer() as moto:
        for case in ("stopped", "created", "created-failover"):
            done = [_one(moto, case) for _ in range(runs)]
            times = [t for t, _ in done]
            out[case] = {"median": round(statistics.median(times), 3),
                         "min": round(min(times), 3), "max": round(max(times), 3),
                         "api_calls": done[0][1]}
    return out


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=2))
