"""Read the numbers a user's command reports: JSON lines in its results folder, or on its
stdout either `name=value unit` lines or JSON lines.

JSON line (one object per line, in any `*.jsonl` file):
    {"metric": "latency", "value": 1.9, "unit": "us", "labels": {"size": 8}}
`unit` and `labels` are optional; labels are kept with the value (the report shows them).

stdout line (the whole line, surrounding spaces ignored), either form:
    latency=1.9 us          name: letters, digits, `_ . - /`; value: a number; unit: optional
    {"metric": "latency", "value": 1.9, "unit": "us"}     the JSON line above

Anything else is ignored (a command prints what it likes); a line that looks like a JSON
metric but is not valid is reported as a problem, never silently dropped. So is a value
that is not finite (`throughput=1e999` is inf: JSON cannot hold it) or out of the stored
range, a name longer than `MAX_NAME_LEN` or a unit longer than `MAX_UNIT_LEN`, a line longer
than `MAX_LINE` (read no further than that), JSON nested past what the parser takes, labels
over `MAX_LABELS` bytes, and every value past `MAX_RECORDS`. Each is refused alone, with a
note; the rest of the output is kept (issue 38).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotbench.results import MAX_NAME_LEN, MAX_RECORDS, MAX_UNIT_LEN, value_problem

MAX_LINE = 64 * 1024  # characters of one metric line
MAX_LABELS = 2048  # bytes of one metric's labels as JSON (10^4 of them fit one attempt file)

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


def from_stdout(text: str, problems: list[str] | None = None) -> list[Metric]:
    """The metrics on stdout (`stdout_metrics`); refused lines are added to `problems`."""
    found, why = stdout_metrics(text)
    if problems is not None:
        problems.extend(why)
    return found


def stdout_metrics(text: str) -> tuple[list[Metric], list[str]]:
    """Every metric on stdout (`name=value unit` lines and JSON metric lines), and the
    problems (`stdout:line: what is wrong`) of refused ones: out of bounds (`_bounds`), past
    `MAX_RECORDS`, or JSON objects naming a `metric` that are not valid metrics. Other JSON a
    command prints (logs) is ignored."""
    out: list[Metric] = []
    problems: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = STDOUT_LINE.match(line) if len(line) <= MAX_LINE else None
        why = None
        if len(line) > MAX_LINE:
            why = f"a line of more than {MAX_LINE} characters" if _looks_like_metric(line) else None
        elif m:
            why = _bounds(m["name"], float(m["value"]), m["unit"] or "")
            if why is None and len(out) >= MAX_RECORDS:
                why = f"more than {MAX_RECORDS} values"
            if why is None:
                out.append(Metric(m["name"], float(m["value"]), m["unit"] or ""))
        elif _looks_like_metric(line):
            try:
                metric = from_json_line(line.strip())
            except ValueError as exc:
                why = str(exc)
            else:
                if len(out) >= MAX_RECORDS:
                    why = f"more than {MAX_RECORDS} values"
                else:
                    out.append(metric)
        if why is not None and len(problems) < 100:
            problems.append(f"stdout:{n}: {why}")
    return out, problems


def _looks_like_metric(line: str) -> bool:
    """A JSON metric line (or what tries to be one): other lines are the command's own."""
    head = line[:MAX_LINE]
    return head.strip().startswith("{") and '"metric"' in line


def _bounds(name: str, value: float, unit: str) -> str | None:
    why = value_problem(value)
    if why:
        return f"'value' {why}"
    if len(name) > MAX_NAME_LEN:
        return f"'metric' must have at most {MAX_NAME_LEN} characters, got {len(name)}"
    if len(unit) > MAX_UNIT_LEN:
        return f"'unit' must have at most {MAX_UNIT_LEN} characters, got {len(unit)}"
    return None


def from_json_line(line: str) -> Metric:
    """One JSON metric line; ValueError saying what is wrong."""
    if len(line.rstrip("\r\n")) > MAX_LINE:
        raise ValueError(f"a line of more than {MAX_LINE} characters")
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    name, value = obj.get("metric"), obj.get("value")
    if not isinstance(name, str) or not name:
        raise ValueError("'metric' must be a non-empty string")
    why = value_problem(value)
    if why:
        raise ValueError(f"'value' {why}")
    unit, labels = obj.get("unit", ""), obj.get("labels", {})
    if not isinstance(unit, str):
        raise ValueError(f"'unit' must be a string, got {unit!r}")
    why = _bounds(name, float(value), unit)
    if why:
        raise ValueError(why)
    if not isinstance(labels, dict):
        raise ValueError(f"'labels' must be an object, got {str(labels)[:40]!r}")
    size = len(json.dumps(labels, default=str))
    if size > MAX_LABELS:
        raise ValueError(f"'labels' take {size} bytes as JSON (at most {MAX_LABELS})")
    return Metric(name, float(value), unit, labels)


def _bounded_lines(fh: Any) -> Any:
    """The lines of a text file, each read at most `MAX_LINE` + 1 characters far: a longer
    line comes as its first `MAX_LINE` + 1 characters (refused by `from_json_line`), the rest
    of it skipped unread into memory."""
    while True:
        line = fh.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE and not line.endswith("\n"):
            while (rest := fh.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
        yield line


def from_folder(folder: Path) -> tuple[list[Metric], list[str]]:
    """Every metric of every `*.jsonl` file under `folder` (sorted by path), and the problems
    (`file:line: what is wrong`)."""
    metrics: list[Metric] = []
    problems: list[str] = []
    for path in sorted(folder.rglob("*.jsonl")):
        with path.open(errors="replace") as fh:
            for n, line in enumerate(_bounded_lines(fh), 1):
                if not line.strip():
                    continue
                if len(metrics) >= MAX_RECORDS:
                    problems.append(f"{path.relative_to(folder)}:{n}: more than {MAX_RECORDS} values")
                    return metrics, problems
                try:
                    metrics.append(from_json_line(line))
                except ValueError as exc:
                    if len(problems) < 100:
                        problems.append(f"{path.relative_to(folder)}:{n}: {exc}")
    return metrics, problems
