"""The control lock on the clouds: start/stop/done serialized by a lease in the results bucket.

Calls race as they do on a cloud: several start ticks at once, and a member's `done` while
start ticks arrive, each in its own thread with its own clients (as separate function
instances), against doubles that enforce the deployed identities:

- GCP: the local Google endpoint (compute + storage), every call checked against the
  declared roles (tests/fidelity/gcp_iam.py); the storage double honours `ifGenerationMatch`
  atomically (tests/clouds/fake_gcs.py).
- AWS: moto_server behind the IAM-enforcing front (tests/iam), the Lambda role holding the
  declared policy; the front makes moto's `If-None-Match`/`If-Match` checks atomic.

Both prove: one run opened, never more groups running than `max_concurrency` (sampled at
every cloud call), each group launched once, every answer 200 or a retryable 503.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import gcsfs
import pytest

from functions.app import FunctionConfig, handle
from spotbench.auth import Caller
from spotbench.clouds import get_provider
from spotbench.results import ResultStore
from workloads.common import WorkloadRun

pytestmark = [pytest.mark.faults, pytest.mark.fidelity]

N_TICKS = 4
TICK = "2026-01-05T03:00:00Z"


def race(calls: list[Callable[[], tuple[int, dict]]]) -> list[tuple[int, dict]]:
    """Run the calls at once (a barrier releases them together); their answers in order."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            out[i] = (-1, {"error": repr(exc)})

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return out


def check_answers(answers: list[tuple[int, dict]]) -> None:
    for status, body in answers:
        assert status == 200 or (status == 503 and body.get("retry_after_s")), (status, body)
    assert any(status == 200 for status, _ in answers)


def launches(store: ResultStore, run: str) -> list[str]:
    return sorted(p.rsplit("/", 1)[-1] for p in store._glob(store.path("runs", run, "launches", "*")))


# ---- GCP ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gcp() -> Iterator[Any]:
    from tests.clouds.google_endpoint import GoogleEndpoint
    from tests.fidelity.gcp_iam import DeclaredPolicy
    from tests.fidelity.test_gcp_permissions import (
        PROJECT, Enforcer, _spec, deploy, grant_apis, grant_front,
    )

    dep = deploy({**_spec("lk"), "trials": 3, "concurrency": 1})
    enforcer = Enforcer(DeclaredPolicy.from_declared(dep.declared, PROJECT))
    endpoint = GoogleEndpoint(authorize=enforcer)
    enforcer.endpoint = endpoint
    endpoint.gcs.add_bucket(dep.bucket)
    for inst in dep.instances:
        endpoint.gce.add(inst["name"], inst["zone"], labels=inst["labels"],
                         service_account=inst["serviceAccount"]["email"])
    endpoint.gce.project = PROJECT
    grant_apis(dep, endpoint)  # the member writes its records through `grant`
    front = grant_front(dep, endpoint, enforcer)
    yield dep, endpoint, enforcer
    front.close()
    endpoint.stop()


class Peak:
    """The most groups running at once, sampled after every compute call."""

    def __init__(self, gce: Any, running: Callable[[], set[str]]):
        self.value, self.gce, self.running = 0, gce, running
        self._handle = gce.handle
        gce.handle = self._sampled

    def _sampled(self, *args: Any) -> Any:
        out = self._handle(*args)
        self.value = max(self.value, len(self.running()))
        return out

    def close(self) -> None:
        self.gce.handle = self._handle


