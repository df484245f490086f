"""Schedule control of a local sweep: `schedule.json` steers the runner's in-process
scheduler (it skips start ticks while paused; the deadline stop still fires), and run-now
POSTs the start function of the sweep's running functions server with the scheduler token.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import requests

from spotbench.auth.local import scheduler_token
from spotbench.ops.context import local_state


class NoFunctionsServer(RuntimeError):
    pass


class LocalSchedule:
    def __init__(self, sweep: str, root: Path | str | None = None, timeout_s: float = 120):
        self.sweep = sweep
        self.local = local_state(sweep, root)
        self.timeout_s = timeout_s

    def pause(self) -> str:
        self.local.update_schedule(paused=True)
        return f"{self.sweep}: paused; start ticks are skipped, the deadline stop still fires"

    def resume(self) -> str:
        self.local.update_schedule(paused=False)
        return f"{self.sweep}: resumed; the next start tick will fire"

    def run_now(self) -> str:
        url = self.local.functions.get("url")
        hint = f"start it with `spotbench run SPEC --on-schedule` (sweep {self.sweep})"
        if not url:
            raise NoFunctionsServer(f"no functions server is recorded for {self.sweep}; {hint}")
        token = scheduler_token(self.local.secret())
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
        body = reply.json()
        return f"{self.sweep}: start fired now: {body}"

    def state(self) -> tuple[bool | None, str, dict[str, str]]:
        paused = bool(self.local.schedule["paused"])
        return paused, "local in-process scheduler", {"schedule.json": "PAUSED" if paused else "ENABLED"}
