"""Start latency per instance lifecycle under the local Compute Engine double (FakeGce):
seconds from `control.start` to every member RUNNING, and the API calls it took, for
`lifecycle: stopped` (Pulumi-made stopped VMs: instances.start) and `lifecycle: created`
(regionInstances.bulkInsert from the group's templates), with the first candidate zone
out of capacity as a second created case. Prints JSON.

Under the double an operation is DONE when first waited on, so the seconds are spotbench's
own work and round trips on loopback, not GCE's: on GCE a start of a stopped VM and a
create both wait for the VM to boot (a create also makes its boot disk from the image);
the calls column is what carries over. The AWS helper adds the EC2 lifecycles.

    python bench/start_latency.py [--rounds 5]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the refused zone's warning, once per round
    cases = {"stopped": ("stopped", False), "created": ("created", False),
             "created, first zone exhausted": ("created", True)}
    out = {}
    for label, (lifecycle, exhausted) in cases.items():
        runs = [one(lifecycle, exhausted) for _ in range(max(1, args.rounds))]
        secs = [r[0] for r in runs]
        out[label] = {"median_s": round(statistics.median(secs), 4), "max_s": round(max(secs), 4),
                      "api_calls": runs[0][1], "rounds": len(runs), "members": runs[0][2]}
    print(json.dumps({"cloud": "gcp", "double": "tests/clouds/fake_gce.py",
                      "start_latency": out}, indent=2))


if __name__ == "__main__":
    main()
