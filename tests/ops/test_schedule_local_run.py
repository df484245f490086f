"""A paused local sweep starts nothing over a tick, with the lead's real pieces: the
functions-framework server, the in-process LocalScheduler, the local cloud. Run-now (our
control) still starts it; the stop tick still stops it; teardown then stops the server."""

from __future__ import annotations

import sys

from spotbench.auth.local import scheduler_token
from spotbench.clouds import State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.localrun.scheduler import LocalScheduler
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState
from spotbench.clouds.local.orphans import LocalSweeper
from spotbench.clouds.local.schedule import LocalSchedule
from spotbench.ops.teardown import teardown
from spotbench.results import ResultStore
from spotbench.spec import load_spec

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_paused_sweep_starts_nothing_over_a_tick(tmp_path):
    spec = load_spec({"name": "osu", "cloud": "local", "workload": {"name": "osu"},
                      "schedule": {"cron": "0 3 * * *"}, "deadline": "10m",
                      "results": str(tmp_path / "results")})
    root = tmp_path / "state"
    state = LocalState("osu", root=root)
    cloud = LocalCloud(state.db_path, grace_s=2, log_dir=state.dir / "logs")
    group = spec.plan()[0]
    cloud.deploy([LocalInstanceSpec(m.name, group.member_labels(m), SLEEP) for m in group.members])
    env = {"SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": spec.model_dump_json(),
           "SPOTBENCH_RESULTS_URL": spec.results_url(), "SPOTBENCH_STATE_DIR": str(state.dir),
           "SPOTBENCH_GRACE_S": "2"}
    server = FunctionsServer(env, state.dir / "logs" / "functions.log").start()
    scheduler = LocalScheduler(spec, state, server.url, scheduler_token(state.secret(), server.session), spec.deadline)
    scheduler.run(now=False, on_schedule=True)  # the cron itself: next tick at 03:00
    try:
        state.functions = server.record()
        control = LocalSchedule("osu", root=root)
        control.pause()
        assert scheduler.start_tick() is None  # the cron tick is skipped
        assert {i.state for i in cloud.query({})} == {State.STOPPED}
        assert ResultStore(spec.results_url()).runs() == []

        message = control.run_now()  # an operator's run-now goes through while paused
        assert "start fired now" in message
        assert {i.state for i in cloud.wait({}, {State.RUNNING}, timeout=60)} == {State.RUNNING}

        scheduler.stop_tick()  # the deadline stop still fires for the running group
        assert {i.state for i in cloud.wait({}, {State.STOPPED}, timeout=60)} == {State.STOPPED}

        report = teardown("osu", LocalSweeper(root, grace_s=2), yes=True, echo=lambda _: None)
        assert not report.failed and {r.kind for r in report.removed} == {"functions-server", "instance"}
        assert server.proc.wait(timeout=30) is not None  # the server was stopped by teardown
        assert cloud.query({}) == []
    finally:
        scheduler.shutdown()
        server.stop()
        cloud.terminate({})
