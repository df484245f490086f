"""A trial's files and intermediate values go through its group's own grant, and only there:
`runs/<run>/<group>.<n>/artifacts/…` and `…/intermediate.jsonl` are inside the prefix the
grant names (`runs/<run>/<group>.`), another group's are refused, and no member can write
control's note that a user stopped a group (`runs/<run>/stopped/…`: not retried).

GCP: the grant function of tests/security/test_gcp_grant.py (real POST policies, checked as
GCS does by tests/fidelity/gcs_grants.py). AWS: the enforced account of tests/iam (moto_server
behind a front evaluating the declared policies and the grant's session policy)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError

from spotbench.clouds.aws.identity import signed_post
from spotbench.results import Result, ResultStore, StoreError, select_artifacts
from tests.iam.test_aws_iam import (  # noqa: F401 - module fixtures: one deployed account
    REGION, _put, account, declared, deployed, first, post_policy_allows,
)
from tests.security.test_gcp_grant import BUCKET, member, world  # noqa: F401 - the grant's world

pytestmark = pytest.mark.security


def _folder(tmp_path):
    folder = tmp_path / "art"
    folder.mkdir()
    (folder / "weights.npz").write_bytes(b"W" * 64)
    return select_artifacts(folder)


def test_search_artifacts_go_through_the_groups_gcs_grant_and_no_other(world, tmp_path):
    from spotbench.clouds.gcp.member_grant import GrantedWriter, GrantWriteError

    name, mine, victim = member(world, 1), world.groups[1].id, world.groups[0].id
    writer = GrantedWriter(f"{world.url}/grant", lambda audience: world.token(name))
    store = ResultStore(f"gs://{BUCKET}/gg", writer=writer)
    picked = _folder(tmp_path)
    [path] = store.store_artifacts(world.run, mine, 1, picked)
    assert path == f"{BUCKET}/gg/runs/{world.run}/{mine}.1/artifacts/weights.npz"
    assert world.apis.objects[BUCKET][path.split("/", 1)[1]] == b"W" * 64
    now = datetime.now(UTC)
    value = Result(sweep="gg", run=world.run, group=mine, trial=1, workload="tf-mnist",
                   metric="val_accuracy", value=0.5, unit="fraction", machine_type="n2-standard-2",
                   cloud="gcp", started_at=now, ended_at=now, metadata={"epoch": 1})
    store.write_intermediate(world.run, mine, 1, [value])
    assert f"gg/runs/{world.run}/{mine}.1/intermediate.jsonl" in world.apis.objects[BUCKET]
    for forged in (lambda: store.store_artifacts(world.run, victim, 1, picked),
                   lambda: store.write_intermediate(world.run, victim, 1, [value]),
                   lambda: store.record_user_stop(world.run, mine)):
        with pytest.raises((GrantWriteError, StoreError), match="must start with"):
            forged()
    kept = world.apis.objects[BUCKET]
    assert not any(k.startswith(f"gg/runs/{world.run}/{victim}.") for k in kept)
    assert f"gg/runs/{world.run}/stopped/{mine}.json" not in kept


def test_search_artifacts_keys_are_inside_the_aws_groups_grant_and_no_other(deployed):
    d = deployed
    run = d.tick("start")["run"]
    mine, theirs = (g.id for g in d.declared.spec.plan())
    member_ = d.member(next(n for n, c in d.contexts.items() if c.group == mine))
    grant = signed_post(d.done_url + "grant", {}, region=REGION, credentials=member_.credentials()).json()
    s3 = d.account.client("s3", d.account.principal_of(grant["credentials"]["AccessKeyId"]))
    for key in (f"ax/runs/{run}/{mine}.1/artifacts/weights.npz", f"ax/runs/{run}/{mine}.1/artifacts/sub/x.bin",
                f"ax/runs/{run}/{mine}.1/intermediate.jsonl"):
        _put(s3, d, key)
    for key in (f"ax/runs/{run}/{theirs}.1/artifacts/weights.npz", f"ax/runs/{run}/{theirs}.1/intermediate.jsonl",
                f"ax/runs/{run}/stopped/{mine}.json", f"ax/runs/{run}/stopped/{theirs}.json"):
        with pytest.raises(ClientError, match="AccessDenied"):
            _put(s3, d, key)
    policy = json.loads(base64.b64decode(grant["post"]["fields"]["policy"]))
    assert post_policy_allows(policy, f"ax/runs/{run}/{mine}.1/artifacts/weights.npz", d.bucket)
    assert not post_policy_allows(policy, f"ax/runs/{run}/{theirs}.1/artifacts/weights.npz", d.bucket)
    assert not post_policy_allows(policy, f"ax/runs/{run}/stopped/{mine}.json", d.bucket)
    assert not d.account.errors, d.account.errors