def test_gcp_concurrent_start_ticks_and_done_open_one_run_within_the_limit(gcp, monkeypatch):
    dep, endpoint, enforcer = gcp
    gce = endpoint.gce
    fn_sa = dep.function_sa
    url = endpoint.url_for(fn_sa)
    gcsfs.GCSFileSystem.clear_instance_cache()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # as deployed
    scheduler = dep.jobs[0]["httpTarget"]["oidcToken"]["serviceAccountEmail"]

    def call(action: str, body: dict, caller: Caller) -> Callable[[], tuple[int, dict]]:
        env = {**dep.function_env(action), "SPOTBENCH_GCP_API_ENDPOINT": url}
        return lambda: handle(action, body, caller, FunctionConfig(env))

    def running() -> set[str]:
        return {i["labels"]["spotbench-group"] for i in gce.instances.values()
                if i["status"] in ("STAGING", "RUNNING")}

    peak = Peak(gce, running)
    try:
        tick = call("start", {"sweep": "lk", "tick": TICK}, Caller("scheduler", scheduler))
        answers = race([tick] * N_TICKS)
        check_answers(answers)
        store = ResultStore(dep.function_env("start")["SPOTBENCH_RESULTS_URL"])
        runs = store.runs()
        assert len(runs) == 1, runs
        (first,) = running()
        assert launches(store, runs[0].run) == [f"{first}.1"]

        # the running group's launcher stores its result and calls done while start ticks
        # arrive (repeated delivery)
        member = next(i["name"] for i in dep.instances if i["labels"]["spotbench-group"] == first
                      and dep.context(i["name"]).rank == 0)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.url_for(dep.vm_sa(member)))
        gcsfs.GCSFileSystem.clear_instance_cache()
        import spotbench.clouds.gcp as gcp_settings  # its metadata server (the grant front's)

        monkeypatch.setattr(gcp_settings, "METADATA_IDENTITY", dep.front + f"/metadata/{member}")
        stored = WorkloadRun(dep.context(member))
        stored.record("latency", 1.5, "us", size=8)
        assert stored.finish()
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        gcsfs.GCSFileSystem.clear_instance_cache()
        done = call("done", {"group": first}, Caller("member", member))
        check_answers(race([done, tick, tick]))
        assert len(store.runs()) == 1
        assert len(running()) == 1 and first not in running()
        assert len(launches(store, runs[0].run)) == 2
    finally:
        peak.close()
    assert peak.value == 1
    denied = [(c.method, c.path, c.denied) for c in endpoint.calls if c.denied]
    assert denied == []
    # the lock's own calls, granted by the declared roles: create-only, generation-matched
    lock_calls = [c for c in endpoint.calls if "control.lock" in c.path + repr(c.query)]
    assert any(c.q("ifGenerationMatch") == "0" for c in lock_calls)
    assert any(c.method == "DELETE" and c.q("ifGenerationMatch") not in ("", "0")
               for c in lock_calls)
    assert not any(k.endswith("control.lock") for k in endpoint.gcs.buckets[dep.bucket])


@pytest.mark.security
def test_gcp_a_member_cannot_take_the_control_lock(gcp, monkeypatch):
    """A member VM (its workload compromised) holding `control.lock` would stall every
    start, stop and done of the sweep: its account may create only its own group's names."""
    from spotbench.results import StoreError

    dep, endpoint, _ = gcp
    member = dep.instances[0]["name"]
    url = dep.function_env("start")["SPOTBENCH_RESULTS_URL"]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.url_for(dep.vm_sa(member)))
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    gcsfs.GCSFileSystem.clear_instance_cache()
    with pytest.raises(StoreError, match="Forbidden"):
        with ResultStore(url, lease_objects=get_provider("gcp").lease_objects).lease(
                "control", holder="attacker", wait_s=0):
            pass
    assert not any(k.endswith("control.lock") for k in endpoint.gcs.buckets[dep.bucket])
    gcsfs.GCSFileSystem.clear_instance_cache()


# ---- AWS ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def aws() -> Iterator[Any]:
    from spotbench.spec import load_spec
    from tests.iam.account import EnforcedAccount
    from tests.iam.deployment import declare, deploy
    from tests.iam.test_aws_iam import BUCKET, REGION, SPEC
    from tests.moto_server import MotoServer

    spec = {**SPEC, "name": "lk", "trials": 3, "concurrency": 1, "results": f"s3://{BUCKET}/lk"}
    with MotoServer() as url, EnforcedAccount(url, REGION) as account:
        yield deploy(account, declare(load_spec(spec)), BUCKET)


