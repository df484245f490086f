"""Attack: one group's VM forges another group's result so that group is never run.

With `concurrency: 1` group B waits while group A runs. A member of A stores, at a path
its own identity may write (`runs/<run>/<A>.<n>.jsonl`), records that claim group B, then
calls `done` over the real local functions server. The reader must take the group from
the path and reject the disagreeing file (and log it): B stays pending, A is retried, and
once A stores its own records B runs.
"""

from __future__ import annotations

import logging

import pytest
import requests

from spotbench.results import Result, ResultStore, utcnow
from tests.security._server import LocalFunctions

pytestmark = pytest.mark.security


def records(fx, run: str, group: str, n: int = 2) -> list[Result]:
    now = utcnow()
    return [Result(sweep=fx.spec.name, run=run, group=group, trial=1, workload="osu",
                   metric="latency", value=1.0 + i, unit="us", cloud="local",
                   machine_type="local", started_at=now, ended_at=now) for i in range(n)]


def call(fx, path: str, token: str, body: dict) -> dict:
    resp = requests.post(fx.url + path, json=body, headers={"Authorization": f"Bearer {token}"},
                         timeout=60)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_a_record_claiming_another_group_is_rejected(tmp_path, caplog):
    with LocalFunctions(tmp_path, name="fg", concurrency=1) as fx:
        a, b = fx.groups[0].id, fx.groups[1].id
        started = call(fx, "/start", fx.scheduler, {})
        assert started["started"] == [a]
        run = started["run"]
        store = ResultStore(f"file://{tmp_path}/results")
        # A's member writes under A's own name — what its identity may write — claiming B
        path = store.write_group(run, a, records(fx, run, b))
        assert path.endswith(f"/{a}.1.jsonl")

        with caplog.at_level(logging.WARNING, logger="spotbench.results"):
            assert store.completed_groups(run) == set()
            assert store.read(run) == []
        assert any("rejected" in r.message and b in r.message for r in caplog.records)

        done = call(fx, "/done", fx.member(0, 0), {"group": a})
        assert done["completed"] == 0 and done["pending"] == 1, done  # B is not done; A retried
        # A is pending again: retried whole once its members are off (never while stopping)
        assert done["stopping"] == [a] and done["started"] == [b], done

        store.write_group(run, a, records(fx, run, a))  # A's honest result
        done = call(fx, "/done", fx.member(0, 0), {"group": a})
        assert done["completed"] == 1 and done["started"] == [] and done["running"] == [b], done
        assert store.completed_groups(run) == {a}
