"""The report's list of contaminated attempts: each attempt a member found stalled (its own
loop made no progress for longer than its threshold, or its clocks disagreed: a stopped
process, a paused VM) or control flagged (it overlapped more groups than allowed), with
why. Their values read back as preempted, so no table below averages them; this section
says they were there and why they are left out (the values stay in records.csv). It adds
nothing when no attempt was flagged."""

from __future__ import annotations

import pandas as pd

from spotbench.report.document import Document, Heading, Para

REASON_KEY = "contaminated"  # metadata: why the attempt cannot be trusted (`ResultStore.read`)
MAX_REASON = 300  # characters of a reason shown (a member writes it: text, bounded)


def section(df: pd.DataFrame, doc: Document) -> list[str]:
    """Add the section to `doc`; returns one line per contaminated attempt."""
    found: dict[tuple[str, str, str], tuple[str, int]] = {}  # (run, group, started) → (why, values)
    for run, group, started, meta in zip(df["run"], df["group"], df["started_at"], df["metadata"],
                                         strict=True):
        why = meta.get(REASON_KEY) if isinstance(meta, dict) else None
        if not isinstance(why, str) or not why:
            continue
        key = (str(run), str(group), str(started))
        shown = why if len(why) <= MAX_REASON else why[:MAX_REASON] + "…"
        found[key] = (shown, found.get(key, (shown, 0))[1] + 1)
    if not found:
        return []
    lines = [f"Run {run}, group {group}, attempt started {started}: {why} ({n} value{'s' if n != 1 else ''})"
             for (run, group, started), (why, n) in sorted(found.items())]
    doc.add(Heading(f"Contaminated attempts: {len(found)} kept apart"))
    doc.add(Para("These attempts' numbers were taken across a stall (a member made no progress "
                 "for longer than its threshold, or its clocks disagreed: a stopped process, a "
                 "paused VM) or alongside more groups than the sweep allows. Their values are "
                 "kept in records.csv but are in no table or average below; each group was "
                 "retried within its retry budget."))
    for line in lines:
        doc.add(Para(line + "."))
    return lines
