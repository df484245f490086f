"""What a sweep will cost before it runs: per group, per schedule tick, per month.

Every figure is a `Line` (quantity × unit price = USD) so a published calculation can be
checked item by item; each section's lines add up to its total. Every assumption (boot and
run time, function memory/duration/calls, disk type, month length, free tier) is an
`Assumptions` field, overridable with `--assume KEY=VALUE` and returned with the numbers.
Members are priced at their own machine type (`role_machine_types`). The month's tick
count is the cron's average over whole weeks from a fixed date: it does not depend on when
the command runs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from zoneinfo import ZoneInfo

from croniter import croniter

from spotbench.clouds import get_provider
from spotbench.costs import (
    HOURS_PER_MONTH, Catalog, billed_seconds, instance_hourly, region_of, run_seconds,
)
from spotbench.plan import Member, RunGroup
from spotbench.prices import notes as price_notes
from spotbench.results import Result, ResultStore
from spotbench.spec import MATRIX_MACHINE_KEYS, SweepSpec

DEFAULT_FUNCTION_MB = 256.0
DEFAULT_FUNCTION_S = 0.5
DEFAULT_MONTH_DAYS = HOURS_PER_MONTH / 24  # 30.42: the 730-hour month both clouds bill by


class BadAssumption(ValueError):
    """An `--assume KEY=VALUE` that names no assumption or has a value of the wrong kind."""


@dataclass(frozen=True)
class Assumptions:
    """Everything `estimate` assumes, each overridable with `--assume KEY=VALUE`.

    boot_s               seconds from start to workload running, billed (provider default)
    run_s                seconds each group's VMs run per tick after boot; empty = the median
                         of earlier complete runs in the results URL, else the deadline
    function_s_per_call  seconds one function invocation runs (billed GB-seconds)
    function_mb          memory of the functions, MB (1 GB = 1024 MB)
    calls_per_tick       function invocations per tick; empty = start + stop + one done
                         per group
    disk_type            the boot disk's price item (pd-balanced, pd-standard, gp3, …)
    month_days           days in the month the per-month figures cover (default 730 h)
    free_tier            on: deduct each cloud's monthly free tier (scheduler jobs,
                         function invocations and GB-seconds); off: list prices
    """

    boot_s: float
    disk_type: str
    run_s: float | None = None
    function_s_per_call: float = DEFAULT_FUNCTION_S
    function_mb: float = DEFAULT_FUNCTION_MB
    calls_per_tick: float | None = None
    month_days: float = DEFAULT_MONTH_DAYS
    free_tier: bool = False
    overridden: frozenset[str] = frozenset()

    @classmethod
    def for_spec(cls, spec: SweepSpec, overrides: list[str] | dict[str, Any] | None = None) -> Assumptions:
        provider = get_provider(spec.cloud)
        base = cls(boot_s=provider.boot_s, disk_type=provider.disk(spec)[0])
        return base.override(overrides or [])

    def override(self, pairs: list[str] | dict[str, Any]) -> Assumptions:
        """Apply `KEY=VALUE` strings (or a dict), naming the key and the allowed form on error."""
        items = pairs.items() if isinstance(pairs, dict) else [_split(p) for p in pairs]
        changes: dict[str, Any] = {}
        for key, raw in items:
            changes[key] = _parse(key, raw)
        return replace(self, **changes, overridden=self.overridden | set(changes))

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ASSUMPTION_KEYS}

    @property
    def function_gb(self) -> float:
        return self.function_mb / 1024


ASSUMPTION_KEYS = ("boot_s", "run_s", "function_s_per_call", "function_mb", "calls_per_tick",
                   "disk_type", "month_days", "free_tier")
_OPTIONAL = {"run_s", "calls_per_tick"}


def _split(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    if not sep:
        raise BadAssumption(f"--assume {pair!r}: give KEY=VALUE, e.g. run_s=600 "
                            f"(keys: {', '.join(ASSUMPTION_KEYS)})")
    return key.strip(), value.strip()


def _parse(key: str, raw: Any) -> Any:
    if key not in ASSUMPTION_KEYS:
        import difflib

        close = difflib.get_close_matches(key, ASSUMPTION_KEYS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise BadAssumption(f"--assume {key}: unknown assumption; {hint}keys: {', '.join(ASSUMPTION_KEYS)}")
    if key == "disk_type":
        if not str(raw):
            raise BadAssumption("--assume disk_type: give a disk price item, e.g. pd-standard")
        return str(raw)
    if key == "free_tier":
        text = str(raw).lower()
        if text in ("on", "true", "yes", "1"):
            return True
        if text in ("off", "false", "no", "0"):
            return False
        raise BadAssumption(f"--assume free_tier={raw}: give on or off")
    if key in _OPTIONAL and raw in ("", None):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise BadAssumption(f"--assume {key}={raw}: expected a number") from None
    if not math.isfinite(value) or value < 0 or (key == "month_days" and value <= 0):
        raise BadAssumption(f"--assume {key}={raw}: expected a number >= 0"
                            + (" (and > 0)" if key == "month_days" else ""))
    return value


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
    ticks_per_month: float | None  # average ticks in a month of `month_days`
    self_stop_saving_tick: float
    self_stop_saving_month: float | None
    assumptions: list[str] = field(default_factory=list)  # each assumption in words
    assumed: dict[str, Any] = field(default_factory=dict)  # the values used (Assumptions)
    overridden: list[str] = field(default_factory=list)  # keys set with --assume
    budget: float | None = None  # the spec's `budget` (USD for the whole sweep)
    schedule: str | None = None  # `'0 3 * * *' UTC`, None without a schedule
    prices: list[str] = field(default_factory=list)  # which price tables and dates, per zone
    price_warning: str | None = None  # the machine/GPU prices are older than a week

    @staticmethod
    def total(lines: list[Line] | None) -> float:
        return sum(line.usd for line in lines or [])

    @property
    def run_usd(self) -> float:
        """One run: every group once (one schedule tick), all lines."""
        return self.total(self.per_tick)

    @property
    def month_usd(self) -> float | None:
        return self.total(self.per_month) if self.per_month is not None else None

    @property
    def budgeted_run_usd(self) -> float:
        """What one run takes from the budget: the group runs' compute, GPU and retries
        (what `start`'s budget check counts; disks, scheduler and functions bill beside it)."""
        return sum(ln.usd for ln in self.per_tick if ln.item in BUDGETED)

    @property
    def idle_disk_month_usd(self) -> float | None:
        """The month's disks: they exist all month and bill while the VMs are stopped."""
        if self.per_month is None:
            return None
        return sum(ln.usd for ln in self.per_month if ln.item == "disk")

    @property
    def budget_runs(self) -> int | None:
        """Whole runs the budget covers (None without a budget or a priced run)."""
        if self.budget is None or self.budgeted_run_usd <= 0:
            return None
        return math.floor(self.budget / self.budgeted_run_usd + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tick_total_usd"] = self.total(self.per_tick)
        out["month_total_usd"] = self.month_usd
        out["summary"] = {"run_usd": self.run_usd, "month_usd": self.month_usd,
                          "idle_disk_month_usd": self.idle_disk_month_usd, "budget": self.budget,
                          "budgeted_run_usd": self.budgeted_run_usd, "budget_runs": self.budget_runs,
                          "lines": headline(self)}
        return out


BUDGETED = ("compute", "GPU", "retries (sweep history)")


def usd(value: float) -> str:
    """An amount for people: `762 USD`, `24.13 USD`, `0.0042 USD` (two significant digits
    below a cent), thousands separated."""
    if value >= 100 or (value >= 1 and float(value).is_integer()):
        return f"{value:,.0f} USD"
    if value >= 0.01 or value == 0:
        return f"{value:,.2f} USD"
    return f"{value:.2g} USD"


def headline(est: Estimate) -> list[str]:
    """The answer first: per run and per month, the disks billed while stopped, the budget."""
    first = f"{est.sweep} on {est.cloud}" + (f" ({est.region})" if est.region not in (None, "*") else "") \
        + f": ≈ {usd(est.run_usd)} per run"
    if est.month_usd is not None and est.ticks_per_month is not None:
        first += (f", ≈ {usd(est.month_usd)} per month ({est.ticks_per_month:.3g} runs a month"
                  + (f" at {est.schedule}" if est.schedule else "") + ")")
    else:
        first += " (no schedule: one run per `spotbench run`)"
    lines = [first]
    disks = est.idle_disk_month_usd
    if disks:
        disk_note = next((ln.note for ln in est.per_month or [] if ln.item == "disk"), "")
        count = disk_note.split(" exist", 1)[0]
        lines.append(f"{usd(disks)} a month of it is {count}, billed even while the VMs are "
                     "stopped (until `spotbench teardown`)")
    if est.budget is None:
        lines.append("no budget: nothing caps the spend (set `budget:` in the spec, in USD)")
        return lines
    runs, per_run = est.budget_runs, est.budgeted_run_usd
    budget = f"budget {usd(est.budget)}"
    if runs is None:
        lines.append(f"{budget}: these runs have no compute price to count against it")
    elif runs == 0:
        lines.append(f"{budget} does not cover one run ({usd(per_run)} of compute): "
                     "`start` refuses the groups that would exceed it")
    else:
        text = (f"{budget} covers {runs} run{'s' if runs != 1 else ''} ({usd(per_run)} of compute "
                "each), then `start` refuses groups")
        if est.month_usd is not None and est.ticks_per_month:
            if est.month_usd > est.budget:
                per_day = est.ticks_per_month / float(est.assumed.get("month_days") or DEFAULT_MONTH_DAYS)
                day = math.ceil((runs + 1) / per_day - 1e-9)
                text += (f"; it is exceeded by run {runs + 1} (day {day} of the schedule): a month "
                         f"costs {usd(est.month_usd)}, {est.month_usd / est.budget:.3g}× the budget")
            else:
                text += f": about {runs / est.ticks_per_month:.3g} months at this schedule"
        lines.append(text)
    return lines


def spec_region(spec: SweepSpec) -> str | None:
    return region_of(spec.cloud, spec.zone, spec.region)


def member_type(group: RunGroup, member: Member) -> str:
    return member.machine_type or group.machine_type


def member_hourly(spec: SweepSpec, group: RunGroup, member: Member, catalog: Catalog) -> tuple[float, float]:
    """(machine, GPU) USD per hour of one member: its own role's type (`role_machine_types`)."""
    return instance_hourly(catalog, spec.cloud, spec_region(spec), member_type(group, member), spec.spot,
                           group.accelerator, group.accelerator_count, spec.zone)


def group_hourly(spec: SweepSpec, group: RunGroup, catalog: Catalog) -> tuple[float, float]:
    """(machine, GPU) USD per hour of the whole group, each member priced at its own type
    (raises MissingPrice naming the row to add)."""
    rates = [member_hourly(spec, group, m, catalog) for m in group.members]
    return sum(r[0] for r in rates), sum(r[1] for r in rates)


def group_cost_usd(spec: SweepSpec, group: RunGroup, catalog: Catalog, run_s: float) -> float:
    """Compute + GPU of one group run of `run_s` seconds (boot added, minimum minute)."""
    machine, gpu = group_hourly(spec, group, catalog)
    return (machine + gpu) * billed_seconds(run_s + get_provider(spec.cloud).boot_s) / 3600


def member_cost_usd(spec: SweepSpec, group: RunGroup, member: Member, catalog: Catalog,
                    run_s: float) -> float:
    """Compute + GPU of one member for a run of `run_s` seconds (boot added, minimum minute)."""
    machine, gpu = member_hourly(spec, group, member, catalog)
    return (machine + gpu) * billed_seconds(run_s + get_provider(spec.cloud).boot_s) / 3600


def types_label(group: RunGroup) -> str:
    """`n1-standard-2`, or `n1-standard-2 (chief: n1-standard-4)` with role overrides."""
    other = sorted({(m.role, m.machine_type) for m in group.members
                    if m.machine_type and m.machine_type != group.machine_type})
    return group.machine_type + (f" ({', '.join(f'{r}: {t}' for r, t in other)})" if other else "")


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


_ANCHOR = datetime(2024, 1, 1)  # a Monday: the count below covers whole weeks from it
_LONG_DAYS = 2800  # 400 weeks (≈ 92 months, leap years included)
_SHORT_DAYS = 28  # 4 weeks, for crons that fire often


def fires_per_day(cron: str, timezone: str = "UTC") -> float:
    """The cron's average fires per day over whole weeks from a fixed date: the same answer
    whenever (date or time of day) it is asked. Frequent crons are counted over 4 weeks,
    others over 400 weeks (so monthly and weekday patterns average out)."""
    start = _ANCHOR.replace(tzinfo=ZoneInfo(timezone))

    def count(days: int, limit: int | None = None) -> int:
        it = croniter(cron, start - timedelta(microseconds=1))
        end, n = start + timedelta(days=days), 0
        while it.get_next(datetime) < end:
            n += 1
            if limit is not None and n > limit:
                break
        return n

    short = count(_SHORT_DAYS, limit=200)
    if short > 200:
        return count(_SHORT_DAYS) / _SHORT_DAYS
    return count(_LONG_DAYS) / _LONG_DAYS


def ticks_per_month(spec: SweepSpec, month_days: float = DEFAULT_MONTH_DAYS) -> float | None:
    """Average start ticks in a month of `month_days` days (None without a schedule)."""
    if spec.schedule is None:
        return None
    return fires_per_day(spec.schedule.cron, spec.schedule.timezone) * month_days


def _history_zone(spec: SweepSpec) -> str | None:
    return spec.zone or get_provider(spec.cloud).default_zone


def _market_row(stats: list[dict[str, Any]], zone: str | None, machine_type: str,
                accelerator: str | None) -> dict[str, Any] | None:
    """The statistics row of one zone × machine type × accelerator (zone None, as on AWS
    where the spec names a region: the row with the most completed results)."""
    rows = [s for s in stats if s["machine_type"] == machine_type and s["accelerator"] == accelerator
            and (zone is None or s["zone"] == zone)]
    return max(rows, key=lambda s: s["completed"], default=None)


def estimate(spec: SweepSpec, catalog: Catalog, *, records: list[Result] | None = None,
             market: list[dict[str, Any]] | None = None,
             assume: list[str] | dict[str, Any] | Assumptions | None = None,
             now: datetime | None = None) -> Estimate:
    """Price the spec. `records`: earlier results (default: read from the spec's results URL);
    `market`: the sweep's spot-market statistics (`spotbench.history.market.market`, which the
    CLI passes in; None: happy path, no retries); `assume`: `KEY=VALUE` overrides of the
    `Assumptions` (raises BadAssumption). `now` is accepted for callers of the older
    signature; no figure depends on it."""
    a = assume if isinstance(assume, Assumptions) else Assumptions.for_spec(spec, assume)
    if records is None:
        try:
            records = ResultStore(spec.results_url()).read()
        except (FileNotFoundError, OSError, ValueError):
            records = []
    provider = get_provider(spec.cloud)
    region = spec_region(spec)
    deadline_s = spec.deadline.total_seconds()
    groups: list[GroupCost] = []
    for g in spec.plan():
        machine, gpu = group_hourly(spec, g, catalog)
        earlier = _earlier_run_s(g, records)
        if a.run_s is not None:
            run_s, source = a.run_s, "--assume run_s"
        elif earlier:
            run_s, source = statistics.median(earlier), f"earlier results (median of {len(earlier)} runs)"
        else:
            run_s, source = deadline_s, "deadline"
        billed = billed_seconds(run_s + a.boot_s)
        stats = _market_row(market or [], _history_zone(spec), g.machine_type, g.accelerator)
        groups.append(GroupCost(
            group=g.id, machine_type=types_label(g), members=len(g.members), run_s=run_s,
            run_source=source, billed_s=billed, compute_usd=machine * billed / 3600,
            gpu_usd=gpu * billed / 3600,
            deadline_usd=(machine + gpu) * billed_seconds(deadline_s + a.boot_s) / 3600,
            retry_overhead=(stats or {}).get("retry_overhead") or 1.0,
            expected_attempts=1.0 + ((stats or {}).get("retries_per_completed") or 0.0),
        ))

    members = sum(g.members for g in groups)
    instance_s = sum(g.billed_s * g.members for g in groups)
    compute = sum(g.compute_usd for g in groups)
    gpu_usd = sum(g.gpu_usd for g in groups)
    _, disk_gb = provider.disk(spec)
    disk_row = catalog.get(spec.cloud, region, "disk", a.disk_type)
    sched_row = catalog.get(spec.cloud, region, "scheduler", provider.scheduler_item)
    inv_row = catalog.get(spec.cloud, region, "function", "invocation")
    gbs_row = catalog.get(spec.cloud, region, "function", "gb-second")
    invocations = a.calls_per_tick if a.calls_per_tick is not None else 2 + len(groups)
    gb_s = invocations * a.function_gb * a.function_s_per_call
    disk_gb_month_tick = disk_gb * instance_s / (HOURS_PER_MONTH * 3600)  # each disk while running

    def line(item: str, qty: float, unit: str, unit_usd: float, note: str = "") -> Line:
        return Line(item, qty, unit, unit_usd, qty * unit_usd, note)

    per_tick = [
        line("compute", instance_s / 3600, "instance-hour", compute * 3600 / instance_s if instance_s else 0.0,
             f"{len(groups)} groups, {members} instances, billed per second, 1-minute minimum"),
        line("GPU", instance_s / 3600 if gpu_usd else 0.0, "instance-hour",
             gpu_usd * 3600 / instance_s if gpu_usd and instance_s else 0.0, "GPUs priced apart from the machine"),
        line("disk", disk_gb_month_tick, "GB-month", disk_row.usd,
             f"{a.disk_type} {disk_gb:g} GB × {members} while running"),
    ]
    if sched_row.unit == "invocation":
        per_tick.append(line("scheduler jobs", 2, "invocation", sched_row.usd, "start + stop"))
    per_tick += [
        line("functions (invocations)", invocations, "invocation", inv_row.usd,
             "start + stop + one done per group" if a.calls_per_tick is None else "--assume calls_per_tick"),
        line("functions (GB-seconds)", gb_s, "GB-second", gbs_row.usd,
             f"{a.function_mb:g} MB × {a.function_s_per_call:g} s per invocation"),
    ]
    happy = compute + gpu_usd
    retry_usd = sum((g.retry_overhead - 1) * (g.compute_usd + g.gpu_usd) for g in groups)
    with_history = [g for g in groups if g.retry_overhead != 1.0 or g.expected_attempts != 1.0]
    if retry_usd > 0 and happy > 0:
        per_tick.append(line(
            "retries (sweep history)", retry_usd / happy, "× compute+GPU", happy,
            "preempted attempts and their retries, as this sweep's own history paid them"))
    ticks = ticks_per_month(spec, a.month_days)
    per_month: list[Line] | None = None
    if ticks is not None:
        tick_lines = {ln.item: ln for ln in per_tick}
        month_share = a.month_days * 24 / HOURS_PER_MONTH  # of a 730-hour billing month
        each = f"{ticks:.4g} ticks"
        per_month = [
            line("compute", tick_lines["compute"].quantity * ticks, "instance-hour",
                 tick_lines["compute"].unit_usd, each),
            line("GPU", tick_lines["GPU"].quantity * ticks, "instance-hour", tick_lines["GPU"].unit_usd, each),
            line("disk", members * disk_gb * month_share, "GB-month", disk_row.usd,
                 f"{members} disks × {disk_gb:g} GB exist all {a.month_days:g} days (billed while stopped)"),
            line("scheduler jobs", 2 if sched_row.unit == "job-month" else 2 * ticks, sched_row.unit,
                 sched_row.usd, "start + stop jobs"),
            line("functions (invocations)", invocations * ticks, "invocation", inv_row.usd, each),
            line("functions (GB-seconds)", gb_s * ticks, "GB-second", gbs_row.usd, each),
        ]
        if "retries (sweep history)" in tick_lines:
            retry = tick_lines["retries (sweep history)"]
            per_month.append(line(retry.item, retry.quantity * ticks, retry.unit, retry.unit_usd, each))
        if a.free_tier:
            per_month = [_after_free_tier(ln, provider.free_tier.get(ln.item, 0.0)) for ln in per_month]
    saving_tick = sum(g.deadline_usd for g in groups) - compute - gpu_usd
    notes = [
        f"boot_s={a.boot_s:g}: seconds from start to workload running, billed",
        "run_s=" + (f"{a.run_s:g}: seconds every group's VMs run per tick after boot" if a.run_s is not None
                    else "(earlier results): the median of earlier complete runs in the results URL, "
                         f"else the deadline ({deadline_s:g} s)"),
        f"function_mb={a.function_mb:g}, function_s_per_call={a.function_s_per_call:g}: GB-seconds per call",
        "calls_per_tick=" + (f"{a.calls_per_tick:g}" if a.calls_per_tick is not None
                             else f"(start + stop + one done per group = {2 + len(groups)})"),
        f"disk_type={a.disk_type}: {disk_gb:g} GB per member, {disk_row.usd:g} USD per GB-month",
        f"month_days={a.month_days:g}" + (f": {ticks:.4g} schedule ticks ('{spec.schedule.cron}', "
                                          f"{spec.schedule.timezone}) on average"
                                          if ticks is not None and spec.schedule else ""),
        "free_tier=" + ("on: each cloud's monthly free tier deducted from the month's lines "
                        "(not from a single tick)" if a.free_tier else "off: list prices, no free tier"),
        f"provisioning: {spec.provisioning} prices" + (" (spot prices vary; see the catalog notes)" if spec.spot else ""),
        "self-stop: each group stops when its workload calls `done`; without it every group "
        "would run until the deadline stop",
        "override any of the above with --assume KEY=VALUE (repeatable)",
    ]
    if with_history:
        worst = max(with_history, key=lambda g: g.retry_overhead)
        notes.append(
            f"retries from this sweep's history ({len(with_history)}/{len(groups)} groups matched by "
            f"zone × machine type × accelerator): cost ×{worst.retry_overhead:.2f} at most "
            f"({worst.machine_type}), {worst.expected_attempts:.2f} attempts per completed group; "
            "`spotbench market SPEC` shows the statistics")
    else:
        notes.append("no retries: no history of this sweep's preemptions yet (happy path)")
    if ticks is None:
        notes.append("no schedule: no per-month figures (one tick = one `spotbench run`)")
    rows, prices = _price_rows(spec, catalog, region, [disk_row, sched_row, inv_row, gbs_row])
    approx = sorted({r.item for r in [disk_row, sched_row, inv_row, gbs_row] if r.approximate})
    if approx:
        notes.append("approximate prices: " + ", ".join(approx))
    return Estimate(
        sweep=spec.name, cloud=spec.cloud, region=region, groups=groups, per_tick=per_tick,
        per_month=per_month, ticks_per_month=ticks, self_stop_saving_tick=saving_tick,
        self_stop_saving_month=saving_tick * ticks if ticks is not None else None,
        assumptions=notes, assumed=a.as_dict(), overridden=sorted(a.overridden),
        budget=spec.budget,
        schedule=f"'{spec.schedule.cron}' {spec.schedule.timezone}" if spec.schedule else None,
        prices=prices, price_warning=price_notes.stale(rows, spec.cloud, region, now),
    )


def _price_rows(spec: SweepSpec, catalog: Catalog, region: str | None,
                others: list[Any]) -> tuple[list[Any], list[str]]:
    """The rows that priced the estimate (machine and GPU of every group, plus `others`) and
    the lines naming their tables and dates, per zone where a price differs by zone."""
    rows, zones = list(others), []
    for g in spec.plan():
        for mtype in sorted({member_type(g, m) for m in g.members}):
            row = catalog.find(spec.cloud, region, "machine", mtype, spec.spot, spec.zone)
            rows.append(row)
            zones.append(price_notes.by_zone(
                mtype, catalog.by_zone(spec.cloud, region, "machine", mtype, spec.spot), row))
        if g.accelerator and g.accelerator_count:
            rows.append(catalog.find(spec.cloud, region, "gpu", g.accelerator, spec.spot))
    used = price_notes.used(rows, getattr(catalog, "tables", []))
    return rows, used + sorted({z for z in zones if z})


def _after_free_tier(ln: Line, free: float) -> Line:
    if not free:
        return ln
    billed = max(0.0, ln.quantity - free)
    return Line(ln.item, billed, ln.unit, ln.unit_usd, billed * ln.unit_usd,
                f"{ln.note}; {ln.quantity:g} less {free:g} free per month" if ln.note
                else f"{ln.quantity:g} less {free:g} free per month")
