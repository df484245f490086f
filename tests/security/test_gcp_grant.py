"""Attacks on GCP's per-group grants (issue #29): one member account for the whole sweep,
the functions tell the groups apart by instance and hand each group credentials for its
own names only, until its deadline.

Served by the real local functions server with `SPOTBENCH_CLOUD=gcp`; the compute API of
tests/clouds/fake_gce.py answers the instance lookup; Google's certificates are served
locally (tokens signed by a test key); IAM Credentials, STS, Secret Manager and Cloud
Storage's POST-policy and media uploads are tests/fidelity/gcs_grants.py, which checks
signatures, policy conditions, expirations and access boundaries as GCS does.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
import requests

from spotbench.auth.group_keys import HOST_KEY, LOGIN_KEY, public_openssh
from spotbench.localrun.server import FunctionsServer
from spotbench.results import ResultStore
from spotbench.spec import load_spec
from tests.auth.test_gcp import KEY, KID, OTHER_KEY, CertServer, _cert_pem, token
from tests.clouds.fake_gce import FakeGce
from tests.fidelity.gcs_grants import GrantApis, GrantApiServer

pytestmark = pytest.mark.security

PROJECT, ZONE, BUCKET = "proj", "europe-west4-a", "bkt"
VM_SA = "sb-gg-vm@proj.iam.gserviceaccount.com"  # the sweep's one member account
FN_SA = "sb-gg-fn@proj.iam.gserviceaccount.com"
FN_TOKEN = "function-access-token"
SECRET = f"projects/{PROJECT}/secrets/gg-spotbench"
SEED = bytes(range(32))
AUD = "https://europe-west4-proj.cloudfunctions.net/gg-grant"


class World:
    def __init__(self, tmp) -> None:
        self.spec = load_spec({
            "name": "gg", "cloud": "gcp", "zone": ZONE, "gcp": {"project": PROJECT},
            "workload": {"name": "tf-mnist", "strategy": "parameter_server", "workers": 1,
                         "ps": 1, "checkpoint_every": 10},
            "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 2, "deadline": "20m",
            "results": f"gs://{BUCKET}/gg"})
        self.groups = self.spec.plan()
        self.gce = FakeGce(project=PROJECT)
        self.ids: dict[str, str] = {}
        for group in self.groups:
            for m in group.members:
                self.ids[m.name] = str(5_000_000 + len(self.ids))
                self.gce.add(m.name, ZONE, "RUNNING", group.member_labels(m),
                             service_account=VM_SA, instance_id=self.ids[m.name])
        self.gce.start()
        self.apis = GrantApis(FN_SA, FN_TOKEN, prefix="gg/",
                              secrets={SECRET: json.dumps({"seed": SEED.hex(), "env": {},
                                                           "env_of": {}}).encode()})
        self.api_server = GrantApiServer(self.apis)
        self.certs = CertServer({KID: _cert_pem(KEY)})
        # the run ledger: file:// stands in for the bucket's ledger, which the function reads
        self.store = ResultStore(f"file://{tmp}/results")
        self.run = self.store.open_run().run
        self.launched = datetime.now(UTC)
        for group in self.groups:
            self.store.record_launch(self.run, group.id, self.launched)
        env = {"SPOTBENCH_CLOUD": "gcp", "SPOTBENCH_SPEC": self.spec.model_dump_json(),
               "SPOTBENCH_RESULTS_URL": f"file://{tmp}/results", "SPOTBENCH_GCP_PROJECT": PROJECT,
               "SPOTBENCH_AUDIENCE": AUD, "SPOTBENCH_SCHEDULER_ACCOUNTS": "sch@proj.iam",
               "SPOTBENCH_MEMBER_ACCOUNTS": VM_SA, "SPOTBENCH_GCP_API_ENDPOINT": self.gce.url,
               "SPOTBENCH_GCP_CERTS_URL": self.certs.url, "SPOTBENCH_GCP_SIGNER": FN_SA,
               "SPOTBENCH_GCP_SECRET": SECRET, "SPOTBENCH_GCP_GRANT_ENDPOINT": self.api_server.url,
               "SPOTBENCH_GCP_GRANT_TOKEN": FN_TOKEN}
        self.server = FunctionsServer(env, tmp / "functions.log").start()
        self.url = self.server.url

    def close(self) -> None:
        self.server.stop()
        self.certs.close()
        self.api_server.close()
        self.gce.stop()

    def token(self, name: str, *, instance_id: str | None = None, project: str = PROJECT,
              key=KEY) -> str:  # fmt: skip
        return token({"aud": AUD, "email": VM_SA, "email_verified": True,
                      "google": {"compute_engine": {
                          "instance_creation_timestamp": int(time.time()) - 60,
                          "instance_id": instance_id or self.ids[name], "instance_name": name,
                          "project_id": project, "project_number": 99, "zone": ZONE}}},
                     key=key)

    def grant(self, tok: str, body: dict | None = None) -> requests.Response:
        return requests.post(f"{self.url}/grant", json=body or {},
                             headers={"Authorization": f"Bearer {tok}"}, timeout=60)

    def upload(self, records: dict, key: str, data: bytes = b"{}\n") -> requests.Response:
        """A POST policy upload as a browser form does it: the policy's fields, key, file."""
        url = self.api_server.url + "/" + records["url"].rsplit("/", 1)[1]
        return requests.post(url, data={**records["fields"], "key": key},
                             files={"file": ("f", data)}, timeout=30)

    def media(self, tok: str, name: str) -> requests.Response:
        return requests.post(f"{self.api_server.url}/upload/storage/v1/b/{BUCKET}/o",
                             params={"uploadType": "media", "name": name}, data=b"ckpt",
                             headers={"Authorization": f"Bearer {tok}"}, timeout=30)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("gcpgrant"))
    try:
        yield w
    finally:
        w.close()


