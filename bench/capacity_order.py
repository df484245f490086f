"""The candidate-zone ordering's store reads and time per tick: one tick starting GROUPS
groups of one machine type over a store with RUNS nightly runs of history (each run one
start record per group; one run's records also carry a preempted zone), plus a market
snapshot.

- `per_tick`: what control does now (`spotbench.control.zones.ZoneOrder`): the ledger read
  once for the tick, only runs that may hold a request in the 14-day window, and the
  snapshot (one listing, one read); then GROUPS orderings and notes.
- `per_tick_warm`: the next tick on the same store object (a warm function instance): each
  start record is read once per store object, so only the snapshot is read again.
- `per_start` (the baseline, the code before): every start lists the whole ledger, reads
  every record ever stored and keeps the window's. Measured over SAMPLE starts in the same
  run and scaled to GROUPS (its cost is the same for each start): reads exactly, time
  linearly.

Counts what an object store would be asked: listings (`_glob`, one `find` each on gs:// and
s3://) and object reads (`open` for reading). Prints JSON; the store is a temporary local
folder, removed. `--groups N --runs N` change the size.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spotbench.capacity import WINDOW, order_zones, zone_history  # noqa: E402
from spotbench.control.zones import ZoneOrder  # noqa: E402
from spotbench.results import ResultStore, StartRecord, new_run_id  # noqa: E402

ZONES = ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]
MACHINE, GPU = "n1-standard-8", "nvidia-tesla-t4"
SAMPLE = 5


class Counting(ResultStore):
    """A store that counts listings and object reads."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.listings = self.reads = 0
        opened = self.fs.open

        def counting_open(path, mode="rb", *args, **kwargs):
            if "r" in mode:
                self.reads += 1
            return opened(path, mode, *args, **kwargs)

        self.fs.open = counting_open

    def _glob(self, pattern: str) -> list[str]:
        self.listings += 1
        return super()._glob(pattern)

    def take(self) -> tuple[int, int]:
        out = (self.listings, self.reads)
        self.listings = self.reads = 0
        return out


def write_history(root: Path, groups: int, runs: int, now: datetime) -> int:
    n = 0
    for r in range(runs, 0, -1):
        opened = now - timedelta(days=r)
        run = new_run_id(opened)
        folder = root / "runs" / run / "starts"
        folder.mkdir(parents=True)
        for g in range(groups):
            zone = ZONES[(g + r) % len(ZONES)]
            rec = StartRecord(run=run, group=f"g{g:04d}-t1", at=opened + timedelta(minutes=1),
                              machine_type=MACHINE, accelerator=GPU, zone=zone, members=2,
                              errors={"m0": "capacity"} if (g + r) % 7 == 0 else {},
                              preempted_zone=ZONES[0] if r == 3 and g % 10 == 0 else None)
            (folder / f"{rec.group}.1.json").write_text(rec.model_dump_json())
            n += 1
    store = ResultStore(f"file://{root}")
    store.write_market_snapshot([{"zone": z, "machine_type": MACHINE, "accelerator": GPU,
                                  "preemptions_per_vm_hour": 0.1 * i, "vm_hours": 5.0}
                                 for i, z in enumerate(ZONES)], now=now - timedelta(days=1))
    return n


def per_start(store: Counting, groups: list, now: datetime) -> None:
    """The code before: the whole ledger listed and read at every start."""
    for group in groups:
        store.__dict__.pop("_start_records", None)  # the code before kept nothing
        starts = [s for s in store.start_records() if s.at >= now - WINDOW]
        order_zones(ZONES, zone_history(starts, machine_type=group.machine_type,
                                        accelerator=group.accelerator, now=now))


def per_tick(store: Counting, groups: list, now: datetime) -> None:
    sweep = SimpleNamespace(spec=SimpleNamespace(candidate_zones=ZONES), store=store)
    zones = ZoneOrder(sweep, now)  # type: ignore[arg-type]
    for group in groups:
        zones.order(group, [])
        zones.note(StartRecord(run="now", group=group.id, at=now, machine_type=MACHINE,
                               accelerator=GPU, zone=ZONES[1], members=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=300)
    ap.add_argument("--runs", type=int, default=60)
    args = ap.parse_args()
    now = datetime.now(UTC).replace(microsecond=0)
    groups = [SimpleNamespace(id=f"g{g:04d}-t1", machine_type=MACHINE, accelerator=GPU)
              for g in range(args.groups)]
    with tempfile.TemporaryDirectory(prefix="spotbench-bench-capacity-") as tmp:
        root = Path(tmp)
        records = write_history(root, args.groups, args.runs, now)
        store = Counting(f"file://{root}")
        t = time.perf_counter()
        per_tick(store, groups, now)
        tick_s = time.perf_counter() - t
        tick_listings, tick_reads = store.take()
        t = time.perf_counter()
        per_tick(store, groups, now)  # the next tick of a warm function: the same store object
        warm_s = time.perf_counter() - t
        warm_listings, warm_reads = store.take()
        sample = groups[:SAMPLE]
        t = time.perf_counter()
        per_start(store, sample, now)
        start_s = (time.perf_counter() - t) * args.groups / len(sample)
        listings, reads = store.take()
        scale = args.groups / len(sample)
    print(json.dumps({
        "groups": args.groups, "runs": args.runs, "start_records": records,
        "window_days": WINDOW.days,
        "per_tick": {"listings": tick_listings, "reads": tick_reads, "s": round(tick_s, 3)},
        "per_tick_warm": {"listings": warm_listings, "reads": warm_reads, "s": round(warm_s, 3)},
        "per_start": {"listings": round(listings * scale), "reads": round(reads * scale),
                      "s": round(start_s, 2), "measured_starts": len(sample)},
        "reads_ratio": round(reads * scale / max(tick_reads, 1), 1),
        "time_ratio": round(start_s / tick_s, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
