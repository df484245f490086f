"""Helpers shared by the CLI modules: loading a spec with a clean exit on errors, and
printing messages that hold user text, and tables that fit the terminal (`fit_table`: ids whole,
optional columns dropped first, the rest folded; never `…`).

User text (spec values, file names, exception messages, record text) is never parsed as
Rich markup: `[bold]` in a value prints as `[bold]`, and `[/]` cannot crash the printer;
its control characters print as escapes (`spotbench.terminal`, the consoles below). Styled prefixes
are built with `rich.text.Text`, the message appended as plain text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from spotbench.cli import extras
from spotbench.spec import SpecError, SweepSpec, load_spec, spec_warnings
from spotbench.terminal import TerminalConsole, plain

# no markup unless a call asks (markup=True, spotbench's own literals), control characters
# escaped (spotbench.terminal): record text prints as what it is
console = TerminalConsole()
err_console = TerminalConsole(stderr=True, soft_wrap=True)

EXIT_BAD_INPUT = 2
current_cloud: str | None = None  # the cloud of the spec this command loaded (install hints)


def styled(prefix: str, style: str, message: str) -> Text:
    """`prefix` in `style`, then `message` verbatim (no markup, no highlighting)."""
    return Text.assemble((prefix, style), message)


def warn(message: str, prefix: str = "warning: ") -> None:
    err_console.print(styled(prefix, "yellow", message), highlight=False)


def spec_or_exit(path: Path) -> SweepSpec:
    """Load SPEC or print every problem and exit with code 2 (nothing is started).

    A Pulumi stack file (Pulumi.<stack>.yaml) is followed to its `spotbench:spec`. Names the
    shipped catalogs do not know (a newer machine type or zone) are printed as warnings."""
    try:
        spec = load_spec(path)
    except SpecError as exc:
        err_console.print(styled("invalid spec\n", "bold red", str(exc)), highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for field, value, message in spec_warnings(spec):
        shown = SpecError(str(path), [(field, value, message)]).render()
        warn(shown)
    global current_cloud
    current_cloud = spec.cloud
    return spec


def explained(exc: BaseException, cloud: str | None = None) -> str:
    """A missing extra as what to install (spotbench/cli/extras.py); any other error as it is."""
    return extras.explain(exc, cloud or current_cloud) or str(exc)


def credentials_problem(cloud: str) -> str | None:
    """Why this machine cannot call `cloud` (its SDK extra missing, or no credentials), as
    one line saying what to do; None when it can."""
    from spotbench.clouds import get_provider

    missing = extras.sdk_missing(cloud)
    if missing:
        return missing
    try:
        problem = get_provider(cloud).credentials_problem()
    except ModuleNotFoundError as exc:
        return explained(exc, cloud)
    return f"{cloud}: {problem}" if problem else None


def credentials_or_exit(cloud: str) -> None:
    """Before calling `cloud`: its extra is installed and this machine has credentials, or
    one line saying what to do and exit 1 — never the SDKs' retries and tracebacks."""
    problem = credentials_problem(cloud)
    if problem:
        fail(problem)


def fail(message: str, code: int = 1) -> None:
    err_console.print(styled("error: ", "bold red", message), highlight=False)
    raise typer.Exit(code)


