"""Typed reading of the record metadata the report uses: a value of the wrong type (from
a member's or a user's container's results file) is skipped and reported, never raised.

    fields, problems = read_meta(record.metadata)
"""

from __future__ import annotations

import math
from typing import Any

# field → (what it must be, a check)
_INT = ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
FIELDS: dict[str, tuple[str, Any]] = {
    "size_bytes": _INT,
    "cpu_count": _INT,
    "host_cores": _INT,
    "members": ("a whole number", lambda v: _INT[1](v) and v >= 0),
    "member_types": ("a list of machine type names",
                     lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v)),
    "placement": ("a name", lambda v: isinstance(v, str)),
    "accelerator_count": _INT,
    "scaling": ("{axis: name, base: number}",
                lambda v: isinstance(v, dict) and isinstance(v.get("axis"), str) and _number(v.get("base"))),
    "work": ("{epochs: number} or {steps: number}",
             lambda v: isinstance(v, dict) and len(v) == 1 and next(iter(v)) in ("epochs", "steps")
             and _number(next(iter(v.values())))),
}
def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


MAX_SHOWN = 60  # characters of a bad value quoted in the report


def read_meta(meta: object) -> tuple[dict[str, Any], list[str]]:
    """The fields of `FIELDS` present in `meta` and well typed, and one line per bad one."""
    if not isinstance(meta, dict):
        return {}, [f"metadata is not a mapping ({_short(meta)}): ignored"]
    out: dict[str, Any] = {}
    problems: list[str] = []
    for name, (what, ok) in FIELDS.items():
        if name not in meta or meta[name] is None:
            continue
        value = meta[name]
        if isinstance(value, float) and value.is_integer() and math.isfinite(value) and what.startswith("a whole"):
            value = int(value)
        if ok(value):
            out[name] = value
        else:
            problems.append(f"metadata.{name} {_short(value)} is not {what}: ignored")
    return out, problems


def typed_records(records: list) -> tuple[list, list[str]]:
    """`records` (Result) with every badly typed `FIELDS` value dropped from their metadata
    (what re-pricing reads, spotbench.costs), and one line per value dropped."""
    out, problems = [], []
    for r in records:
        meta, bad = read_meta(r.metadata)
        if bad:
            kept = {k: v for k, v in r.metadata.items() if k not in FIELDS or k in meta}
            r = r.model_copy(update={"metadata": kept})
            problems += [f"{r.group} {r.metric}: {p}" for p in bad]
        out.append(r)
    return out, problems


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"
