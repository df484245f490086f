"""How a local run ends: `RunOutcome` (each group's final state, the faults noticed, the
error that cut it short), `RunError` when it cannot go on, and one line naming the file
and the fix for a local state that cannot be used."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spotbench import control
from spotbench.failures import Failure, failures
from spotbench.clouds.local.state import StateError
from spotbench.results import StoreError


class RunError(RuntimeError):
    """The run cannot go on (results store unwritable, functions unreachable); nothing is
    left running when it is raised."""


@dataclass
class RunOutcome:
    sweep: str
    run: str | None
    results_url: str
    completed: list[str]
    incomplete: list[str]
    refused: list[dict]
    state_dir: Path
    answers: list[dict]
    states: dict[str, str] = field(default_factory=dict)  # group → complete/preempted/…
    faults: list[dict] = field(default_factory=list)  # what the runner noticed and did
    error: str | None = None  # why the run was cut short, if it was
    failures: dict[str, Failure] = field(default_factory=dict)  # group → why its command failed

    @property
    def ok(self) -> bool:
        return not self.incomplete and self.error is None


def state_failure(exc: BaseException, db_path: Path) -> str:
    """One line for a local state that cannot be used: which file, why, and the fix."""
    if isinstance(exc, (StateError, StoreError, RunError)):
        return str(exc)
    text = str(exc)
    if "full" in text:
        fix = f"free space on the disk holding {db_path.parent}, then run again"
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        fix = (f"remove {db_path} (and its -wal, -shm files; spotbench makes it anew) and "
               "run again")
    else:
        fix = f"check {db_path.parent} is writable by you, then run again"
    return f"the local cloud's instance table {db_path} failed ({text}): {fix}"


def final_states(sweep: control.Sweep, run: str, completed: set[str],
                 failed: frozenset[str] | set[str] = frozenset()) -> dict[str, str]:
    """Each group's end, in one word: complete, preempted, contaminated, failed (its command
    failed, or it stored nothing), gave up (kept failing), stopped by user (`spotbench
    stop`), refused (budget), pruned (a search's pruner stopped it) or not run."""
    store = sweep.store
    attempts = store.attempts(run)
    flags = store.flags(run)
    by_user = store.user_stopped(run)
    pruned = store.pruned_groups(run)
    out = {}
    for group in sweep.groups:
        mine = [a for a in attempts if a.group == group.id]
        launches = store.launch_count(run, group.id)
        if group.id in by_user and group.id not in completed:
            out[group.id] = "stopped by user"
        elif group.id in pruned:
            out[group.id] = "pruned"
        elif group.id in failed:
            out[group.id] = "failed"
        elif group.id in completed:
            out[group.id] = "complete"
        elif launches >= control.MAX_LAUNCHES_PER_RUN:
            out[group.id] = "gave up"
        elif mine and (mine[-1].key in flags or mine[-1].contaminated):
            out[group.id] = "contaminated"
        elif mine:
            out[group.id] = "preempted"
        elif launches:
            out[group.id] = "failed"
        else:
            out[group.id] = "not run"
    return out


def outcome_of(sweep: control.Sweep, results_url: str, answers: list[dict], run_id: str | None,
               state_dir: Path, faults: list[dict], error: str | None) -> RunOutcome:
    """What a run came to: each group complete or not and why, the faults, the error."""
    store = sweep.store
    completed = store.completed_groups(run_id) if run_id else set()
    failed = {g: f for (_, g), f in failures(store.read(run_id)).items()} if run_id else {}
    completed -= set(failed)  # stored and over, not retried, but no success
    refused = [r for a in answers for r in a.get("refused", [])]
    states = final_states(sweep, run_id, completed, set(failed)) if run_id else {}
    errors = [a["error"] for a in answers if a.get("error")]
    return RunOutcome(
        sweep=sweep.spec.name, run=run_id, results_url=results_url,
        completed=sorted(completed),
        incomplete=sorted({g.id for g in sweep.groups} - completed
                          - (store.pruned_groups(run_id) if run_id else set())),
        refused=list({r["group"]: r for r in refused}.values()), state_dir=state_dir,
        answers=answers, states=states, faults=faults,
        error=error or (errors[-1] if errors else None), failures=failed,
    )
