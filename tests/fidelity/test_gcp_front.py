"""The deployed GCP functions behind Cloud Run's front end (tests/fidelity/cloud_run_front.py).

The program is declared under mocks; each function runs as its own functions-framework
process with the environment the program declares; the front checks tokens and
`run.invoker` against the declared bindings and strips the signature, as Google does. Cloud
Scheduler's tick and a member VM's real `done` call go through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from spotbench.done_client import call_done
from tests.auth.test_gcp import KEY, KID, CertServer, _cert_pem
from tests.clouds.fake_gce import FakeGce
from tests.fidelity.cloud_run_front import (
    SIGNATURE_REMOVED,
    CloudRunFront,
    CloudScheduler,
    Deployment,
    FunctionProcess,
    claims_of,
    deploy_gcp,
    google_token,
    service_account_token,
    vm_identity_token,
    vm_network,
)

pytestmark = [pytest.mark.fidelity, pytest.mark.timeout(180)]

PROJECT, REGION, ZONE = "proj-front", "us-central1", "us-central1-a"
SPEC = {"name": "fr", "cloud": "gcp", "zone": ZONE, "gcp": {"project": PROJECT},
        "workload": {"name": "osu", "benchmarks": ["latency"]},
        "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 2,
        "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}  # fmt: skip
ENTRIES = ("start", "stop", "done", "grant")


@dataclass
class World:
    dep: Deployment
    gce: FakeGce
    front: CloudRunFront
    ids: dict[str, str]  # instance name → its instance id

    def members(self, group: str) -> list[str]:
        return [i["name"] for i in self.dep.instances if i["labels"]["spotbench-group"] == group]

    def statuses(self, group: str) -> set[str]:
        return {self.gce.status(ZONE, m) for m in self.members(group)}

    def run(self, group: str) -> None:
        for m in self.members(group):
            self.gce.instances[(ZONE, m)]["status"] = "RUNNING"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    root: Path = tmp_path_factory.mktemp("front")
    dep = deploy_gcp(SPEC, PROJECT, REGION)
    gce = FakeGce(project=PROJECT)
    ids = {}
    for n, inst in enumerate(dep.instances):
        ids[inst["name"]] = str(7_000_000 + n)
        gce.add(inst["name"], inst["zone"], labels=inst["labels"],
                service_account=inst["serviceAccount"]["email"], instance_id=ids[inst["name"]])
    gce.start()
    certs = CertServer({KID: _cert_pem(KEY)})
    backends = {}
    for entry in ENTRIES:
        env = {**dep.function(entry)["serviceConfig"]["environmentVariables"],
               "SPOTBENCH_GCP_API_ENDPOINT": gce.url, "SPOTBENCH_GCP_CERTS_URL": certs.url,
               "SPOTBENCH_RESULTS_URL": f"file://{root}/results"}
        backends[entry] = FunctionProcess(entry, env, root / f"{entry}.log").launch()
    try:
        for proc in backends.values():
            proc.wait_ready()
        front = CloudRunFront(dep, certs.url, {e: p.url for e, p in backends.items()}).start()
        yield World(dep, gce, front, ids)
        front.stop()
    finally:
        for proc in backends.values():
            proc.stop()
        certs.close()
        gce.stop()


def test_gcp_scheduler_tick_and_member_done_pass_the_cloud_run_front(world, monkeypatch):
    """Old code: both 401 (the function verified the signature Google had removed)."""
    resp = CloudScheduler(world.front).fire("start", "2026-01-05T03:00:00Z")
    assert resp.status_code == 200, resp.text
    started = resp.json()["started"]
    assert started and all(world.statuses(g) == {"RUNNING"} for g in started)
    # what reached the function: the checked token without its signature, Google's headers
    got = world.front.forwarded[-1]
    assert got["Authorization"].endswith("." + SIGNATURE_REMOVED)
    assert got["X-CloudScheduler-ScheduleTime"] == "2026-01-05T03:00:00Z"
    assert {"X-Forwarded-For", "X-Cloud-Trace-Context", "traceparent"} <= set(got)

    group = started[0]
    name = world.members(group)[0]
    ctx = world.dep.context(name)
    with vm_network(world.front, monkeypatch, world.dep, name, world.ids[name]):
        answer = call_done(ctx)  # the member's own call: provider.post_done, retries
    # stopped; no result stored, so the group is still pending and control starts it again
    assert answer["group"] == group and sorted(answer["stopped"]) == sorted(world.members(group))
    assert [c for c in world.gce.calls if c[1].endswith("/stop")]
    account = world.dep.instance(name)["serviceAccount"]["email"]
    assert world.front.log[-1][:3] == ("done", account, 200)

    resp = CloudScheduler(world.front).fire("stop", "2026-01-05T03:30:00Z")
    assert resp.status_code == 200, resp.text


def test_gcp_front_lets_only_the_declared_invokers_through(world):
    """run.invoker as infra/ declares it: the scheduler on start/stop, the sweep's one member
    account on done and grant (issue #29), nobody else (the functions' own account included)."""
    dep = world.dep
    scheduler = dep.job("start")["httpTarget"]["oidcToken"]["serviceAccountEmail"]
    function_sa = dep.function("done")["serviceConfig"]["serviceAccountEmail"]
    members = {i["serviceAccount"]["email"] for i in dep.instances}
    assert len(members) == 1  # one member account per sweep, whatever the group count

    def status(entry: str, account: str) -> int:
        tok = service_account_token(account, dep.service_url(entry))
        decision, _, _ = world.front.authorize(entry, {"Authorization": f"Bearer {tok}"})
        return decision.status or 200

    assert {e: status(e, scheduler) for e in ENTRIES} == {"start": 200, "stop": 200, "done": 403,
                                                          "grant": 403}
    for account in members:
        assert {e: status(e, account) for e in ENTRIES} == {"start": 403, "stop": 403, "done": 200,
                                                            "grant": 200}
    assert {status(e, function_sa) for e in ENTRIES} == {403}
    # no allUsers / allAuthenticatedUsers: any other Google account is refused everywhere
    assert {status(e, "someone@elsewhere.iam.gserviceaccount.com") for e in ENTRIES} == {403}


@pytest.mark.security
def test_gcp_forged_claims_in_the_header_the_front_did_not_check_stop_nothing(world):
    """A member of group A (run.invoker on done) puts its own token in
    X-Serverless-Authorization, which Cloud Run checks, and a forged, signature-less token
    naming group B's VM in Authorization, which Cloud Run forwards untouched."""
    groups = sorted({i["labels"]["spotbench-group"] for i in world.dep.instances})
    attacker_group, victim_group = groups
    world.run(victim_group)
    attacker = world.members(attacker_group)[0]
    victim = world.members(victim_group)[0]
    url = world.dep.service_url("done")
    own = vm_identity_token(world.dep, attacker, world.ids[attacker], url)
    head, payload, _ = vm_identity_token(world.dep, victim, world.ids[victim], url).split(".")
    forged = f"{head}.{payload}.{SIGNATURE_REMOVED}"
    resp = requests.post(world.front.url_for(url), json={"group": victim_group}, timeout=60,
                         headers={"X-Serverless-Authorization": f"Bearer {own}",
                                  "Authorization": f"Bearer {forged}"})
    assert resp.status_code in (401, 403), resp.text
    assert world.statuses(victim_group) == {"RUNNING"}
    got = world.front.forwarded[-1]
    assert got["Authorization"] == f"Bearer {forged}"  # the front did forward it untouched
    checked, unchecked = (claims_of(got[h])["google"]["compute_engine"]["instance_name"]
                          for h in ("X-Serverless-Authorization", "Authorization"))
    assert (checked, unchecked) == (attacker, victim)  # one account: the instance differs


@pytest.mark.security
@pytest.mark.parametrize("case", ["expired", "another-functions-audience", "not-google-signed"])
def test_gcp_front_refuses_what_google_refuses(world, case):
    dep = world.dep
    name = dep.instances[0]["name"]
    url = dep.service_url("done")
    tok = {"expired": lambda: google_token({**claims_of("Bearer " + vm_identity_token(
               dep, name, world.ids[name], url)), "iat": 1, "exp": 2}),
           "another-functions-audience": lambda: vm_identity_token(
               dep, name, world.ids[name], dep.service_url("start")),
           "not-google-signed": lambda: vm_identity_token(
               dep, name, world.ids[name], url).rsplit(".", 1)[0] + "." + SIGNATURE_REMOVED,
           }[case]()  # fmt: skip
    seen = len(world.front.forwarded)
    resp = requests.post(world.front.url_for(url), json={"group": "x"}, timeout=60,
                         headers={"Authorization": f"Bearer {tok}"})
    assert resp.status_code == 401, resp.text
    assert world.front.log[-1][0::2] == ("done", 401)
    assert len(world.front.forwarded) == seen  # the function never saw it


@pytest.mark.security
def test_gcp_functions_are_not_reachable_from_the_internet_even_with_a_valid_token(world):
    """Ingress as declared: a caller outside the project's networks holding a member's
    genuine token (stolen, say) never reaches `done`; nor the scheduler's, `start`."""
    dep = world.dep
    name = dep.instances[0]["name"]
    seen = len(world.front.forwarded)
    member = vm_identity_token(dep, name, world.ids[name], dep.service_url("done"))
    for entry, tok in (("done", member),
                       ("start", service_account_token(
                           dep.job("start")["httpTarget"]["oidcToken"]["serviceAccountEmail"],
                           dep.service_url("start")))):
        path = world.front.url_for(dep.service_url(entry)).removeprefix(world.front.url)
        resp = requests.post(world.front.internet_url + path, json={}, timeout=60,
                             headers={"Authorization": f"Bearer {tok}"})
        assert resp.status_code == 404, (entry, resp.status_code)
    assert len(world.front.forwarded) == seen
