"""A benchmark that failed, as its stored records say.

A workload whose command cannot start, exits non-zero or reports no metric stores one
marker record (metric `failed`, unit `flag`) whose metadata says why (`failure`), with the
command's exit code and the tail of its stderr (`stderr_tail`); any value it did report
carries the same `failure` key. The attempt is stored, not preempted: the group is over
for this run and is **not retried** (a command that exits 1 exits 1 again and bills again;
the next scheduled run tries it afresh). Everyone who shows a group's end reads it here:
`spotbench run` (exit 3), `status`, the report's failures banner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

FAILED_METRIC = "failed"
FAILED_UNIT = "flag"
FAILURE_KEY = "failure"  # metadata: why (one sentence)
TAIL_KEY = "stderr_tail"  # metadata: the last lines the command wrote on stderr
TAIL_LINES = 20
TAIL_CHARS = 2000


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last `lines` non-empty lines of `text`, at most `chars` characters."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]
    out = "\n".join(kept)
    return out if len(out) <= chars else "…" + out[-chars:]


def is_failure(metadata: Any) -> bool:
    """True for the marker and every value of a failed attempt (they are not measurements)."""
    return isinstance(metadata, dict) and bool(metadata.get(FAILURE_KEY))


@dataclass(frozen=True)
class Failure:
    run: str
    group: str
    reason: str
    stderr_tail: str = ""
    exit_code: int | None = None

    def line(self) -> str:
        """One sentence: the group, why, and the last line of its stderr."""
        last = self.stderr_tail.splitlines()[-1] if self.stderr_tail else ""
        return f"{self.group} failed: {self.reason}" + (f" (last stderr line: {last})" if last else "")


def failures(records: Iterable[Any]) -> dict[tuple[str, str], Failure]:
    """(run, group) → its Failure, for groups whose stored, not preempted attempt is a
    failure and that have no successful attempt in that run. `records` are `Result`s or
    rows with the same attributes (run, group, metric, preempted, metadata)."""
    found: dict[tuple[str, str], Failure] = {}
    succeeded: set[tuple[str, str]] = set()
    for r in records:
        key = (str(r.run), str(r.group))
        if bool(r.preempted):
            continue
        meta = r.metadata if isinstance(r.metadata, dict) else {}
        if not is_failure(meta):
            succeeded.add(key)
        elif r.metric == FAILED_METRIC:
            code = meta.get("exit_code")
            found[key] = Failure(key[0], key[1], str(meta[FAILURE_KEY]), str(meta.get(TAIL_KEY) or ""),
                                 code if isinstance(code, int) else None)
    return {k: f for k, f in found.items() if k not in succeeded}
