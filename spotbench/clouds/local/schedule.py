"""Schedule control of a local sweep: `schedule.json` steers the runner's in-process
scheduler (it skips start ticks while paused; the deadline stop still fires), and run-now
POSTs the start function of the sweep's running functions server with the scheduler token.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import requests

from spotbench.auth.local import scheduler_token
from spotbench.clouds.local.state import LocalState, state_root
from spotbench.ledger import MAX_LAUNCHES_PER_RUN as MAX_TRIES


class NoFunctionsServer(RuntimeError):
    pass


def start_answer(body: dict) -> str:
    """The start function's answer as a sentence (`--json` shows it whole)."""
    run = body.get("run", "?")
    if body.get("closed"):
        return f"run {run} is already closed; nothing started"
    parts = [f"run {run}"]
    started = body.get("started") or []
    parts.append(f"started {len(started)} group(s)" + (f" ({', '.join(started)})" if started else ""))
    for key, words in (("running", "still running"), ("stopping", "still stopping")):
        if body.get(key):
            parts.append(f"{len(body[key])} {words}")
    if body.get("pending"):
        parts.append(f"{body['pending']} waiting for a free slot")
    for refused in body.get("refused") or []:
        parts.append(f"{refused.get('group')} refused: {refused.get('reason')}")
    if body.get("gave_up"):
        parts.append(f"gave up on {', '.join(body['gave_up'])} (failed {MAX_TRIES} times)")
    return "; ".join(parts)


class LocalSchedule:
    def __init__(self, sweep: str, root: Path | str | None = None, timeout_s: float = 120):
        self.sweep = sweep
        self.local = LocalState(sweep, root=state_root(root))
        self.timeout_s = timeout_s

    def pause(self) -> str:
        self.local.update_schedule(paused=True)
        return f"{self.sweep}: paused; start ticks are skipped, the deadline stop still fires"

    def resume(self) -> str:
        self.local.update_schedule(paused=False)
        return f"{self.sweep}: resumed; the next start tick will fire"

    def run_now(self) -> str:
        noted = self.local.functions
        url, session = noted.get("url"), noted.get("session")
        hint = f"start it with `spotbench run SPEC --on-schedule` (sweep {self.sweep})"
        if not url or not isinstance(session, str):
            raise NoFunctionsServer(f"no functions server is recorded for {self.sweep}; {hint}")
        try:
            token = scheduler_token(self.local.secret(), session)  # the running server's run
        except ValueError:
            raise NoFunctionsServer(f"{self.local.dir}/functions.json names no valid run "
                                    f"(session {session!r}); {hint}") from None
        try:
            reply = requests.post(
                url.rstrip("/") + "/start",
                json={"tick": datetime.now(UTC).isoformat()},
                headers={"Authorization": f"Bearer {token}"},
                timeout=self.timeout_s,
            )
        except requests.ConnectionError:
            raise NoFunctionsServer(f"the functions server at {url} is not running; {hint}") from None
        if reply.status_code != 200:
            raise RuntimeError(f"start answered {reply.status_code}: {reply.text.strip()}")
        return f"{self.sweep}: start fired now: {start_answer(reply.json())}"

    def state(self) -> tuple[bool | None, str, dict[str, str]]:
        paused = bool(self.local.schedule["paused"])
        return paused, "local in-process scheduler", {"schedule.json": "PAUSED" if paused else "ENABLED"}
