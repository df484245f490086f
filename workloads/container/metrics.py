"""Read the numbers a user's command reports: JSON lines in its results folder, or on its
stdout either `name=value unit` lines or JSON lines.

JSON line (one object per line, in any `*.jsonl` file):
    {"metric": "latency", "value": 1.9, "unit": "us", "labels": {"size": 8}}
`unit` and `labels` are optional; labels are kept with the value (the report shows them).

stdout line (the whole line, surrounding spaces ignored), either form:
    latency=1.9 us          name: letters, digits, `_ . - /`; value: a number; unit: optional
    {"metric": "latency", "value": 1.9, "unit": "us"}     the JSON line above

Anything else is ignored (a command prints what it likes); a line that looks like a JSON
metric but is not valid is reported as a problem, never silently dropped.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STDOUT_LINE = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_.\-/]*)\s*=\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?:\s+(?P<unit>\S+))?\s*$"
)


@dataclass(frozen=True)
class Metric:
    metric: str
    value: float
    unit: str = ""
    labels: dict[str, Any] = field(default_factory=dict)


def from_stdout(text: str) -> list[Metric]:
    return stdout_metrics(text)[0]


def stdout_metrics(text: str) -> tuple[list[Metric], list[str]]:
    """Every metric on stdout (`name=value unit` lines and JSON metric lines), and the
    problems (`stdout:line: what is wrong`) of lines that are JSON objects naming a `metric`
    but are not valid metrics. Other JSON a command prints (logs) is ignored."""
    out: list[Metric] = []
    problems: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = STDOUT_LINE.match(line)
        if m:
            out.append(Metric(m["name"], float(m["value"]), m["unit"] or ""))
        elif line.strip().startswith("{"):
            try:
                out.append(from_json_line(line.strip()))
            except ValueError as exc:
                if '"metric"' in line:
                    problems.append(f"stdout:{n}: {exc}")
    return out, problems


def from_json_line(line: str) -> Metric:
    """One JSON metric line; ValueError saying what is wrong."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    name, value = obj.get("metric"), obj.get("value")
    if not isinstance(name, str) or not name:
        raise ValueError("'metric' must be a non-empty string")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"'value' must be a finite number, got {value!r}")
    unit, labels = obj.get("unit", ""), obj.get("labels", {})
    if not isinstance(unit, str):
        raise ValueError(f"'unit' must be a string, got {unit!r}")
    if not isinstance(labels, dict):
        raise ValueError(f"'labels' must be an object, got {labels!r}")
    return Metric(name, float(value), unit, labels)


def from_folder(folder: Path) -> tuple[list[Metric], list[str]]:
    """Every metric of every `*.jsonl` file under `folder` (sorted by path), and the problems
    (`file:line: what is wrong`)."""
    metrics: list[Metric] = []
    problems: list[str] = []
    for path in sorted(folder.rglob("*.jsonl")):
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                metrics.append(from_json_line(line))
            except ValueError as exc:
                problems.append(f"{path.relative_to(folder)}:{n}: {exc}")
    return metrics, problems
