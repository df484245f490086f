"""Text for a terminal: the one home of escaping what spotbench prints (issue 38).

Record text (metric names, machine types, zones, group ids, params, a failed command's
stderr), file names under `runs/` and exception messages are the writer's word. Printed
raw, an escape sequence in them would drive the operator's terminal (clear it, set its
title, paste into its input, hide lines) and Rich markup would restyle or break the output.

- `plain(text)`: control characters (C0 but newline and tab, DEL, C1) and the Unicode
  bidirectional overrides become visible escapes (`\\x1b`, `\\u202e`), so what a record holds
  shows as what it is;
- `TerminalConsole`: a Rich `Console` that parses no markup or emoji unless a call asks
  (`markup=True`, for spotbench's own literals only) and passes every text segment it
  renders through `plain` — tables, titles, `Text`, `Live` alike (its own cursor controls
  are control segments and stay);
- `PlainFormatter`: the same for log lines (the CLI's stderr).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(text: str) -> str:
    """`text` with every character a terminal would act on written as its escape."""
    return _UNSAFE.sub(_visible, text)


class TerminalConsole(Console):
    """A Rich console whose output holds no control character it was not asked to send."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        super().__init__(**kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not _UNSAFE.search(segment.text):
                yield segment
            else:
                yield Segment(plain(segment.text), segment.style)


class PlainFormatter(logging.Formatter):
    """Log records with `plain` text (a file name or a value a member chose)."""

    def format(self, record: logging.LogRecord) -> str:
        return plain(super().format(record))


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """The stderr of the moment (a test's capture, the CLI's), like logging's last resort."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        import sys

        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def log_handler(fmt: str = "%(message)s", level: int = logging.WARNING) -> logging.Handler:
    """A stderr handler writing `plain` log lines."""
    handler = _Stderr()
    handler.setLevel(level)
    handler.setFormatter(PlainFormatter(fmt))
    return handler


def escape_logs() -> None:
    """Log lines and Python warnings (a chart's missing glyph quotes the record's text)
    reaching the terminal without a configured handler (logging's last resort, what the
    CLI's commands use) are `plain`."""
    logging.lastResort = log_handler()
    logging.captureWarnings(True)
