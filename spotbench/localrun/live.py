"""Terminal side of `spotbench run`: progress with the elapsed time (a live line on a
terminal, plain lines otherwise), each retry announced once as a sentence, a summary in
sentences, the report; or, with `--json`, the outcome as one JSON document on stdout (the
progress goes to stderr)."""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from pathlib import Path
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from spotbench import control
from spotbench.terminal import TerminalConsole, log_handler
from spotbench.localrun.outcome import RunOutcome
from spotbench.localrun.runner import Progress, run_local
from spotbench.spec import SweepSpec

PLAIN_EVERY_S = 30.0  # without a terminal: a progress line when it changes, or this often


def elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _line(p: Progress, since: float) -> str:
    running = f" ({', '.join(sorted(p.running))})" if p.running else ""
    failed = f" · {len(p.failed)} failed" if p.failed else ""  # a failed group is never complete
    return (f"{elapsed(time.monotonic() - since)} · {len(p.completed - p.failed)}/{p.total} groups "
            f"complete{failed} · {p.message}{running}")


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


class _Reporter:
    """on_progress: new events printed once each; the progress line live on a terminal, as
    plain lines (when it changes, or every PLAIN_EVERY_S) otherwise."""

    def __init__(self, console: Console):
        self.console = console
        self.since = time.monotonic()
        self.shown_events = 0
        self.last_plain = ("", 0.0)
        self.live: Live | None = None

    def __call__(self, p: Progress) -> None:
        for event in p.events[self.shown_events:]:
            self.console.print(Text(event, style="yellow"), highlight=False, soft_wrap=True)
        self.shown_events = len(p.events)
        line = _line(p, self.since)
        if self.live is not None:
            self.live.update(Text(line))
            return
        state = line.split(" · ", 1)[1]
        last_state, last_at = self.last_plain
        if state != last_state or time.monotonic() - last_at >= PLAIN_EVERY_S:
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)
            self.last_plain = (state, time.monotonic())


def fault_sentences(faults: list[dict], deadline_s: float) -> list[str]:
    """What the runner noticed, one sentence per kind and group (counted), never a dict."""
    counts = Counter((f.get("fault", "?"), f.get("group")) for f in faults)
    out = []
    for (kind, group), n in counts.items():
        times = "" if n == 1 else f" {n} times"
        if kind == "deadline overrun":
            out.append(f"{group} passed its {deadline_s:g} s deadline{times} and was stopped each time "
                       f"(each group gets up to {control.MAX_LAUNCHES_PER_RUN} attempts per run)")
        elif kind == "member lost":
            out.append(f"{group} lost a member{times} and was stopped whole to be retried")
        elif kind == "functions server died":
            out.append(f"the functions server died{times} and was restarted on its port")
        elif kind == "orphaned functions server":
            out.append("a functions server left by a killed run was stopped and its port taken over")
        else:
            sample = next(f for f in faults if f.get("fault") == kind and f.get("group") == group)
            detail = "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(sample.items())
                               if k not in ("fault", "group"))
            out.append(f"{kind}{' in ' + group if group else ''}{times}" + (f": {detail}" if detail else ""))
    return out


def as_dict(outcome: RunOutcome, report: dict[str, str] | None) -> dict[str, Any]:
    """`spotbench run --json`: the outcome, every group's end and why."""
    return {
        "sweep": outcome.sweep, "run": outcome.run, "ok": outcome.ok, "results": outcome.results_url,
        "groups": outcome.states,
        "failures": {g: {"reason": f.reason, "exit_code": f.exit_code, "stderr_tail": f.stderr_tail}
                     for g, f in outcome.failures.items()},
        "refused": outcome.refused, "faults": outcome.faults, "error": outcome.error,
        "logs": str(outcome.state_dir / "logs"), "report": report,
    }


def run_with_progress(spec: SweepSpec, *, on_schedule: bool, grace_s: float,
                      report_dir: Path | None, as_json: bool = False,
                      show_answer: Callable[[list], None] | None = None) -> tuple[RunOutcome, dict | None]:
    """Run SPEC locally showing progress; returns the outcome and the report's paths.
    `show_answer`: prints the report's ranking (the CLI's table) once the report is written."""
    console = TerminalConsole(stderr=as_json)
    logging.basicConfig(level=logging.WARNING, handlers=[log_handler("%(levelname)s %(name)s: %(message)s")])
    console.print(f"[bold]{spec.name}[/]: {len(spec.plan())} groups on the local cloud"
                  f"{' (waiting for cron ticks)' if on_schedule else ''}", highlight=False, markup=True)
    reporter = _Reporter(console)
    if console.is_terminal:
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            reporter.live = live
            outcome = run_local(spec, on_schedule=on_schedule, grace_s=grace_s, on_progress=reporter)
    else:
        outcome = run_local(spec, on_schedule=on_schedule, grace_s=grace_s, on_progress=reporter)
    took = elapsed(time.monotonic() - reporter.since)
    _summary(console, outcome, spec.deadline.total_seconds(), took)
    report = None
    if report_dir is not None and outcome.run:
        from spotbench.report import write_report
        from spotbench.report.trials import objectives_of_spec

        # a search's report opens with its best trial (the spec's search.objective, if any)
        paths = write_report(outcome.results_url, report_dir, objectives=objectives_of_spec(spec))
        report = {"markdown": str(paths.markdown.resolve()), "html": str(paths.html.resolve())}
        if show_answer is not None:
            show_answer(paths.rankings)
        console.print(f"report:  {report['markdown']}", highlight=False, markup=False)
        console.print(f"         {report['html']}", highlight=False, markup=False)
    if as_json:
        import json

        sys.stdout.write(json.dumps(as_dict(outcome, report), indent=2, default=str) + "\n")
    return outcome, report


def _summary(console: Console, outcome: RunOutcome, deadline_s: float, took: str) -> None:
    table = Table(title=f"run {outcome.run} · {took}")
    table.add_column("group")
    table.add_column("result")
    refused = {r["group"]: r["reason"] for r in outcome.refused}
    for gid in outcome.completed:
        table.add_row(gid, Text("complete", style="green"))
    for gid in sorted(g for g, state in outcome.states.items() if state == "pruned"):
        table.add_row(gid, Text("pruned (the search's pruner stopped it early)", style="cyan"))
    for gid in outcome.incomplete:
        why = outcome.states.get(gid, "incomplete")
        if gid in refused:
            table.add_row(gid, Text(f"refused: {refused[gid]}", style="yellow"))
        elif gid in outcome.failures:
            table.add_row(gid, Text(f"failed: {outcome.failures[gid].reason}", style="red"))
        else:
            table.add_row(gid, Text(f"incomplete: {why}", style="red"))
    console.print(table, highlight=False)
    for gid, failure in sorted(outcome.failures.items()):
        console.print(Text(f"{gid} failed: {failure.reason}", style="bold red"), highlight=False)
        if failure.stderr_tail:
            console.print(Text("  its stderr ends with:\n" + _indent(failure.stderr_tail)),
                          highlight=False)
    for sentence in fault_sentences(outcome.faults, deadline_s):
        console.print(Text.assemble(("noticed: ", "yellow"), sentence), highlight=False, soft_wrap=True)
    if outcome.error:
        console.print(Text.assemble(("run cut short: ", "bold red"), outcome.error), highlight=False)
    console.print(f"results: {outcome.results_url}", highlight=False, markup=False)
    console.print(f"logs:    {outcome.state_dir / 'logs'}", highlight=False, markup=False)
