"""Price a spec: each group's run (`GroupCost`), then the lines of one schedule tick and of
a month, and every assumption in words.

    groups (machine + GPU per member, run time, retries from the market) → price rows
    → lines per tick → lines per month (× ticks, disks all month, free tier) → notes
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spotbench.clouds import get_provider
from spotbench.costs import HOURS_PER_MONTH, Catalog, PriceRow, billed_seconds, run_seconds
from spotbench.estimate.answer import Estimate, GroupCost, Line
from spotbench.estimate import services
from spotbench.estimate.assumptions import Assumptions
from spotbench.facts import facts_of
from spotbench.estimate.pricing import (
    group_hourly, price_rows, provisioning_label, spec_region, types_label,
)
from spotbench.prices import notes as price_notes
from spotbench.estimate.ticks import ticks_per_month
from spotbench.plan import RunGroup
from spotbench.results import Result, ResultStore
from spotbench.spec import MATRIX_MACHINE_KEYS, SweepSpec

RETRIES = "retries (sweep history)"


def estimate(spec: SweepSpec, catalog: Catalog, *, records: list[Result] | None = None,
             market: list[dict[str, Any]] | None = None,
             assume: list[str] | dict[str, Any] | Assumptions | None = None,
             now: datetime | None = None) -> Estimate:
    """Price the spec. `records`: earlier results (default: read from the spec's results URL);
    `market`: the sweep's spot-market statistics (`spotbench.history.market.market`, which the
    CLI passes in; None: happy path, no retries); `assume`: `KEY=VALUE` overrides of the
    `Assumptions` (raises BadAssumption). `now` dates the price-table age warning; no
    figure depends on it."""
    a = assume if isinstance(assume, Assumptions) else Assumptions.for_spec(spec, assume)
    records = _stored_records(spec) if records is None else records
    groups = [_group_cost(spec, g, catalog, a, records, market or []) for g in spec.plan()]
    rates = Rates.of(spec, catalog, a, groups)
    per_tick = _per_tick(groups, rates, a)
    ticks = ticks_per_month(spec, a.month_days)
    per_month = None
    if ticks is not None:
        per_month = _per_month(per_tick, groups, rates, a, ticks)
        if a.free_tier:
            per_month = [_after_free_tier(ln, _free(spec, a, ln.item)) for ln in per_month]
    saving_tick = round(sum(g.deadline_usd for g in groups) - sum(g.compute_usd for g in groups)
                        - sum(g.gpu_usd for g in groups), 9)  # 1e-16: float noise, not a saving
    rows, prices = price_rows(spec, catalog, [rates.disk, rates.scheduler, rates.invocation,
                                               rates.gb_second])
    return Estimate(
        sweep=spec.name, cloud=spec.cloud, region=spec_region(spec), groups=groups,
        per_tick=per_tick, per_month=per_month, ticks_per_month=ticks,
        self_stop_saving_tick=saving_tick,
        self_stop_saving_month=saving_tick * ticks if ticks is not None else None,
        assumptions=_notes(spec, a, groups, rates, ticks), assumed=_assumed(spec, a),
        overridden=sorted(a.overridden), budget=spec.budget,
        schedule=("once" if spec.run_once else f"'{spec.cron_schedule.cron}' {spec.cron_schedule.timezone}"
                  if spec.cron_schedule else None),
        prices=prices, price_warning=price_notes.stale(rows, spec.cloud, spec_region(spec), now),
    )


def _assumed(spec: SweepSpec, a: Assumptions) -> dict[str, Any]:
    """The values used: `stack_s` only where it prices something (`schedule: once`)."""
    return {k: v for k, v in a.as_dict().items() if spec.run_once or k != "stack_s"}


def _stored_records(spec: SweepSpec) -> list[Result]:
    try:
        return ResultStore(spec.results_url()).read()
    except (FileNotFoundError, OSError, ValueError):
        return []


# ---- groups -------------------------------------------------------------------------------
def _group_cost(spec: SweepSpec, g: RunGroup, catalog: Catalog, a: Assumptions,
                records: list[Result], market: list[dict[str, Any]]) -> GroupCost:
    machine, gpu = group_hourly(spec, g, catalog)
    run_s, source = _run_time(spec, g, a, records)
    billed = billed_seconds(run_s + a.boot_s)
    zone = spec.zone or facts_of(spec.cloud).default_zone
    stats = _market_row(market, zone, g.machine_type, g.accelerator) or {}
    return GroupCost(
        group=g.id, machine_type=types_label(g), members=len(g.members), run_s=run_s,
        run_source=source, billed_s=billed, compute_usd=machine * billed / 3600,
        gpu_usd=gpu * billed / 3600,
        deadline_usd=(machine + gpu) * billed_seconds(spec.deadline.total_seconds() + a.boot_s) / 3600,
        retry_overhead=stats.get("retry_overhead") or 1.0,
        expected_attempts=1.0 + (stats.get("retries_per_completed") or 0.0),
        provisioning=provisioning_label(spec, g),
    )


def _run_time(spec: SweepSpec, g: RunGroup, a: Assumptions, records: list[Result]) -> tuple[float, str]:
    """How long the group's workload runs, and where that figure comes from."""
    if a.run_s is not None:
        return a.run_s, "--assume run_s"
    earlier = _earlier_run_s(g, records)
    if earlier:
        return statistics.median(earlier), f"earlier results (median of {len(earlier)} runs)"
    return spec.deadline.total_seconds(), "deadline"


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


