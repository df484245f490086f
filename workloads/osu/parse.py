"""Parse the text the OSU micro-benchmarks print (the C binaries and our mpi4py harness alike).

OSU's point-to-point output, as documented and printed by v5.x–v7.x:

    # OSU MPI Latency Test v7.5            title: benchmark and version
    # Datatype: MPI_CHAR.                  optional preamble comments (any order, 7.x)
    # Size       Avg Latency(us)           column header: "# Size" + value column(s)
    0                       0.25           one row per message size
    1                       0.26

Older releases print `# Size          Latency (us)` before the `# Datatype` line; `-c`
adds a `Validation` column (Pass/Fail). The parser is strict: a missing title or header,
a row with the wrong number of columns, a non-numeric or negative value, or sizes that do
not increase is a `OsuParseError` naming the line, never a guess. `OsuStream` parses line by
line so a launcher can record rows while the benchmark is still running; a line without its
newline (the output ended mid-row, even when mpiexec exits 0) is held back and never becomes
a value: "1024   107" may be "1024   1076.29" cut short.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_TITLE = re.compile(r"^# OSU MPI(?:-[A-Z ]+)? (?P<name>.+?) Test(?: v(?P<version>\S+))?\s*$")
_COLUMNS = re.compile(r"\s{2,}")

# title → (benchmark, metric unit); the value column header must mention the unit.
BENCHMARKS = {
    "Latency": ("latency", "us"),
    "Bi-Directional Bandwidth": ("bibw", "MB/s"),
    "Bandwidth": ("bw", "MB/s"),
}
_UNIT_IN_HEADER = {"us": "(us)", "MB/s": "(MB/s)"}


class OsuParseError(ValueError):
    """The text is not OSU point-to-point output; the message says which line and why."""


@dataclass
class OsuOutput:
    benchmark: str  # latency | bibw | bw
    title: str  # "OSU MPI Latency Test v7.5"
    version: str | None  # "7.5"
    unit: str  # us | MB/s
    columns: list[str]  # header columns after "Size", e.g. ["Avg Latency(us)"]
    preamble: dict[str, str] = field(default_factory=dict)  # {"Datatype": "MPI_CHAR."}
    rows: list[tuple[int, float]] = field(default_factory=list)  # (size bytes, value)
    extra: list[dict[str, str]] = field(default_factory=list)  # per row: other columns

    def to_dict(self) -> dict:
        return {
            "benchmark": self.benchmark, "version": self.version, "unit": self.unit,
            "columns": self.columns, "preamble": self.preamble,
            "rows": [[s, v] for s, v in self.rows], "extra": self.extra,
        }


class OsuStream:
    """Feed lines one at a time; `feed` returns the (size, value) row a line completed."""

    def __init__(self) -> None:
        self.out: OsuOutput | None = None
        self._header_seen = False
        self._lineno = 0
        self.unfinished: str | None = None  # a last line that never got its newline

    def _fail(self, line: str, why: str) -> OsuParseError:
        return OsuParseError(f"line {self._lineno}: {why}: {line.rstrip()!r}")

    def feed(self, line: str) -> tuple[int, float] | None:
        """Parse one line as read from the output, newline included. A line without one is
        the end of output cut mid-line: it is held in `unfinished`, not parsed."""
        if self.unfinished is not None:
            line, self.unfinished = self.unfinished + line, None
        if not line.endswith("\n"):
            self.unfinished = line if line.strip() else None
            return None
        self._lineno += 1
        text = line.strip()
        if not text:
            return None
        if self.out is None:
            return self._title(text)
        if text.startswith("#"):
            self._comment(text)
            return None
        if not self._header_seen:
            raise self._fail(text, "data row before the '# Size …' column header")
        return self._row(text)

    def _title(self, text: str) -> None:
        m = _TITLE.match(text)
        if not m:
            raise self._fail(text, "expected an OSU title like '# OSU MPI Latency Test v7.5'")
        name = m.group("name")
        if name not in BENCHMARKS:
            raise self._fail(text, f"unsupported OSU benchmark {name!r} (known: {', '.join(BENCHMARKS)})")
        benchmark, unit = BENCHMARKS[name]
        self.out = OsuOutput(benchmark=benchmark, title=text.lstrip("# ").strip(),
                             version=m.group("version"), unit=unit, columns=[])
        return None

    def _comment(self, text: str) -> None:
        assert self.out is not None
        body = text.lstrip("#").strip()
        if body.startswith("Size"):
            if self._header_seen:
                raise self._fail(text, "a second '# Size' header")
            columns = [c for c in _COLUMNS.split(body[len("Size"):].strip()) if c]
            if not columns:
                raise self._fail(text, "the '# Size' header names no value column")
            if _UNIT_IN_HEADER[self.out.unit] not in columns[0]:
                raise self._fail(text, f"first value column should be in {self.out.unit}")
            self.out.columns = columns
            self._header_seen = True
            return
        if self.out.rows:
            raise self._fail(text, "comment line after data rows")
        key, sep, value = body.partition(":")
        self.out.preamble[key.strip() if sep else body] = value.strip() if sep else ""

    def _row(self, text: str) -> tuple[int, float]:
        assert self.out is not None
        cells = text.split()
        expected = 1 + len(self.out.columns)
        if len(cells) != expected:
            raise self._fail(text, f"{len(cells)} columns, the header has {expected}")
        try:
            size = int(cells[0])
        except ValueError:
            raise self._fail(text, f"message size {cells[0]!r} is not an integer") from None
        try:
            value = float(cells[1])
        except ValueError:
            raise self._fail(text, f"value {cells[1]!r} is not a number") from None
        if size < 0 or not math.isfinite(value) or value < 0:
            raise self._fail(text, "size and value must be finite and >= 0")
        if self.out.rows and size <= self.out.rows[-1][0]:
            raise self._fail(text, f"size {size} does not increase (previous {self.out.rows[-1][0]})")
        self.out.rows.append((size, value))
        self.out.extra.append(dict(zip(self.out.columns[1:], cells[2:], strict=True)))
        return size, value

    def result(self, *, partial: bool = False) -> OsuOutput:
        """The parsed output; unless `partial`, it must have a header and at least one row."""
        if self.out is None:
            raise OsuParseError("no OSU title line ('# OSU MPI … Test vX') in the output")
        if not partial and not self._header_seen:
            raise OsuParseError("no '# Size …' column header in the output")
        if not partial and not self.out.rows:
            raise OsuParseError("the output has a header but no data rows")
        if not partial and self.unfinished is not None:
            raise OsuParseError(f"the output ends mid-line (no newline): {self.unfinished!r} "
                                "was cut short and is not recorded")
        return self.out


def parse(text: str, *, partial: bool = False) -> OsuOutput:
    """Parse one benchmark's whole output. `partial=True` accepts a run cut short: an
    unfinished last line (no newline) is dropped and zero rows are allowed."""
    lines = text.splitlines(keepends=True)
    stream = OsuStream()
    for line in lines:
        stream.feed(line)
    return stream.result(partial=partial)
