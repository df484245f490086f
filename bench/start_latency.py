"""Start latency per instance lifecycle on both clouds, measured in the same run: for each
cloud, `stopped` (members made stopped by Pulumi, started), `created` (made at start from
the stack's templates) and `created` with the first candidate zone out of capacity, and the
ratio created / stopped per cloud. Prints one JSON.

- GCP (this file): seconds from `control.start` to every member RUNNING and the API calls it
  took, under the local Compute Engine double (tests/clouds/fake_gce.py): instances.start
  vs regionInstances.bulkInsert from the group's templates.
- AWS (bench/start_latency_aws.py `measure`): seconds from `AwsCloud.start` to every member
  running and the EC2 calls it made, through moto_server and the capacity-refusing front
  (tests/ec2_spot_front.py): StartInstances vs instant EC2 Fleets from the launch templates.

Under the doubles nothing boots: the seconds are spotbench's own work and round trips on
loopback (GCE's operations are DONE when first waited on; moto answers in milliseconds), so
compare the ratio within a cloud, not the seconds across clouds (the two halves also time a
different span: control.start vs the driver's start). On the clouds a start of a stopped VM
and a create both wait for the boot, and a create also makes its boot disk from the image.

    python bench/start_latency.py [--rounds 5] [--cloud gcp|aws|both]
"""

from __future__ import annotations

import argparse
import logging
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spotbench import control  # noqa: E402
from spotbench.auth import Caller  # noqa: E402
from spotbench.clouds.base import State  # noqa: E402
from spotbench.clouds.gcp import template_name  # noqa: E402
from spotbench.clouds.gcp.gce import GcpCloud  # noqa: E402
from spotbench.clouds.gcp.provider import roster_of  # noqa: E402
from spotbench.results import ResultStore  # noqa: E402
from spotbench.spec import load_spec  # noqa: E402
from tests.clouds.fake_gce import FakeGce  # noqa: E402

TICK = Caller("scheduler", "scheduler")
ZONES = ["us-central1-a", "us-central1-b"]


def _spec(lifecycle: str):
    where = {"zones": ZONES} if lifecycle == "created" else {"zone": ZONES[0]}
    return load_spec({"name": "lat", "cloud": "gcp", "lifecycle": lifecycle, **where,
                      "gcp": {"project": "proj"}, "workload": {"name": "tf-mnist", "workers": 2},
                      "matrix": {"machine_type": ["n1-standard-4"],
                                 "accelerator": ["nvidia-tesla-t4"]},
                      "trials": 1, "concurrency": 1, "schedule": {"cron": "0 3 * * *"},
                      "deadline": "30m"})


def one(lifecycle: str, exhausted_first: bool) -> tuple[float, int, int]:
    spec = _spec(lifecycle)
    gce = FakeGce(project="proj").start()
    try:
        for g in spec.plan():
            for m in g.members:
                labels = {**spec.labels, **g.member_labels(m)}
                if lifecycle == "created":
                    gce.add_template("us-central1", template_name(g.id, m.role), labels)
                else:
                    gce.add(m.name, ZONES[0], "TERMINATED", labels)
        if exhausted_first:
            gce.exhaust(ZONES[0])
        options = {"lifecycle": "created", "roster": roster_of(spec)} if lifecycle == "created" else {}
        cloud = GcpCloud("proj", zones=spec.candidate_zones, api_endpoint=gce.url, timeout_s=30,
                         poll_s=0.01, **options)
        with tempfile.TemporaryDirectory() as root:
            sweep = control.Sweep(spec=spec, cloud=cloud, store=ResultStore(f"file://{root}"))
            group = sweep.groups[0]
            before = len(gce.calls)
            t0 = time.perf_counter()
            out = control.start(sweep, TICK)
            while {i.state for i in cloud.query(group.labels)} != {State.RUNNING}:
                time.sleep(0.01)
            took = time.perf_counter() - t0
            assert out["started"] == [group.id], out
            return took, len(gce.calls) - before, len(group.members)
    finally:
        gce.stop()


CASES = {"stopped": ("stopped", False), "created": ("created", False),
         "created, first zone exhausted": ("created", True)}
AWS_CASES = {"stopped": "stopped", "created": "created",
             "created, first zone exhausted": "created-failover"}


def measure_gcp(rounds: int) -> dict:
    """{case: {median_s, min_s, max_s, api_calls}} for the GCP lifecycles, and the group size."""
    out: dict = {}
    members = 0
    for label, (lifecycle, exhausted) in CASES.items():
        runs = [one(lifecycle, exhausted) for _ in range(max(1, rounds))]
        secs = [r[0] for r in runs]
        members = runs[0][2]
        out[label] = {"median_s": round(statistics.median(secs), 4), "min_s": round(min(secs), 4),
                      "max_s": round(max(secs), 4), "api_calls": runs[0][1]}
    return {"cases": out, "members": members, "double": "tests/clouds/fake_gce.py",
            "timed": "control.start to every member RUNNING"}


def measure_aws(rounds: int) -> dict:
    """The same shape from bench/start_latency_aws.py `measure` (moto_server + SpotFront)."""
    from bench.start_latency_aws import measure

    raw = measure(max(1, rounds))
    cases = {label: {"median_s": raw[key]["median"], "min_s": raw[key]["min"],
                     "max_s": raw[key]["max"], "api_calls": raw[key]["api_calls"]}
             for label, key in AWS_CASES.items()}
    return {"cases": cases, "members": raw["members"],
            "double": "moto_server + tests/ec2_spot_front.py",
            "timed": "AwsCloud.start to every member running"}


def report(results: dict[str, dict], rounds: int) -> dict:
    """One JSON: per lifecycle both clouds, and created / stopped per cloud (medians)."""
    lifecycles = {label: {cloud: r["cases"][label] for cloud, r in results.items()}
                  for label in CASES}
    ratios = {cloud: {label: round(r["cases"][label]["median_s"] / r["cases"]["stopped"]["median_s"], 2)
                      for label in CASES if label != "stopped"}
              for cloud, r in results.items()}
    clouds = {cloud: {k: v for k, v in r.items() if k != "cases"} for cloud, r in results.items()}
    return {"rounds": rounds, "unit": "seconds (median, min, max over the rounds)",
            "start_latency": lifecycles, "created_over_stopped": ratios, "clouds": clouds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cloud", choices=("gcp", "aws", "both"), default="both")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the refused zone's warning, once per round
    rounds = max(1, args.rounds)
    measures = {f.__name__.removeprefix("measure_"): f for f in (measure_gcp, measure_aws)}
    chosen = list(measures) if args.cloud == "both" else [args.cloud]
    results = {cloud: measures[cloud](rounds) for cloud in chosen}
    print(json.dumps(report(results, rounds), indent=2))


if __name__ == "__main__":
    main()