def _market_row(stats: list[dict[str, Any]], zone: str | None, machine_type: str,
                accelerator: str | None) -> dict[str, Any] | None:
    """The statistics row of one zone × machine type × accelerator (zone None, as on AWS
    where the spec names a region: the row with the most completed results)."""
    rows = [s for s in stats if s["machine_type"] == machine_type and s["accelerator"] == accelerator
            and (zone is None or s["zone"] == zone)]
    return max(rows, key=lambda s: s["completed"], default=None)


# ---- lines --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rates:
    """The price rows and per-tick quantities every line is computed from."""

    disk: PriceRow
    scheduler: PriceRow
    invocation: PriceRow
    gb_second: PriceRow
    disk_gb: float
    members: int
    instance_s: float  # billed seconds of every member of every group, one tick
    invocations: float  # function calls per tick
    gb_s: float  # function GB-seconds per tick
    cloud: str = ""
    region: str | None = None
    catalog: Catalog | None = None  # for the services' lines (estimate/services.py)
    wall_s: float = 0.0  # how long the tick's VMs run: the longest group × the waves of groups
    lifecycle: str = "stopped"  # created: disks only while the VMs run (made at start, deleted after)
    once: bool = False  # `schedule: once`: no scheduler, the stack stands for the run only

    @classmethod
    def of(cls, spec: SweepSpec, catalog: Catalog, a: Assumptions, groups: list[GroupCost]) -> Rates:
        provider = get_provider(spec.cloud)
        region = spec_region(spec)
        invocations = a.calls_per_tick if a.calls_per_tick is not None else 2 + len(groups)
        return cls(
            disk=catalog.get(spec.cloud, region, "disk", a.disk_type),
            scheduler=catalog.get(spec.cloud, region, "scheduler", provider.facts.scheduler_item),
            invocation=catalog.get(spec.cloud, region, "function", "invocation"),
            gb_second=catalog.get(spec.cloud, region, "function", "gb-second"),
            disk_gb=provider.disk(spec)[1],
            members=sum(g.members for g in groups),
            instance_s=sum(g.billed_s * g.members for g in groups),
            invocations=invocations,
            gb_s=invocations * a.function_gb * a.function_s_per_call,
            cloud=spec.cloud, region=region, catalog=catalog,
            wall_s=max((g.billed_s for g in groups), default=0)
            * math.ceil(len(groups) / (spec.max_concurrency or len(groups) or 1)),
            lifecycle=spec.lifecycle, once=spec.run_once,
        )


def _line(item: str, qty: float, unit: str, unit_usd: float, note: str = "") -> Line:
    return Line(item, qty, unit, unit_usd, qty * unit_usd, note)


