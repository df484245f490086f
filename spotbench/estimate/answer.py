"""An estimate's figures (`Line`, `GroupCost`, `Estimate`) and the answer in words that
comes first (`headline`): per run, per month, the disks billed while stopped, the budget."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from spotbench.estimate.assumptions import DEFAULT_MONTH_DAYS


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
    provisioning: str = "spot"  # `spot`, or `spot (chief: standard)`: how its members are priced


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
        return sum(ln.usd for ln in self.per_month
                   if ln.item == "disk" and "billed while stopped" in ln.note)

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
    elif est.schedule == "once":
        first += (" (schedule: once: nothing stands before or after it; "
                  "`spotbench run` deploys, runs and tears down, the results bucket kept)")
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



def search_summary(est: Estimate, trials: int, repeats: int) -> dict[str, Any]:
    """A search priced whole (issue #35): its trials × repeats, USD per trial, and how many
    trials the budget pays for (control asks no trial the remaining budget cannot pay)."""
    per_run = est.budgeted_run_usd if est.budgeted_run_usd is not None else est.run_usd
    per_trial = per_run / trials if trials else None
    covered = (None if est.budget is None or not per_trial
               else min(trials, math.floor(est.budget / per_trial + 1e-9)))
    return {"trials": trials, "repeats": repeats, "groups": trials * repeats, "usd": est.run_usd,
            "usd_per_trial": per_trial, "budget_trials": covered}


def search_line(summary: dict[str, Any]) -> str:
    text = (f"search: {summary['trials']} trials × {summary['repeats']} "
            f"repeat{'s' if summary['repeats'] != 1 else ''} ≈ {usd(summary['usd'])} in all")
    if summary["usd_per_trial"] is not None:
        text += f" ({usd(summary['usd_per_trial'])} a trial)"
    covered = summary["budget_trials"]
    if covered is not None and covered < summary["trials"]:
        text += (f"; the budget pays for {covered} of them: control asks no trial the remaining "
                 "budget cannot pay")
    return text