def policy_or_exit(spec: SweepSpec, spec_path: Path | None) -> SweepSpec:
    """SPEC with its guardrails (spotbench/policy.py) applied: one line per violation and
    exit 2 when it breaks them; the returned spec carries the effective policy."""
    from spotbench.policy import PolicyError, effective

    try:
        carried, problems = effective(spec, spec_path)
    except PolicyError as exc:
        err_console.print(styled("invalid policy: ", "bold red", str(exc)), highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if problems:
        err_console.print(f"[bold red]spec {spec.name} breaks the policy[/]", highlight=False, markup=True)
        for line in problems:
            err_console.print(f"  - {line}", highlight=False, markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    return carried


# ---- tables that fit the terminal ------------------------------------------------------
_MIN_WRAP = 8  # a wrapped column narrower than this reads as a vertical smear
_MAX_WORD = 20  # a longer word in a folded column is folded too (not the table cropped)


@dataclass(frozen=True)
class Column:
    """One column of a terminal table (`fit_table`).

    key:  an identifier a user copies into another command (a group id for `ssh`): printed
          whole on one line, never cut, wrapped or dropped.
    drop: columns with a higher number go first when the terminal is too narrow (0: never);
          the rest wrap (fold) instead of being cut with `…`.
    """

    header: str
    justify: str = "left"
    key: bool = False
    drop: int = 0


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def fit_table(title: str, columns: list[Column], rows: list[list[str]],
              width: int | None = None) -> tuple[Table, list[str]]:
    """A Rich table of `rows` that fits `width` (default: the console's, e.g. COLUMNS=80):
    key columns whole, optional columns dropped (highest `drop` first) until every kept
    column has room, the rest folded. Returns the table and the headers left out (say so:
    `dropped_note`). Cells are plain text, never markup."""
    sizes = _Sizes(columns, [[plain(str(c)) for c in row] for row in rows], width or console.width)
    kept = sizes.kept()
    widths = sizes.widened(kept)
    fits = sum(widths.values()) <= sizes.room(kept)
    table = Table(title=title, title_justify="left")
    for i in kept:
        col = columns[i]
        table.add_column(col.header, justify=col.justify, no_wrap=col.key, overflow="fold",
                         width=widths[i] if fits else None, min_width=None if fits else sizes.need(i))
    for row in sizes.cells:
        table.add_row(*(Text(row[i]) for i in kept))
    return table, [columns[i].header for i in range(len(columns)) if i not in kept]


@dataclass
class _Sizes:
    """How wide each column of a table wants to be, and what fits in `width`."""

    columns: list[Column]
    cells: list[list[str]]
    width: int

    def natural(self, i: int) -> int:
        lines = [line for r in self.cells for line in r[i].splitlines() or [""]]
        return max([len(line) for line in lines] + [_longest_word(self.columns[i].header)])

    def need(self, i: int) -> int:
        if self.columns[i].key:
            return self.natural(i)
        words = max([_longest_word(r[i]) for r in self.cells] + [_longest_word(self.columns[i].header)])
        return min(self.natural(i), max(_MIN_WRAP, min(words, _MAX_WORD)))

    def room(self, kept: list[int]) -> int:  # for the cells: each column has 2 of padding and a rule
        return self.width - 3 * len(kept) - 1

    def kept(self) -> list[int]:
        """The columns shown: optional ones dropped (highest `drop` first) until every kept
        column has room, or none is left to drop."""
        kept = list(range(len(self.columns)))
        while sum(self.need(i) for i in kept) > self.room(kept):
            optional = [i for i in kept if self.columns[i].drop > 0]
            if not optional:
                break
            kept.remove(max(optional, key=lambda i: (self.columns[i].drop, i)))
        return kept

    def widened(self, kept: list[int]) -> dict[int, int]:
        """Each kept column's width: what it needs, the room left given to the folded
        columns toward their natural width, narrowest first."""
        widths = {i: self.need(i) for i in kept}
        spare = self.room(kept) - sum(widths.values())
        while spare > 0:
            short = [i for i in kept if widths[i] < self.natural(i)]
            if not short:
                break
            i = min(short, key=lambda i: widths[i] / self.natural(i))
            widths[i] += 1
            spare -= 1
        return widths


def dropped_note(dropped: list[str], more: str = "--json") -> str:
    """`(not shown at 80 columns: zone, age; widen the terminal or use --json)`."""
    if not dropped:
        return ""
    return (f"(not shown at {console.width} columns: {', '.join(dropped)}; "
            f"widen the terminal or use {more})")


def print_answer(rankings: list, to_stderr: bool = False) -> None:
    """The report's answer (spotbench/report/ranking.py) on the terminal, for `run` and
    `report`: per workload its sentences (the best by the metric, per USD, cost per result,
    the Pareto front) and the ranked table fitted to the terminal, the best marked ★."""
    out = err_console if to_stderr else console
    for r in rankings:
        for i, line in enumerate(r.lines()):
            out.print(Text(line, style="bold" if i == 0 else ""), highlight=False, soft_wrap=True)
        shown = r.shown().drop(columns=["Pareto"], errors="ignore")  # the sentences name the front
        drops = {"USD/h": 2, "#": 1}
        columns = [Column("configuration")] + [
            Column(str(c), "left" if c == "trials" else "right", drop=drops.get(str(c), 0))
            for c in shown.columns]
        rows = [[str(config), *(str(v) for v in row)] for config, row in shown.iterrows()]
        table, dropped = fit_table(f"ranked by {r.primary.title} (median ±CV); per USD: "
                                   "× the best's", columns, rows)
        out.print(table)
        if dropped:
            out.print(dropped_note(dropped, "the report"), highlight=False, markup=False)