def _per_tick(groups: list[GroupCost], r: Rates, a: Assumptions) -> list[Line]:
    compute = sum(g.compute_usd for g in groups)
    gpu = sum(g.gpu_usd for g in groups)
    lines = [
        _line("compute", r.instance_s / 3600, "instance-hour",
              compute * 3600 / r.instance_s if r.instance_s else 0.0,
              f"{len(groups)} groups, {r.members} instances, billed per second, 1-minute minimum"),
        _line("GPU", r.instance_s / 3600 if gpu else 0.0, "instance-hour",
              gpu * 3600 / r.instance_s if gpu and r.instance_s else 0.0,
              "GPUs priced apart from the machine"),
        _line("disk", r.disk_gb * r.instance_s / (HOURS_PER_MONTH * 3600), "GB-month", r.disk.usd,
              f"{a.disk_type} {r.disk_gb:g} GB × {r.members} while running"),  # each disk while running
    ]
    if r.scheduler.unit == "invocation" and not r.once:  # once: no scheduler at all
        lines.append(_line("scheduler jobs", 2, "invocation", r.scheduler.usd, "start + stop"))
    lines += [
        _line("functions (invocations)", r.invocations, "invocation", r.invocation.usd,
              "start + stop + one done per group" if a.calls_per_tick is None else "--assume calls_per_tick"),
        _line("functions (GB-seconds)", r.gb_s, "GB-second", r.gb_second.usd,
              f"{a.function_mb:g} MB × {a.function_s_per_call:g} s per invocation"),
    ]
    if r.catalog is not None:
        lines += services.tick_lines(r.cloud, r.region, r.catalog, a, invocations=r.invocations,
                                     instance_s=r.instance_s, run_s=r.wall_s,
                                     stack_s=r.wall_s + a.stack_s if r.once else None)
    happy = compute + gpu
    retry_usd = sum((g.retry_overhead - 1) * (g.compute_usd + g.gpu_usd) for g in groups)
    if retry_usd > 0 and happy > 0:
        lines.append(_line(
            RETRIES, retry_usd / happy, "× compute+GPU", happy,
            "preempted attempts and their retries, as this sweep's own history paid them"))
    return lines


def _per_month(per_tick: list[Line], groups: list[GroupCost], r: Rates, a: Assumptions,
               ticks: float) -> list[Line]:
    tick = {ln.item: ln for ln in per_tick}
    month_share = a.month_days * 24 / HOURS_PER_MONTH  # of a 730-hour billing month
    each = f"{ticks:.4g} ticks"
    lines = [
        _line("compute", tick["compute"].quantity * ticks, "instance-hour", tick["compute"].unit_usd, each),
        _line("GPU", tick["GPU"].quantity * ticks, "instance-hour", tick["GPU"].unit_usd, each),
        _month_disk(tick["disk"], r, a, ticks, month_share),
        _line("scheduler jobs", 2 if r.scheduler.unit == "job-month" else 2 * ticks, r.scheduler.unit,
              r.scheduler.usd, "start + stop jobs"),
        _line("functions (invocations)", r.invocations * ticks, "invocation", r.invocation.usd, each),
        _line("functions (GB-seconds)", r.gb_s * ticks, "GB-second", r.gb_second.usd, each),
    ]
    if r.catalog is not None:
        lines += services.month_lines(r.cloud, r.region, r.catalog, a, tick, ticks)
    if RETRIES in tick:
        retry = tick[RETRIES]
        lines.append(_line(retry.item, retry.quantity * ticks, retry.unit, retry.unit_usd, each))
    return lines


def _month_disk(tick: Line, r: Rates, a: Assumptions, ticks: float, month_share: float) -> Line:
    """The month's disks by lifecycle: `stopped` VMs keep their disks all month (billed while
    stopped); `created` VMs are made at start and deleted after the run, disks with them, so
    a disk bills only while its VM runs (the tick's disk line × ticks)."""
    if r.lifecycle == "created":
        return _line("disk", tick.quantity * ticks, "GB-month", r.disk.usd,
                     f"{r.members} disks × {r.disk_gb:g} GB only while the VMs run "
                     f"(lifecycle: created: deleted after each run), {ticks:.4g} ticks")
    return _line("disk", r.members * r.disk_gb * month_share, "GB-month", r.disk.usd,
                 f"{r.members} disks × {r.disk_gb:g} GB exist all {a.month_days:g} days (billed while stopped)")


