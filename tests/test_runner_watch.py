"""The local runner's watch loop, driven without processes: which run it follows."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from spotbench import control
from spotbench.localrun import runner
from spotbench.results import ResultStore
from tests.test_control import MemoryCloud

from spotbench.spec import load_spec


class Seen(Exception):
    pass


def test_on_schedule_follows_each_new_tick_not_the_first_answer(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "POLL_S", 0.01)
    spec = load_spec({"name": "w", "workload": {"name": "osu"}, "trials": 1,
                      "schedule": {"cron": "0 3 * * *"}})
    groups = spec.plan()
    store = ResultStore(f"file://{tmp_path}")
    sweep = control.Sweep(spec=spec, cloud=MemoryCloud(groups), store=store, groups=groups)
    first = store.open_run()
    store.close_run(first.run, "complete")  # yesterday's tick: over
    scheduler = SimpleNamespace(answers=[{"action": "start", "run": first.run}], state=None)
    server = SimpleNamespace(proc=None, url="http://127.0.0.1:9")
    calls = []

    def on_progress(p: runner.Progress) -> None:
        calls.append(p.run)
        if len(calls) == 3:  # today's tick arrives
            second = store.open_run()
            scheduler.answers.append({"action": "start", "run": second.run})
        if p.run is not None and p.run != first.run:
            raise Seen(p.run)
        assert len(calls) < 50, f"still watching {set(calls)}"

    with pytest.raises(Seen) as seen:
        runner._watch(sweep, scheduler, server, "token", True, on_progress, [])
    assert seen.value.args[0] == store.current_run().run
