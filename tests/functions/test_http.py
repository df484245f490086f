"""The functions over real HTTP: the functions-framework server, a local cloud, tokens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import requests

from spotbench.auth.local import member_token, scheduler_token
from spotbench.clouds.base import State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState
from spotbench.results import Result, ResultStore, utcnow
from spotbench.spec import load_spec

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


class Env:
    def __init__(self, root: Path, results_url: str | None = None, extra_env: dict | None = None,
                 **spec_fields):
        self.spec = load_spec({"name": "fx", "workload": {"name": "osu"}, "trials": 2, **spec_fields})
        self.groups = self.spec.plan()
        self.results_url = results_url or f"file://{root}/results"
        self.state = LocalState("fx", root / "state")
        self.secret = self.state.secret()
        self.cloud = LocalCloud(self.state.db_path, grace_s=2, log_dir=self.state.dir / "logs")
        self.cloud.deploy([
            LocalInstanceSpec(name=m.name, labels=g.member_labels(m), command=SLEEPER, env={})
            for g in self.groups for m in g.members
        ])
        env = {
            "SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": self.spec.model_dump_json(),
            "SPOTBENCH_RESULTS_URL": self.results_url,
            "SPOTBENCH_STATE_DIR": str(self.state.dir), "SPOTBENCH_GRACE_S": "2",
            **(extra_env or {}),
        }
        self.server = FunctionsServer(env, root / "functions.log").start()

    def post(self, path: str, body=None, token: str | None = None, raw: bytes | None = None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if raw is not None:
            return requests.post(self.server.url + path, data=raw, headers=headers, timeout=30)
        return requests.post(self.server.url + path, json=body, headers=headers, timeout=30)

    def scheduler(self) -> str:
        return scheduler_token(self.secret, self.server.session)

    def member(self, group_index: int, member_index: int = 0) -> tuple[str, str]:
        name = self.groups[group_index].members[member_index].name
        return name, member_token(self.secret, name)

    def close(self) -> None:
        self.server.stop()
        self.cloud.terminate({"spotbench-sweep": "fx"})


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env(tmp_path_factory.mktemp("functions"))
    yield e
    e.close()


def test_no_or_wrong_token_is_401(env: Env) -> None:
    assert env.post("/start", {}).status_code == 401
    resp = env.post("/start", {}, token="scheduler.deadbeef")
    assert resp.status_code == 401 and resp.json() == {"error": "invalid bearer token"}
    name, _ = env.member(0)
    forged = member_token("another-secret", name)
    assert env.post("/done", {"group": env.groups[0].id}, token=forged).status_code == 401


def test_malformed_bodies_are_400_with_a_reason(env: Env) -> None:
    name, token = env.member(0)
    resp = env.post("/done", raw=b"{not json", token=token)
    assert resp.status_code == 400 and "not valid JSON" in resp.json()["error"]
    resp = env.post("/done", {"group": env.groups[0].id, "colour": "red"}, token=token)
    assert resp.status_code == 400 and "colour" in resp.json()["error"]
    assert env.post("/stop", {"groups": "all"}, token=env.scheduler()).status_code == 400
    assert requests.get(env.server.url + "/start", timeout=10).status_code == 405


def test_members_may_not_start(env: Env) -> None:
    _, token = env.member(0)
    assert env.post("/start", {}, token=token).status_code == 403


def test_cycle_start_done_stopped_with_duplicates(env: Env) -> None:
    first = env.post("/start", {"tick": "t"}, token=env.scheduler())
    assert first.status_code == 200, first.text
    started = first.json()["started"]
    assert started == [env.groups[0].id]
    dup = env.post("/start", {"tick": "t"}, token=env.scheduler())  # at-least-once delivery
    assert dup.status_code == 200 and dup.json()["started"] == []
    assert dup.json()["run"] == first.json()["run"]
    g0 = env.groups[0]
    env.cloud.wait(g0.labels, {State.RUNNING}, timeout=20)
    assert len([i for i in env.cloud.query({"spotbench-sweep": "fx"}) if i.state == State.RUNNING]) == 2

    # a member of group 0 may not stop group 1, and nothing is stopped by trying
    _, token0 = env.member(0, 1)
    resp = env.post("/done", {"group": env.groups[1].id}, token=token0)
    assert resp.status_code == 403 and "only its own group" in resp.json()["error"]
    assert all(i.state == State.RUNNING for i in env.cloud.query(g0.labels))

    # the workload stores its result, then calls done: its group stops, the next one starts
    now = utcnow()
    ResultStore(env.results_url).write_group(first.json()["run"], g0.id, [Result(
        sweep="fx", run=first.json()["run"], group=g0.id, trial=1, workload="osu",
        metric="latency", value=1.0, unit="us", cloud="local", machine_type="local",
        started_at=now, ended_at=now)])
    resp = env.post("/done", {"group": g0.id}, token=token0)
    assert resp.status_code == 200, resp.text
    assert resp.json()["stopped"] == sorted(m.name for m in g0.members)
    env.cloud.wait(g0.labels, {State.STOPPED}, timeout=20)
    assert resp.json()["started"] == [env.groups[1].id]
    again = env.post("/done", {"group": g0.id}, token=token0)  # a retried done is harmless
    assert again.status_code == 200
    env.post("/stop", {"reason": "deadline"}, token=env.scheduler())
    env.cloud.wait({"spotbench-sweep": "fx"}, {State.STOPPED}, timeout=20)


def test_unexpected_errors_are_500_json_without_a_trace(tmp_path: Path) -> None:
    # a corrupt price file of the deployment: nothing the caller can fix (a corrupt run
    # ledger used to be the example; the store's readers now skip it, issue 24)
    prices = tmp_path / "prices.csv"
    prices.write_text("cloud,region,kind,item,provisioning,unit,usd\nlocal,*,machine,local,,hour,lots\n")
    e = Env(tmp_path, results_url=f"file://{tmp_path}/results",
            extra_env={"SPOTBENCH_PRICES": str(prices)}, budget=1.0)
    try:
        resp = e.post("/start", {}, token=e.scheduler())
        assert resp.status_code == 500
        assert resp.json() == {"error": "internal error in start; see the function's log"}
        assert "Traceback" not in resp.text
    finally:
        e.close()
    assert "Traceback" in (tmp_path / "functions.log").read_text()


def test_a_results_store_that_cannot_be_written_is_503_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the results folder should be")
    e = Env(tmp_path, results_url=f"file://{blocker}/results")
    try:
        resp = e.post("/start", {}, token=e.scheduler())
        assert resp.status_code == 503  # the scheduler retries; the log and answer say why
        error = resp.json()["error"]
        assert error.startswith("start: results store file://") and "not-a-dir" in error
        assert "Traceback" not in resp.text
        assert e.cloud.query({}) and all(i.state == State.STOPPED for i in e.cloud.query({}))
    finally:
        e.close()


def test_budget_refusal_over_http_keeps_the_group_queued(tmp_path: Path) -> None:
    prices = tmp_path / "prices.csv"  # local "VMs" at 36 USD/h: a 1 h deadline costs 72 USD a group
    prices.write_text("cloud,region,kind,item,provisioning,unit,usd,bundled_gpu,date,source,note\n"
                      "local,*,machine,local,,hour,36,,2026-11-22,test,expensive on purpose\n")
    e = Env(tmp_path, extra_env={"SPOTBENCH_PRICES": str(prices)}, budget=10)
    try:
        resp = e.post("/start", {}, token=e.scheduler())
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        assert answer["started"] == []
        assert [r["group"] for r in answer["refused"]] == [g.id for g in e.groups]
        assert "budget 10.00 USD would be exceeded" in answer["refused"][0]["reason"]
        assert {i.state for i in e.cloud.query({"spotbench-sweep": "fx"})} == {State.STOPPED}
    finally:
        e.close()
    assert "budget: group" in (tmp_path / "functions.log").read_text()
    # the run stays open: with the budget raised, the next tick starts the queued group
    raised = Env(tmp_path, extra_env={"SPOTBENCH_PRICES": str(prices)}, budget=500)
    try:
        again = raised.post("/start", {}, token=raised.scheduler()).json()
        assert again["run"] == answer["run"] and again["started"] == [e.groups[0].id]
    finally:
        raised.close()
