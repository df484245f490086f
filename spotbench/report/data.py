"""Records → one flat DataFrame the report sections share.

Adds: `size_bytes` (from metadata), `config` (machine type, accelerator and any workload
parameter that varies across the records, e.g. `n1-standard-2 · workers=4`), `sample`
(the trial label shown as a table column) and `members` (VMs of the group, if known).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pandas as pd

from spotbench.facts import known_facts
from spotbench.failures import is_failure
from spotbench.report.meta import FIELDS, read_meta
from spotbench.report.numbers import num
from spotbench.results import Result

# Parameters that never distinguish configurations in a table.
_IGNORED_PARAMS = {"name", "dataset_url"}


def frame(records: list[Result]) -> pd.DataFrame:
    """`df.attrs["problems"]`: one line per metadata value skipped for its type."""
    rows = []
    problems: list[str] = []
    for r in records:
        row = r.model_dump()
        meta, bad = read_meta(row.get("metadata") or {})
        problems += [f"{r.group} {r.metric}: {p}" for p in bad]
        raw = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        row["metadata"] = {**raw, **meta, **{k: None for k in FIELDS if k in raw and k not in meta}}
        row["size_bytes"] = meta.get("size_bytes")
        row["cpu_count"] = meta.get("cpu_count", meta.get("host_cores"))
        row["members"] = meta.get("members")
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["problems"] = problems
    if df.empty:
        return df
    df["config"] = _config_labels(df)
    df["sample"] = _sample_labels(df)
    return df


def varying_params(df: pd.DataFrame) -> list[str]:
    """Workload parameters whose value differs between records of the same workload."""
    out: set[str] = set()
    for _, sub in df.groupby("workload"):
        keys: set[str] = set().union(*(p.keys() for p in sub["params"]))
        for key in keys - _IGNORED_PARAMS:
            values = {json.dumps(p.get(key), sort_keys=True, default=str) for p in sub["params"]}
            if len(values) > 1:
                out.add(key)
    return sorted(out)


def _config_labels(df: pd.DataFrame) -> pd.Series:
    varying = varying_params(df)
    placements = df["metadata"].map(lambda m: (m or {}).get("placement") or "none")
    show_placement = placements.nunique() > 1
    labels = []
    for idx, row in df.iterrows():
        parts = [str(row["machine_type"]) + _other_types(row)]
        if row.get("accelerator"):
            parts.append(str(row["accelerator"]))
        facts = known_facts(row["cloud"])
        if row.get("spot") and (facts is None or facts.spot_label):
            parts.append("spot")
        if show_placement:
            parts.append(f"placement={placements[idx]}")
        for key in varying:
            if key in row["params"] and key != "workers":
                parts.append(f"{key}={param_text(row['params'][key])}")
        labels.append(" · ".join(parts))
    return pd.Series(labels, index=df.index)


def param_text(value: Any) -> str:
    """A parameter as a person writes it: `N=1000000 M=2` for a dict (env), a command as a
    shell line, never a Python repr."""
    if isinstance(value, dict):
        return " ".join(f"{k}={param_text(v)}" for k, v in sorted(value.items())) or "none"
    if isinstance(value, list | tuple):
        return shlex.join(str(v) for v in value) if all(isinstance(v, str) for v in value) \
            else ", ".join(param_text(v) for v in value)
    return str(value)


def _other_types(row: pd.Series) -> str:
    """` (+1× n1-standard-4)` for members on another type than the group's (role_machine_types)."""
    types = (row.get("metadata") or {}).get("member_types") or []
    others: dict[str, int] = {}
    for t in types:
        if t != row["machine_type"]:
            others[t] = others.get(t, 0) + 1
    return f" (+{', '.join(f'{n}× {t}' for t, n in sorted(others.items()))})" if others else ""


def _sample_labels(df: pd.DataFrame) -> pd.Series:
    """`trial N`, or `<run> trial N` when a configuration has several runs."""
    runs_per_config = df.groupby("config")["run"].nunique()
    return pd.Series(
        [
            f"trial {t}" if runs_per_config[c] == 1 else f"{run} trial {t}"
            for c, run, t in zip(df["config"], df["run"], df["trial"], strict=True)
        ],
        index=df.index,
    )


