"""Attack: a VM that is not the sweep's member calls GCP `done` with a genuine ID token.

Google signs identity tokens for every VM; the claims say which one (`google.compute_engine`:
project, zone, instance name and id) and which service account it runs as (`email`). A VM
named like a member but in another zone, a re-created VM under the old name, or one running
as another service account must not stop the group. Served by the real local functions
server with `SPOTBENCH_CLOUD=gcp`, the compute API of tests/clouds/fake_gce.py and Google's
certificate endpoint served locally (tokens signed by a test key).
"""

from __future__ import annotations

import time

import pytest
import requests

from spotbench.localrun.server import FunctionsServer
from spotbench.spec import load_spec
from tests.auth.test_gcp import KEY, KID, CertServer, _cert_pem, token
from tests.clouds.fake_gce import FakeGce

pytestmark = pytest.mark.security

PROJECT, ZONE = "proj", "europe-west4-a"
VM_SA = "sb-gd-vm@proj.iam.gserviceaccount.com"


def vm_sa(group_index: int) -> str:
    """Every VM of the sweep runs as its one member account (infra/gcp/identity.py, issue
    #29): the function tells the groups apart by instance (name, id, zone), not by account."""
    return VM_SA
SCHEDULER = "spotbench-scheduler@proj.iam.gserviceaccount.com"
AUD = "https://europe-west4-proj.cloudfunctions.net/done"


@pytest.fixture(scope="module")
def gcp(tmp_path_factory):
    root = tmp_path_factory.mktemp("gcpdone")
    spec = load_spec({"name": "gd", "cloud": "gcp", "zone": ZONE, "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 2, "gcp": {"project": PROJECT}, "results": f"file://{root}/results"})
    fake = FakeGce(project=PROJECT)
    ids = {}
    for g, group in enumerate(spec.plan()):
        for n, member in enumerate(group.members):
            ids[member.name] = str(4_000_000 + len(ids))
            fake.add(member.name, ZONE, "RUNNING", group.member_labels(member),
                     service_account=vm_sa(g), instance_id=ids[member.name])
    fake.start()
    certs = CertServer({KID: _cert_pem(KEY)})
    env = {"SPOTBENCH_CLOUD": "gcp", "SPOTBENCH_SPEC": spec.model_dump_json(),
           "SPOTBENCH_RESULTS_URL": f"file://{root}/results", "SPOTBENCH_GCP_PROJECT": PROJECT,
           "SPOTBENCH_AUDIENCE": AUD, "SPOTBENCH_SCHEDULER_ACCOUNTS": SCHEDULER,
           "SPOTBENCH_MEMBER_ACCOUNTS": VM_SA, "SPOTBENCH_GCP_API_ENDPOINT": fake.url,
           "SPOTBENCH_GCP_CERTS_URL": certs.url}
    server = FunctionsServer(env, root / "functions.log").start()
    try:
        yield spec, fake, ids, server.url
    finally:
        server.stop()
        certs.close()
        fake.stop()


def vm_token(name: str, *, zone: str = ZONE, instance_id: str, project: str = PROJECT,
             email: str = VM_SA) -> str:
    return token({"aud": AUD, "email": email, "email_verified": True,
                  "google": {"compute_engine": {
                      "instance_creation_timestamp": int(time.time()) - 60,
                      "instance_id": instance_id, "instance_name": name,
                      "project_id": project, "project_number": 99, "zone": zone}}})


def done(url: str, tok: str, group: str) -> requests.Response:
    return requests.post(f"{url}/done", json={"group": group},
                         headers={"Authorization": f"Bearer {tok}"}, timeout=60)


def statuses(fake: FakeGce, group) -> set[str]:
    return {fake.status(ZONE, m.name) for m in group.members}


@pytest.mark.parametrize("forged", ["other-zone", "recreated", "other-account",
                                    "other-groups-account", "other-project"])
def test_a_genuine_token_of_another_vm_stops_nothing(gcp, forged) -> None:
    spec, fake, ids, url = gcp
    group = spec.plan()[0]
    name = group.members[0].name
    claims = {"instance_id": ids[name]}
    if forged == "other-groups-account":  # a VM of group 1, as itself: its own genuine token
        name = spec.plan()[1].members[0].name
        claims = {"instance_id": ids[name]}
    claims.update({"other-zone": {"zone": "europe-west4-b"},
                   "recreated": {"instance_id": "9999999999"},
                   "other-account": {"email": "someone@proj.iam.gserviceaccount.com"},
                   "other-groups-account": {},
                   "other-project": {"project": "attacker-proj"}}[forged])
    resp = done(url, vm_token(name, **claims), group.id)
    assert resp.status_code == 403, resp.text
    assert statuses(fake, group) == {"RUNNING"}


def test_the_member_itself_stops_its_group_and_a_garbage_token_is_not_echoed(gcp) -> None:
    spec, fake, ids, url = gcp
    garbage = "not-a-jwt-" + "s3cr3t" * 10
    resp = done(url, garbage, spec.plan()[1].id)
    assert resp.status_code == 401 and "s3cr3t" not in resp.text
    assert resp.json()["error"].startswith("invalid ID token")

    group = spec.plan()[1]
    name = group.members[1].name
    resp = done(url, vm_token(name, instance_id=ids[name], email=vm_sa(1)), group.id)
    assert resp.status_code == 200, resp.text
    assert statuses(fake, group) <= {"STOPPING", "TERMINATED"}