def _free(spec: SweepSpec, a: Assumptions, item: str) -> float:
    """The month's free quantity of a line: the cloud's free tier of the item, or of the item
    for this disk type (`disk:pd-standard`), where the tier holds in the spec's region."""
    facts = facts_of(spec.cloud)
    region = spec_region(spec)
    for key in (f"{item}:{a.disk_type}" if item == "disk" else item, item):
        regions = facts.free_tier_regions.get(key)
        if key in facts.free_tier and (regions is None or region in regions):
            return float(facts.free_tier[key])
    return 0.0


def _after_free_tier(ln: Line, free: float) -> Line:
    if not free:
        return ln
    billed = max(0.0, ln.quantity - free)
    return Line(ln.item, billed, ln.unit, ln.unit_usd, billed * ln.unit_usd,
                f"{ln.note}; {ln.quantity:g} less {free:g} free per month" if ln.note
                else f"{ln.quantity:g} less {free:g} free per month")


# ---- the assumptions in words ---------------------------------------------------------------
def _notes(spec: SweepSpec, a: Assumptions, groups: list[GroupCost], r: Rates,
           ticks: float | None) -> list[str]:
    deadline_s = spec.deadline.total_seconds()
    notes = [
        f"boot_s={a.boot_s:g}: seconds from start to workload running, billed",
        "run_s=" + (f"{a.run_s:g}: seconds every group's VMs run per tick after boot" if a.run_s is not None
                    else "(earlier results): the median of earlier complete runs in the results URL, "
                         f"else the deadline ({deadline_s:g} s)"),
        f"function_mb={a.function_mb:g}, function_s_per_call={a.function_s_per_call:g}: GB-seconds per call",
        "calls_per_tick=" + (f"{a.calls_per_tick:g}" if a.calls_per_tick is not None
                             else f"(start + stop + one done per group = {2 + len(groups)})"),
        f"disk_type={a.disk_type}: {r.disk_gb:g} GB per member, {r.disk.usd:g} USD per GB-month",
        f"month_days={a.month_days:g}" + (f": {ticks:.4g} schedule ticks ('{spec.cron_schedule.cron}', "
                                          f"{spec.cron_schedule.timezone}) on average"
                                          if ticks is not None and spec.cron_schedule else ""),
        "free_tier=" + ("on: each cloud's monthly free tier deducted from the month's lines "
                        "(not from a single tick)" if a.free_tier else "off: list prices, no free tier"),
        _provisioning_note(spec),
        "self-stop: each group stops when its workload calls `done`; without it every group "
        "would run until the deadline stop",
        "override any of the above with --assume KEY=VALUE (repeatable)",
        _retries_note(groups),
    ]
    if spec.run_once:
        notes.append(f"schedule: once: no scheduler, no month; the stack stands {a.stack_s:g} s "
                     "(stack_s: deploy + destroy) beside the VMs' run, then nothing but the "
                     "results bucket is left")
    elif ticks is None:
        notes.append("no schedule: no per-month figures (one tick = one `spotbench run`)")
    approx = sorted({row.item for row in (r.disk, r.scheduler, r.invocation, r.gb_second)
                     if row.approximate})
    if approx:
        notes.append("approximate prices: " + ", ".join(approx))
    return notes


def _provisioning_note(spec: SweepSpec) -> str:
    """How members are priced: the spec's provisioning, and each role's own where it differs."""
    roles = sorted(r for r, p in spec.role_provisioning.items() if p != spec.provisioning)
    own = "".join(f"; {r}: {spec.role_provisioning[r]}"
                  + (" (on-demand prices)" if spec.role_provisioning[r] == "standard" else "")
                  for r in roles)
    spot = spec.spot or any(spec.role_provisioning[r] != "standard" for r in roles)
    return (f"provisioning: {spec.provisioning} prices" + own + (" (spot prices vary; see the catalog notes)" if spot else ""))


def _retries_note(groups: list[GroupCost]) -> str:
    with_history = [g for g in groups if g.retry_overhead != 1.0 or g.expected_attempts != 1.0]
    if not with_history:
        return "no retries: no history of this sweep's preemptions yet (happy path)"
    worst = max(with_history, key=lambda g: g.retry_overhead)
    return (f"retries from this sweep's history ({len(with_history)}/{len(groups)} groups matched by "
            f"zone × machine type × accelerator): cost ×{worst.retry_overhead:.2f} at most "
            f"({worst.machine_type}), {worst.expected_attempts:.2f} attempts per completed group; "
            "`spotbench market SPEC` shows the statistics")
