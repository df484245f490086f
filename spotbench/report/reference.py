"""`--reference FILE`: published or earlier numbers beside the measured ones, with the ratio.

The CSV uses the Result schema's column names: at least `machine_type`, `metric`, `value`;
optionally `unit`, `size_bytes` (OSU), `workers` (TF), `source`, and `metadata`/`params` as
JSON objects (their `size_bytes`/`workers` are used when the plain columns are absent).
Measured = the mean of complete (not preempted) values with the same keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from spotbench.report.data import fmt
from spotbench.report.document import Document, Heading, Para, TableBlock

KEYS = ["machine_type", "metric", "size_bytes", "workers"]


def _json_field(value, key):
    if isinstance(value, str) and value.strip().startswith("{"):
        return json.loads(value).get(key)
    return None


def load(path: Path) -> pd.DataFrame:
    ref = pd.read_csv(path)
    missing = {"machine_type", "metric", "value"} - set(ref.columns)
    if missing:
        raise ValueError(f"--reference {path}: missing columns {sorted(missing)} "
                         "(use the Result columns: machine_type, metric, value, unit, size_bytes, workers)")
    for key, holder in (("size_bytes", "metadata"), ("workers", "params")):
        if key not in ref.columns:
            ref[key] = [_json_field(v, key) for v in ref[holder]] if holder in ref.columns else None
    ref["size_bytes"] = pd.to_numeric(ref["size_bytes"], errors="coerce")
    ref["workers"] = pd.to_numeric(ref["workers"], errors="coerce")
    return ref


def join(df: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    measured = df[~df["preempted"]].assign(
        workers=[p.get("workers") for p in df.loc[~df["preempted"], "params"]],
    )
    measured["size_bytes"] = pd.to_numeric(measured["size_bytes"], errors="coerce")
    measured["workers"] = pd.to_numeric(measured["workers"], errors="coerce")
    means = measured.groupby(KEYS, dropna=False)["value"].agg(["mean", "size"]).reset_index()
    out = ref.merge(means, how="left", on=KEYS)
    out = out.rename(columns={"value": "reference", "mean": "measured", "size": "n"})
    out["ratio"] = out["measured"] / out["reference"]
    return out


def section(df: pd.DataFrame, doc: Document, reference: Path | None):
    if reference is None:
        return [], []
    joined = join(df, load(reference))
    doc.add(Heading("Measured vs reference"))
    matched = int(joined["measured"].notna().sum())
    doc.add(Para(f"Reference: {reference.name} · {matched} of {len(joined)} reference rows matched "
                 "measured values (ratio = measured / reference; unmatched rows show —)."))
    shown = pd.DataFrame({
        "instance type": joined["machine_type"],
        "metric": joined["metric"],
        "size (B)": [fmt(v, 0) if pd.notna(v) else "" for v in joined["size_bytes"]],
        "workers": [fmt(v, 0) if pd.notna(v) else "" for v in joined["workers"]],
        "unit": joined["unit"] if "unit" in joined else "",
        "measured": [fmt(v) for v in joined["measured"]],
        "reference": [fmt(v) for v in joined["reference"]],
        "ratio": [fmt(v) for v in joined["ratio"]],
        "source": joined["source"] if "source" in joined else "",
    })
    doc.add(TableBlock(shown, "Measured (mean of complete trials) beside the reference"))
    long = joined[KEYS + ["measured", "reference", "ratio"]].melt(id_vars=KEYS, var_name="column")
    long.insert(0, "table", "reference")
    return [], [long]
