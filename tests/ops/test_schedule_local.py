"""Schedule control of a local sweep: schedule.json for pause/resume (what the runner's
in-process scheduler honours) and run-now over HTTP with the scheduler's bearer token."""

from __future__ import annotations

import pytest

from spotbench.auth import Unauthorized
from spotbench.auth.local import caller_from_headers
from spotbench.clouds.local.state import LocalState
from spotbench.clouds.local.schedule import LocalSchedule, NoFunctionsServer
from tests.ops._http import LocalHttp

RUN = "0123456789abcdef"  # the run (session) the recorded functions server serves


def test_pause_and_resume_write_the_state_file(tmp_path):
    control = LocalSchedule("osu", root=tmp_path)
    control.pause()
    assert LocalState("osu", root=tmp_path).paused is True
    assert control.state()[0] is True
    control.resume()
    assert LocalState("osu", root=tmp_path).paused is False


def test_run_now_without_a_server_says_how_to_start_one(tmp_path):
    control = LocalSchedule("osu", root=tmp_path)
    with pytest.raises(NoFunctionsServer, match="spotbench run SPEC --on-schedule"):
        control.run_now()
    LocalState("osu", root=tmp_path).functions = {"url": "http://127.0.0.1:9", "pid": 1, "session": RUN}
    with pytest.raises(NoFunctionsServer, match="not running"):
        control.run_now()


def test_run_now_posts_start_as_the_scheduler(tmp_path):
    state = LocalState("osu", root=tmp_path)
    secret = state.secret()

    def handle(method, path, headers, body):
        try:
            caller = caller_from_headers(headers, secret, RUN)
        except Unauthorized as exc:
            return 401, {"error": str(exc)}
        if caller.kind != "scheduler":
            return 403, {"error": f"not the scheduler: {caller.kind}"}
        return 200, {"action": path.strip("/"), "run": "r1", "started": ["g1"], "running": [],
                     "refused": [{"group": "g2", "reason": "budget 1 USD is spent"}], "pending": 0}

    with LocalHttp(handle) as http:
        state.functions = {"url": http.url, "pid": 0, "session": RUN}
        message = LocalSchedule("osu", root=tmp_path).run_now()
        (method, path, _, body), = http.calls
        assert (method, path) == ("POST", "/start") and "tick" in body
        # a sentence, not the answer's dict (this asserted the repr before issue #27)
        assert message == ("osu: start fired now: run r1; started 1 group(s) (g1); "
                           "g2 refused: budget 1 USD is spent")
        (tmp_path / "osu" / "secret").write_text("0" * 64)  # another (well-formed) secret → refused
        with pytest.raises(RuntimeError, match="401"):
            LocalSchedule("osu", root=tmp_path).run_now()
