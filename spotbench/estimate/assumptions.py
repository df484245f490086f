"""What `estimate` assumes (`Assumptions`), each value overridable with
`--assume KEY=VALUE`, parsed with errors that name the key and the allowed form."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from spotbench.clouds import get_provider
from spotbench.costs import HOURS_PER_MONTH
from spotbench.spec import SweepSpec

DEFAULT_FUNCTION_MB = 512.0  # what infra/gcp (available_memory 512M) and infra/aws (memory_size=512) deploy
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
                         function invocations, GB- and vCPU-seconds, disk, bucket, egress,
                         where the cloud gives one); off: list prices
    nat_gb_per_tick      GB through the NAT per tick (image pulls, package downloads)
    egress_gb_per_tick   GB sent to the internet per tick (results stay in the region: 0)
    bucket_gb            GB kept in the results bucket (records, logs, checkpoints)
    stack_s              `schedule: once`: seconds the stack stands beside the VMs' run
                         (`pulumi up` before the start, `pulumi destroy` after the run)
    """

    boot_s: float
    disk_type: str
    run_s: float | None = None
    function_s_per_call: float = DEFAULT_FUNCTION_S
    function_mb: float = DEFAULT_FUNCTION_MB
    calls_per_tick: float | None = None
    month_days: float = DEFAULT_MONTH_DAYS
    free_tier: bool = False
    nat_gb_per_tick: float = 0.0
    egress_gb_per_tick: float = 0.0
    bucket_gb: float = 1.0
    stack_s: float = 900.0
    overridden: frozenset[str] = frozenset()

    @classmethod
    def for_spec(cls, spec: SweepSpec, overrides: list[str] | dict[str, Any] | None = None) -> Assumptions:
        provider = get_provider(spec.cloud)
        base = cls(boot_s=provider.facts.boot_s, disk_type=provider.disk(spec)[0])
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
                   "disk_type", "month_days", "free_tier", "nat_gb_per_tick", "egress_gb_per_tick",
                   "bucket_gb", "stack_s")
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


