"""The forged end record (issue #38, HIGH), performed end to end.

A group's member holds its grant and writes, through it, control's own ledger: an end record
of its launch dated 2999 (`runs/<run>/ends/<group>.1.json`: its launch then runs "until 2999",
so the budget counts it until its cap and the contamination check sees it overlap every other
group) and a launch record in a made-up run folder (`runs/<7 characters>/launches/<group>.1`,
which the budget counts at its full deadline). Every write goes through the real grant of
each cloud, evaluated as the cloud does (`tests/iam/policy.py` for the AWS STS session
policy; `tests/fidelity/gcs_grants.py` for the GCS POST policy), and lands only if allowed;
then control runs the sweep on (budget, `concurrency: 1`).

With the grant this issue replaced (the run matched by its length, `?` per character: IAM's
`?` matches `/`) both forged writes land, the budget refuses every later group, and control's
ledger has the group's launch running until 2999 (the interval the contamination check
compares every other attempt with). With the grants as minted now, both writes are refused
on both clouds, and the sweep goes on as if nothing happened.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from spotbench import control
from spotbench.auth import Caller
from spotbench.auth.instance import Grant
from spotbench.clouds.aws import grants as aws_grants
from spotbench.clouds.gcp.storage_grant import storage_grants
from spotbench.costs import load_catalog
from spotbench.ledger import launches_of
from spotbench.results import Result, ResultStore, run_id_lengths
from spotbench.spec import load_spec
from tests.fidelity.gcs_grants import post_refusal
from tests.iam.policy import allowed
from tests.test_control import SCHEDULER, MemoryCloud

pytestmark = pytest.mark.security

NOW = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
BUCKET = "b"


def sweep_in(tmp_path) -> control.Sweep:
    spec = load_spec({
        "name": "fl", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
        "matrix": {"machine_type": ["n1-standard-2"]}, "trials": 3, "deadline": "9m",
        "spot": False, "concurrency": 1, "budget": 1.0})
    groups = spec.plan()
    return control.Sweep(spec=spec, cloud=MemoryCloud(groups), groups=groups,
                         store=ResultStore(f"file://{tmp_path}/fl"),
                         budget_check=lambda *a: _budget(*a))


def _budget(spec, store, running, group, now):
    from spotbench.budget import check_budget

    return check_budget(spec, store, running, group, now, load_catalog())


def aws_writer(grant: Grant, *, old: bool = False):
    """Whether the group's AWS session policy allows putting `key` (under the root `fl`)."""
    policy = aws_grants.session_policy(BUCKET, "fl", grant.group, records=grant.records,
                                       checkpoints=False, until=grant.expires)
    if old:  # the grant before issue #38: the run segment matched by its length
        policy["Statement"][0]["Resource"] = [
            f"arn:aws:s3:::{BUCKET}/fl/runs/{'?' * n}/{grant.group}.*" for n in run_id_lengths()]
    return lambda key: allowed([policy], "s3:PutObject", f"arn:aws:s3:::{BUCKET}/fl/{key}",
                               {"aws:CurrentTime": NOW.isoformat()})


def gcs_writer(grant: Grant):
    answer = storage_grants(grant, f"gs://{BUCKET}/fl", "fn@p.iam.gserviceaccount.com",
                            lambda blob: b"sig", lambda boundary: ("t", 60), now=NOW)
    policy = json.loads(base64.b64decode(answer["records"]["fields"]["policy"]))
    fields = dict(answer["records"]["fields"])
    return lambda key: post_refusal(policy, {**fields, "key": f"fl/{key}"}, BUCKET, 64) is None


def attack(sweep: control.Sweep, run: str, group: str, may_write) -> list[str]:
    """The member's forged ledger writes, each stored only if its grant allows it."""
    forged = {
        f"runs/{run}/ends/{group}.1.json": json.dumps({"at": "2999-01-01T00:00:00+00:00",
                                                        "stored": []}),
        f"runs/{'0' * (run_id_lengths()[0] - len('/launches'))}/launches/{group}.1":
            (NOW - timedelta(days=1)).isoformat(),
    }
    landed = []
    for key, body in forged.items():
        if may_write(key):
            sweep.store.write_whole(sweep.store.path(*key.split("/")), body.encode())
            landed.append(key)
    return landed


def honest_result(sweep: control.Sweep, run: str, group: str) -> None:
    sweep.store.write_group(run, group, [Result(
        sweep="fl", run=run, group=group, trial=1, workload="osu", metric="latency", value=1.0,
        unit="us", cloud="gcp", machine_type="n1-standard-2", started_at=NOW, ended_at=NOW)])


def play(tmp_path, writer_of) -> dict:
    """start → g1 forges the ledger through its grant, stores, calls done → the next tick."""
    sweep = sweep_in(tmp_path)
    g1, g2, _ = sweep.groups
    first = control.start(sweep, SCHEDULER, {}, now=NOW)
    run = first["run"]
    assert first["started"] == [g1.id], first
    grant = Grant.for_group(g1.id, run, NOW + sweep.spec.deadline)
    landed = attack(sweep, run, g1.id, writer_of(grant))
    honest_result(sweep, run, g1.id)
    later = NOW + timedelta(minutes=5)
    done = control.done(sweep, Caller("member", g1.members[0].name), {"group": g1.id}, now=later)
    ends = {x.group: x.ended for x in launches_of(sweep.store, run)}
    return {"landed": landed, "done": done, "flags": sweep.store.flags(run), "g2": g2.id,
            "g1_ended": ends.get(g1.id)}


def test_forged_ledger_the_attack_lands_with_the_length_matched_grant(tmp_path):
    """What the attack did before the fix: the budget refuses the next group, for good."""
    out = play(tmp_path, lambda grant: aws_writer(grant, old=True))
    assert len(out["landed"]) == 2, out["landed"]
    assert out["done"]["started"] == [], out["done"]
    assert out["g2"] in [r["group"] for r in out["done"]["refused"]], out["done"]
    assert "budget" in out["done"]["refused"][0]["reason"]
    assert out["g1_ended"].year == 2999  # the launch "ran" until then: beside every later one


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_forged_ledger_writes_are_refused_by_the_grant_and_control_goes_on(tmp_path, cloud):
    out = play(tmp_path, aws_writer if cloud == "aws" else gcs_writer)
    assert out["landed"] == []
    assert out["done"]["started"] == [out["g2"]] and out["done"]["refused"] == [], out["done"]
    assert out["flags"] == {}
    assert out["done"]["completed"] == 1
    assert out["g1_ended"] < NOW + timedelta(hours=1)  # the end control recorded itself