def measured(df: pd.DataFrame) -> pd.Series:
    """True for a record that is a measurement of a complete attempt: not preempted and not
    part of a failed attempt (`spotbench.failures`: its marker and any value it reported)."""
    return ~df["preempted"].astype(bool) & ~df["metadata"].map(is_failure).astype(bool)


def trial_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: trials complete, preempted/incomplete (excluded), total."""
    per_trial = df.groupby(["config", "run", "trial"])["preempted"].agg(
        complete=lambda s: bool((~s).any())
    )
    per_trial["preempted"] = ~per_trial["complete"]
    counts = per_trial.groupby("config")[["complete", "preempted"]].sum().astype(int)
    counts["total"] = counts["complete"] + counts["preempted"]
    return counts


def fmt(value: Any, digits: int = 4) -> str:
    """A table cell for people (`numbers.num`): four significant digits, never rounding the
    integer part, thousands separators, no trailing zeros or exponent (28,750; 1.12; 127),
    `—` for a missing value; `digits=0` rounds to a whole number (counts); other `digits`
    are accepted from older callers and ignored. Unrounded values: summary.csv, records.csv."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and digits == 0 \
            and not pd.isna(value):
        return num(round(value))
    return num(value)


# Trials of one point whose coefficient of variation exceeds this are flagged in the report.
SPREAD_FLAG_CV = 0.10


# With this many rows (sizes × configurations) a table measures its own noise: a row is
# flagged when its trials disagree NOISE_FACTOR times more than the table's median row does
# (and beyond SPREAD_FLAG_CV) — on a busy host every row is noisy, and `!` marks none of the
# usual noise, only what stands out of it (#39).
NOISE_ROWS = 3
NOISE_FACTOR = 2.0


def spread(values: pd.DataFrame) -> pd.DataFrame:
    """Per row of `values` (one column per trial, NaN = no value): min, median, cv, n.

    cv = sample standard deviation / mean (NaN with fewer than two values); `flag` marks
    rows whose trials disagree beyond the threshold, `attrs["threshold"]`: SPREAD_FLAG_CV,
    or NOISE_FACTOR × the median cv of the rows when there are NOISE_ROWS or more (the noise
    this run measured), whichever is larger.
    """
    out = pd.DataFrame(index=values.index)
    out["min"] = values.min(axis=1, skipna=True)
    out["median"] = values.median(axis=1, skipna=True)
    mean = values.mean(axis=1, skipna=True)
    std = values.std(axis=1, skipna=True, ddof=1)
    out["cv"] = (std / mean).where(mean != 0)
    out["n"] = values.notna().sum(axis=1)
    measured = out["cv"].dropna()
    noise = float(measured.median()) if len(measured) >= NOISE_ROWS else 0.0
    threshold = max(SPREAD_FLAG_CV, NOISE_FACTOR * noise)
    out["flag"] = out["cv"] > threshold
    out.attrs["threshold"] = threshold
    out.attrs["noise"] = noise
    return out


# A trial is an outlier (Hampel's rule) when it lies more than this many scaled median absolute
# deviations from its point's median, and more than SPREAD_FLAG_CV of the median away (so
# identical trials with one slightly off are not called out).
OUTLIER_MADS = 3.0
_MAD_SCALE = 1.4826  # MAD → standard deviation for normal data


def outliers(values: pd.DataFrame) -> list[tuple[Any, str, float, float]]:
    """(row, trial column, value, the row's median) of every trial far from the others in its
    row (`OUTLIER_MADS`); rows with fewer than three values have none. A stalled or noisy
    trial shows up here even when it is not flagged contaminated."""
    out = []
    for row, series in values.iterrows():
        vals = series.dropna()
        if len(vals) < 3:
            continue
        median = float(vals.median())
        mad = float((vals - median).abs().median()) * _MAD_SCALE
        limit = max(OUTLIER_MADS * mad, SPREAD_FLAG_CV * abs(median))
        out += [(row, str(col), float(v), median) for col, v in vals.items()
                if abs(v - median) > limit]
    return out


def fmt_cv(cv: Any, flagged: bool) -> str:
    """A CV cell as a percentage, `!` when the trials disagree beyond the threshold."""
    if cv is None or pd.isna(cv):
        return "—"
    return f"{num(100 * cv, 3)}%" + (" !" if flagged else "")


def size_label(size: int) -> str:
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20}M"
    if size >= 1 << 10 and size % (1 << 10) == 0:
        return f"{size >> 10}K"
    return str(size)