def test_aws_concurrent_start_ticks_and_done_open_one_run_within_the_limit(aws):
    from tests.iam.account import environment
    from tests.iam.test_aws_iam import member_env

    d, account = aws, aws.account
    starter = d.functions["lk-start"]
    lambda_role = account.session(starter.role, starter.name)
    env = {**lambda_role.env(), "AWS_ENDPOINT_URL": account.url, "AWS_REGION": account.region,
           "AWS_DEFAULT_REGION": account.region}
    scheduler = f"arn:aws:scheduler:{account.region}:123456789012:schedule/default/lk-start"
    group_of = {i: d.contexts[n].group for n, i in d.instance_ids.items()}

    def call(action: str, body: dict, caller: Caller) -> Callable[[], tuple[int, dict]]:
        fn_env = {**d.functions[f"lk-{action}"].env, **env}
        return lambda: handle(action, body, caller, FunctionConfig(fn_env))

    def running() -> set[str]:
        return {group_of[i] for i, state in d.states().items()
                if i in group_of and state in ("pending", "running")}

    peak = [0]
    forward = account._forward

    def sampled(h: Any, headers: dict, body: bytes) -> Any:
        out = forward(h, headers, body)
        if b"Action=StartInstances" in body or b"Action=StopInstances" in body:
            peak[0] = max(peak[0], len(running()))
        return out

    account._forward = sampled
    store = ResultStore(f"s3://{d.bucket}/lk")
    try:
        with environment(env):
            tick = call("start", {"sweep": "lk", "tick": TICK}, Caller("scheduler", scheduler))
            check_answers(race([tick] * N_TICKS))
            runs = store.runs()
            assert len(runs) == 1, runs
            (first,) = running()
            assert launches(store, runs[0].run) == [f"{first}.1"]
        launcher = next(n for n, c in d.contexts.items() if c.group == first and c.rank == 0)
        with environment(member_env(d, d.member(launcher))):
            stored = WorkloadRun(d.contexts[launcher])
            stored.record("latency", 1.5, "us", size=8)
            assert stored.finish()
        with environment(env):
            done = call("done", {"group": first}, Caller("member", d.instance_ids[launcher]))
            check_answers(race([done, tick, tick]))
            assert len(store.runs()) == 1
            assert len(running()) == 1 and first not in running()
            assert len(launches(store, runs[0].run)) == 2
    finally:
        account._forward = forward
    assert peak[0] == 1
    assert account.denial_lines() == [] and not account.errors, account.errors
    lock_calls = {r.auth.action for r in account.decisions if r.auth.resource.endswith("/control.lock")}
    assert {"s3:PutObject", "s3:DeleteObject"} <= lock_calls, lock_calls


@pytest.mark.security
def test_aws_a_member_cannot_take_the_control_lock(aws):
    """As on GCP: a member's role puts only its own group's objects, never control.lock."""
    from spotbench.results import StoreError
    from tests.iam.account import environment
    from tests.iam.test_aws_iam import member_env

    d = aws
    name = next(iter(d.instance_ids))
    with environment(member_env(d, d.member(name))):
        with pytest.raises(StoreError, match="Access ?Denied|AccessDenied|not authorized"):
            store = ResultStore(f"s3://{d.bucket}/lk", lease_objects=get_provider("aws").lease_objects)
            with store.lease("control", holder="attacker", wait_s=0):
                pass
    denied = [r.auth for r in d.account.denials()]
    assert [(a.action, a.resource.rsplit("/", 1)[-1]) for a in denied] == [
        ("s3:PutObject", "control.lock")], denied
    d.account.decisions.clear()