def member(world: World, g: int, m: int = 0) -> str:
    return world.groups[g].members[m].name


def test_a_member_gets_its_own_groups_grant_and_writes_its_records(world):
    mine = world.groups[0]
    resp = world.grant(world.token(member(world, 0, 1)))
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert answer["group"] == mine.id
    assert answer["grant"]["prefixes"] == [f"runs/{world.run}/{mine.id}.", f"checkpoints/{mine.id}/"]
    key = f"gg/runs/{world.run}/{mine.id}.1.jsonl"
    assert world.upload(answer["records"], key).status_code == 204
    assert key in world.apis.objects[BUCKET]
    ckpt = answer["checkpoints"]
    assert world.media(ckpt["access_token"], f"gg/checkpoints/{mine.id}/{world.run}/c-1").status_code == 200


def test_a_grant_for_another_groups_prefix_is_refused(world):
    """Group 1's instance holds a genuine grant; it tries group 0's names with it, and with a
    policy it rewrote for group 0's prefix."""
    victim = world.groups[0].id
    answer = world.grant(world.token(member(world, 1))).json()
    assert answer["group"] == world.groups[1].id
    for key in (f"gg/runs/{world.run}/{victim}.2.jsonl", f"gg/runs/{world.run}/{victim}.1/raw.txt",
                f"gg/runs/{world.run}/run.json", f"gg/runs/{world.run}/flags/{victim}.1.json"):
        resp = world.upload(answer["records"], key)
        assert resp.status_code == 403 and "must start with" in resp.text, key
    import base64
    fields = answer["records"]["fields"]
    doc = json.loads(base64.b64decode(fields["policy"]))
    doc["conditions"][1][2] = f"gg/runs/{world.run}/{victim}."
    forged = {**answer["records"], "fields": {**fields, "policy": base64.b64encode(
        json.dumps(doc).encode()).decode()}}
    resp = world.upload(forged, f"gg/runs/{world.run}/{victim}.2.jsonl")
    assert resp.status_code == 403 and "SignatureDoesNotMatch" in resp.text
    tok = answer["checkpoints"]["access_token"]
    for name in (f"gg/checkpoints/{victim}/{world.run}/c-1", f"gg/runs/{world.run}/{victim}.3.jsonl"):
        assert world.media(tok, name).status_code == 403, name
    assert not any(victim in k for k in world.apis.objects.get(BUCKET, {}) if ".2." in k or ".3." in k)


def test_a_grant_replayed_after_the_deadline_is_refused(world):
    answer = world.grant(world.token(member(world, 0))).json()
    key = f"gg/runs/{world.run}/{world.groups[0].id}.5.jsonl"
    deadline = datetime.fromisoformat(answer["grant"]["expires"])
    assert deadline == world.launched + world.spec.deadline
    world.apis.clock = deadline.timestamp() + 1
    try:
        resp = world.upload(answer["records"], key)
        assert resp.status_code == 400 and "Policy expired" in resp.text
        assert key not in world.apis.objects.get(BUCKET, {})
    finally:
        world.apis.clock = None
    # and the function mints none after the deadline: the group's launch is over
    late = datetime.now(UTC) - world.spec.deadline - world.spec.deadline
    world.store.record_launch(world.run, world.groups[1].id, late)
    resp = world.grant(world.token(member(world, 1)))
    assert resp.status_code == 403 and "deadline" in resp.json()["error"]
    world.store.record_launch(world.run, world.groups[1].id, datetime.now(UTC))


