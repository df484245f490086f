"""What a sweep will cost before it runs: per group, per schedule tick, per month.

Every figure is a `Line` (quantity × unit price = USD) so a published calculation can be
checked item by item; each section's lines add up to its total. Assumptions (boot time,
expected run time, function memory/duration) are returned with the numbers.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter

from spotbench.clouds import get_provider
from spotbench.costs import (
    HOURS_PER_MONTH, Catalog, billed_seconds, instance_hourly, region_of, run_seconds,
)
from spotbench.plan import RunGroup
from spotbench.results import Result, ResultStore
from spotbench.spec import MATRIX_MACHINE_KEYS, SweepSpec

FUNCTION_MEMORY_GB = 0.25
FUNCTION_SECONDS = 0.5


@dataclass
class Line:
    item: str  # compute | GPU | disk | scheduler jobs | functions (invocations) | …
    quantity: float
    unit: str
    unit_usd: float
    usd: float
    note: str = ""


@dataclass
class GroupCost:
    group: str
    machine_type: str
    members: int
    run_s: float  # expected run time of the workload
    run_source: str  # "deadline" | "earlier results (n runs)"
    billed_s: int  # per member, boot included, one-minute minimum
    compute_usd: float
    gpu_usd: float
    deadline_usd: float  # compute+GPU if it ran until the deadline stop
    retry_overhead: float = 1.0  # real cost per completed result ÷ happy path (sweep history)
    expected_attempts: float = 1.0  # 1 + retries per completed group (sweep history)


@dataclass
class Estimate:
    sweep: str
    cloud: str
    region: str | None
    groups: list[GroupCost]
    per_tick: list[Line]
    per_month: list[Line] | None
    ticks_per_month: int | None
    self_stop_saving_tick: float
    self_stop_saving_month: float | None
    assumptions: list[str] = field(default_factory=list)

    @staticmethod
    def total(lines: list[Line] | None) -> float:
        return sum(line.usd for line in lines or [])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tick_total_usd"] = self.total(self.per_tick)
        out["month_total_usd"] = self.total(self.per_month) if self.per_month is not None else None
        return out


def spec_region(spec: SweepSpec) -> str | None:
    return region_of(spec.cloud, spec.zone, spec.region)


def group_hourly(spec: SweepSpec, group: RunGroup, catalog: Catalog) -> tuple[float, float]:
    """(machine, GPU) USD per hour of one member of `group` (raises MissingPrice)."""
    return instance_hourly(catalog, spec.cloud, spec_region(spec), group.machine_type, spec.spot,
                           group.accelerator, group.accelerator_count)


def group_cost_usd(spec: SweepSpec, group: RunGroup, catalog: Catalog, run_s: float) -> float:
    """Compute + GPU of one group run of `run_s` seconds (boot added, minimum minute)."""
    machine, gpu = group_hourly(spec, group, catalog)
    billed = billed_seconds(run_s + get_provider(spec.cloud).boot_s)
    return (machine + gpu) * billed / 3600 * len(group.members)


def _earlier_run_s(group: RunGroup, records: list[Result]) -> list[float]:
    point = {k: v for k, v in group.point.items() if k not in MATRIX_MACHINE_KEYS}
    seen: dict[tuple[str, str, str], float] = {}
    for r in records:
        if r.preempted or r.machine_type != group.machine_type:
            continue
        if any(r.params.get(k) != v for k, v in point.items()):
            continue
        seen[(r.run, r.group, r.started_at.isoformat())] = run_seconds(r.started_at, r.ended_at)
    return list(seen.values())


def ticks_per_month(spec: SweepSpec, now: datetime) -> int | None:
    if spec.schedule is None:
        return None
    it = croniter(spec.schedule.cron, now)
    end = now + timedelta(hours=HOURS_PER_MONTH)
    n = 0
    while it.get_next(datetime) < end:
        n += 1
    return n


def _history_zone(spec: SweepSpec) -> str | None:
    return spec.zone or get_provider(spec.cloud).default_zone


def _market_row(stats: list[dict[str, Any]], zone: str | None, machine_type: str,
                accelerator: str | None) -> dict[str, Any] | None:
    """The statistics row of one zone × machine type × accelerator (zone None, as on AWS
    where the spec names a region: the row with the most completed results)."""
    rows = [s for s in stats if s["machine_type"] == machine_type and s["accelerator"] == accelerator
            and (zone is None or s["zone"] == zone)]
    return max(rows, key=lambda s: s["completed"], default=None)


def estimate(spec: SweepSpec, catalog: Catalog, *, now: datetime | None = None,
             records: list[Result] | None = None,
             market: list[dict[str, Any]] | None = None) -> Estimate:
    """Price the spec. `records`: earlier results (default: read from the spec's results URL);
    `market`: the sweep's spot-market statistics (`spotbench.history.market.market`, which the
    CLI passes in; None: happy path, no retries)."""
    now = now or datetime.now(UTC)
    if records is None:
        try:
            records = ResultStore(spec.results_url()).read()
        except (FileNotFoundError, OSError, ValueError):
            records = []
    region = spec_region(spec)
    boot = get_provider(spec.cloud).boot_s
    deadline_s = spec.deadline.total_seconds()
    groups: list[GroupCost] = []
    for g in spec.plan():
        machine, gpu = group_hourly(spec, g, catalog)
        earlier = _earlier_run_s(g, records)
        run_s = statistics.median(earlier) if earlier else deadline_s
        source = f"earlier results (median of {len(earlier)} runs)" if earlier else "deadline"
        billed = billed_seconds(run_s + boot)
        n = len(g.members)
        stats = _market_row(market or [], _history_zone(spec), g.machine_type, g.accelerator)
        groups.append(GroupCost(
            group=g.id, machine_type=g.machine_type, members=n, run_s=run_s, run_source=source,
            billed_s=billed, compute_usd=machine * billed / 3600 * n, gpu_usd=gpu * billed / 3600 * n,
            deadline_usd=(machine + gpu) * billed_seconds(deadline_s + boot) / 3600 * n,
            retry_overhead=(stats or {}).get("retry_overhead") or 1.0,
            expected_attempts=1.0 + ((stats or {}).get("retries_per_completed") or 0.0),
        ))

    members = sum(g.members for g in groups)
    instance_s = sum(g.billed_s * g.members for g in groups)
    compute = sum(g.compute_usd for g in groups)
    gpu_usd = sum(g.gpu_usd for g in groups)
    disk_name, disk_gb = get_provider(spec.cloud).disk(spec)
    disk_row = catalog.get(spec.cloud, region, "disk", disk_name)
    sched_row = catalog.get(spec.cloud, region, "scheduler", get_provider(spec.cloud).scheduler_item)
    inv_row = catalog.get(spec.cloud, region, "function", "invocation")
    gbs_row = catalog.get(spec.cloud, region, "function", "gb-second")
    invocations = 2 + len(groups)  # start + stop from the scheduler, one `done` per group
    gb_s = invocations * FUNCTION_MEMORY_GB * FUNCTION_SECONDS
    disk_gb_month_tick = disk_gb * instance_s / (HOURS_PER_MONTH * 3600)  # each disk while running

    def line(item: str, qty: float, unit: str, unit_usd: float, note: str = "") -> Line:
        return Line(item, qty, unit, unit_usd, qty * unit_usd, note)

    per_tick = [
        line("compute", instance_s / 3600, "instance-hour", compute * 3600 / instance_s if instance_s else 0.0,
             f"{len(groups)} groups, {members} instances, billed per second, 1-minute minimum"),
        line("GPU", instance_s / 3600 if gpu_usd else 0.0, "instance-hour",
             gpu_usd * 3600 / instance_s if gpu_usd and instance_s else 0.0, "GPUs priced apart from the machine"),
        line("disk", disk_gb_month_tick, "GB-month", disk_row.usd, f"{disk_name} {disk_gb:g} GB × {members} while running"),
    ]
    if sched_row.unit == "invocation":
        per_tick.append(line("scheduler jobs", 2, "invocation", sched_row.usd, "start + stop"))
    per_tick += [
        line("functions (invocations)", invocations, "invocation", inv_row.usd, "start + stop + one done per group"),
        line("functions (GB-seconds)", gb_s, "GB-second", gbs_row.usd,
             f"{FUNCTION_MEMORY_GB:g} GB × {FUNCTION_SECONDS:g} s per invocation"),
    ]
    happy = compute + gpu_usd
    retry_usd = sum((g.retry_overhead - 1) * (g.compute_usd + g.gpu_usd) for g in groups)
    with_history = [g for g in groups if g.retry_overhead != 1.0 or g.expected_attempts != 1.0]
    if retry_usd > 0 and happy > 0:
        per_tick.append(line(
            "retries (sweep history)", retry_usd / happy, "× compute+GPU", happy,
            "preempted attempts and their retries, as this sweep's own history paid them"))
    ticks = ticks_per_month(spec, now)
    per_month: list[Line] | None = None
    if ticks is not None:
        tick_lines = {ln.item: ln for ln in per_tick}
        per_month = [
            line("compute", tick_lines["compute"].quantity * ticks, "instance-hour", tick_lines["compute"].unit_usd,
                 f"{ticks} ticks"),
            line("GPU", tick_lines["GPU"].quantity * ticks, "instance-hour", tick_lines["GPU"].unit_usd, f"{ticks} ticks"),
            line("disk", members * disk_gb, "GB-month", disk_row.usd,
                 "disks exist all month, billed while the VMs are stopped"),
            line("scheduler jobs", 2 if sched_row.unit == "job-month" else 2 * ticks, sched_row.unit, sched_row.usd,
                 "start + stop jobs"),
            line("functions (invocations)", invocations * ticks, "invocation", inv_row.usd, f"{ticks} ticks"),
            line("functions (GB-seconds)", gb_s * ticks, "GB-second", gbs_row.usd, f"{ticks} ticks"),
        ]
        if "retries (sweep history)" in tick_lines:
            retry = tick_lines["retries (sweep history)"]
            per_month.append(line(retry.item, retry.quantity * ticks, retry.unit, retry.unit_usd,
                                  f"{ticks} ticks"))
    saving_tick = sum(g.deadline_usd for g in groups) - compute - gpu_usd
    assumptions = [
        f"boot time {boot:g} s per start (start → workload running), billed",
        "expected run time per group: median of earlier complete runs in the results URL, "
        f"else the deadline ({deadline_s:g} s)",
        f"functions: {FUNCTION_MEMORY_GB:g} GB memory, {FUNCTION_SECONDS:g} s per invocation",
        f"provisioning: {spec.provisioning} prices" + (" (spot prices vary; see the catalog notes)" if spec.spot else ""),
        "free tiers are not deducted",
        "self-stop: each group stops when its workload calls `done`; without it every group "
        "would run until the deadline stop",
    ]
    if with_history:
        worst = max(with_history, key=lambda g: g.retry_overhead)
        assumptions.append(
            f"retries from this sweep's history ({len(with_history)}/{len(groups)} groups matched by "
            f"zone × machine type × accelerator): cost ×{worst.retry_overhead:.2f} at most "
            f"({worst.machine_type}), {worst.expected_attempts:.2f} attempts per completed group; "
            "`spotbench market SPEC` shows the statistics")
    else:
        assumptions.append("no retries: no history of this sweep's preemptions yet (happy path)")
    if ticks is None:
        assumptions.append("no schedule: no per-month figures (one tick = one `spotbench run`)")
    else:
        assumptions.append(f"{ticks} schedule ticks in the next {HOURS_PER_MONTH:g} h ('{spec.schedule.cron}')")
    approx = sorted({r.item for r in [disk_row, sched_row, inv_row, gbs_row] if r.approximate})
    if approx:
        assumptions.append("approximate prices: " + ", ".join(approx))
    return Estimate(
        sweep=spec.name, cloud=spec.cloud, region=region, groups=groups, per_tick=per_tick,
        per_month=per_month, ticks_per_month=ticks, self_stop_saving_tick=saving_tick,
        self_stop_saving_month=saving_tick * ticks if ticks is not None else None,
        assumptions=assumptions,
    )
