"""The `local` provider: every member is a process on this machine (`spotbench run`).

Its parts: the driver (`cloud.LocalCloud`), its state folder (`state`), the schedule
control steering the runner's in-process scheduler (`schedule`), the orphan finder
(`orphans`), HMAC callers (`spotbench.auth.local`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotbench.clouds.base import Sweeper
from spotbench.clouds.local.cloud import LocalCloud
from spotbench.clouds.local.orphans import LocalSweeper
from spotbench.clouds.local.schedule import LocalSchedule
from spotbench.clouds.local.state import LocalState, state_removed, state_root
from spotbench.clouds.provider import FunctionSettings, Provider, env_of
from spotbench.facts.local import FACTS

if TYPE_CHECKING:
    from spotbench.auth import Caller
    from spotbench.spec import SweepSpec


class LocalProvider(Provider):
    def driver(self, **options: Any) -> LocalCloud:
        return LocalCloud(**options)

    def cloud(self, spec: SweepSpec, env: Mapping[str, str] | None = None, *,
              root: Path | str | None = None, state_dir: Path | None = None) -> LocalCloud:
        env = env_of(env)
        state_dir = state_dir or (None if root else env.get("SPOTBENCH_STATE_DIR"))  # functions' env
        state = Path(state_dir) if state_dir else LocalState(spec.name, state_root(root)).dir
        return LocalCloud(db_path=state / "cloud.db", log_dir=state / "logs",
                          grace_s=float(env.get("SPOTBENCH_GRACE_S", "30")))

    def authenticate(self, headers: Mapping[str, str], settings: FunctionSettings) -> Caller:
        from spotbench.auth.local import SESSION_ENV, caller_from_headers

        return caller_from_headers(headers, settings.secret, settings.env.get(SESSION_ENV))

    def schedule(self, spec: SweepSpec, root: Path | str | None = None, **options: Any) -> LocalSchedule:
        return LocalSchedule(spec.name, root, **options)

    def orphans(self, spec: SweepSpec | None = None, *, root: Path | str | None = None,
                regions: list[str] | None = None, project: str | None = None) -> Sweeper:
        return LocalSweeper(state_root(root))

    def run_state_removed(self, spec: SweepSpec, root: Path | str | None = None,
                          logs_to: Path | None = None) -> Path | None:
        return state_removed(state_root(root) / spec.name, logs_to)


PROVIDER = LocalProvider(FACTS)