def test_an_instance_of_another_sweep_gets_nothing(world):
    """A live VM of another sweep in the same project, running as a member account, with a
    genuine identity token: not one of this plan's member names."""
    other = "gh--" + world.groups[0].id.split("--", 1)[1] + "-w0"
    world.gce.add(other, ZONE, "RUNNING", {"spotbench-sweep": "gh",
                                           "spotbench-group": world.groups[0].id},
                  service_account=VM_SA, instance_id="7777")
    for body in ({}, {"file": LOGIN_KEY}):
        resp = world.grant(world.token(other, instance_id="7777"), body)
        assert resp.status_code == 403 and "not a member of sweep gg" in resp.json()["error"]


@pytest.mark.parametrize("forged", ["unknown-key", "recreated-id", "other-project", "unsigned"])
def test_a_forged_instance_identity_gets_nothing(world, forged):
    name = member(world, 0)
    tok = {"unknown-key": lambda: world.token(name, key=OTHER_KEY),
           "recreated-id": lambda: world.token(name, instance_id="123"),
           "other-project": lambda: world.token(name, project="attacker"),
           # the signature removed, as Cloud Run's front end does — but this function is not
           # behind it (SPOTBENCH_GCP_FRONT unset): no one checked the claims
           "unsigned": lambda: world.token(name).rsplit(".", 1)[0] + ".SIGNATURE_REMOVED_BY_GOOGLE",
           }[forged]()
    resp = world.grant(tok, {"file": LOGIN_KEY})
    assert resp.status_code in (401, 403), resp.text
    assert "data" not in resp.json() and "records" not in resp.text


def test_keys_come_to_their_own_group_only(world):
    from cryptography.hazmat.primitives import serialization

    for g in (0, 1):
        for key_file in (LOGIN_KEY, HOST_KEY):
            resp = world.grant(world.token(member(world, g, 1)), {"file": key_file})
            assert resp.status_code == 200, resp.text
            import base64
            private = serialization.load_ssh_private_key(base64.b64decode(resp.json()["data"]), None)
            public = private.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
            gid = world.groups[g].id
            assert public == public_openssh(SEED, gid, key_file)
            assert public != public_openssh(SEED, world.groups[1 - g].id, key_file)
    assert world.grant(world.token(member(world, 0)), {"file": "../seed"}).status_code == 403


def test_a_member_writes_its_records_through_its_grant_and_no_other_groups(world):
    """The member side (`ResultStore(writer=GrantedWriter)`, workloads/common.py): a VM of
    group 1 stores its attempt with the policy `grant` minted for it; the same writer
    refuses to put anything under group 0's names (the store refuses the policy)."""
    from spotbench.clouds.gcp.member_grant import GrantedWriter, GrantWriteError
    from spotbench.results import Result

    name, mine, victim = member(world, 1), world.groups[1].id, world.groups[0].id
    writer = GrantedWriter(f"{world.url}/grant", lambda audience: world.token(name))
    store = ResultStore(f"gs://{BUCKET}/gg", writer=writer)
    store.group_files = lambda run, group: []  # listing needs GCS's JSON API: not this double
    path = store.write_group(world.run, mine, [Result(
        sweep="gg", run=world.run, group=mine, trial=2, workload="tf-mnist", metric="m",
        value=1.0, unit="s", machine_type="n2-standard-2", cloud="gcp", started_at=datetime.now(UTC),
        ended_at=datetime.now(UTC))])
    assert path == f"{BUCKET}/gg/runs/{world.run}/{mine}.1.jsonl"
    assert b'"metric":"m"' in world.apis.objects[BUCKET][path.split("/", 1)[1]]
    with pytest.raises(GrantWriteError, match="must start with"):
        writer(f"{BUCKET}/gg/runs/{world.run}/{victim}.9.jsonl", b"forged\n")
    assert f"gg/runs/{world.run}/{victim}.9.jsonl" not in world.apis.objects[BUCKET]
