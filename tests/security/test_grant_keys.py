"""Grants that match exactly (issue #38): every key a group's grant lets it write lies under
`runs/<open run>/<group>.` or `checkpoints/<group>/`, on both clouds.

The policies are the real ones — what `spotbench.clouds.aws.grants` and
`spotbench.clouds.gcp.storage_grant` hand a group — evaluated by the tests' models of the
clouds: AWS's IAM evaluation (`tests/iam/policy.py`: `*` and `?` match `/` too) for the STS
session policy, S3's POST-policy check, GCS's POST-policy check and its Credential Access
Boundary's CEL condition (`tests/fidelity/gcs_grants.py`, cel-python). The keys are generated
from the store's own layout (`tests/security/store_keys.py`) and by hypothesis around it,
never a hand-picked list. Before the fix the AWS session policy matched the run segment by its
length (`runs/????????????????/<group>.*`), and `?` matched `/`: a group wrote
`runs/<run>/ends/<group>.1.json` (a 21-character "run") and launch records in made-up runs.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotbench.auth.instance import MAX_OBJECT_BYTES, Grant
from spotbench.clouds.aws import grants as aws_grants
from spotbench.clouds.gcp.storage_grant import storage_grants
from spotbench.results import new_run_id, run_id_lengths
from tests.fidelity.gcs_grants import post_refusal, rule_allows
from tests.iam.policy import allowed, post_policy_allows
from tests.security.store_keys import FILLER, Attack, folders, layout

pytestmark = pytest.mark.security

BUCKET = "spotbench-results"
NOW = datetime(2026, 12, 7, 3, 0, 5, tzinfo=UTC)
RUN = new_run_id(NOW.replace(second=0))
MINE, OTHER, OTHER2 = "ax--c5n-large-t1", "ax--c5n-large-t2", "ax--c5n-large-t10"
ATTACK = Attack(root="ax/", run=RUN, group=MINE, others=(OTHER, OTHER2))
GRANT = Grant.for_group(MINE, RUN, NOW + timedelta(minutes=45), checkpoints=True)


def session_policy() -> dict:
    return aws_grants.session_policy(BUCKET, "ax", MINE, records=GRANT.records, checkpoints=True,
                                     until=GRANT.expires)


def s3_put_allowed(policy: dict, key: str) -> bool:
    return allowed([policy], "s3:PutObject", f"arn:aws:s3:::{BUCKET}/{key}",
                   {"aws:CurrentTime": NOW.isoformat()})


@pytest.fixture(scope="module")
def aws_post(request) -> dict:
    """The presigned POST's policy document, as botocore signs it (offline: no request)."""
    mp = pytest.MonkeyPatch()
    for k, v in {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": ""}.items():
        mp.setenv(k, v)
    request.addfinalizer(mp.undo)
    post = aws_grants.presigned_post(BUCKET, aws_grants.under("ax", GRANT.records),
                                     datetime.now(UTC) + timedelta(minutes=30), GRANT.max_bytes)
    return json.loads(base64.b64decode(post["fields"]["policy"]))


@pytest.fixture(scope="module")
def gcs() -> dict:
    """The GCS grant answer (POST policy form + the boundary the checkpoint token carries)."""
    boundaries: list[dict] = []

    def downscope(boundary: dict) -> tuple[str, int]:
        boundaries.append(boundary)
        return "downscoped", 3600

    answer = storage_grants(GRANT, f"gs://{BUCKET}/ax", "fn@p.iam.gserviceaccount.com",
                            lambda blob: b"signature", downscope, now=NOW)
    policy = json.loads(base64.b64decode(answer["records"]["fields"]["policy"]))
    return {"form": answer["records"], "policy": policy, "boundary": boundaries[0]}


def gcs_post_allowed(gcs: dict, key: str, size: int = 1) -> bool:
    fields = {**{k: v for k, v in gcs["form"]["fields"].items()}, "key": key}
    return post_refusal(gcs["policy"], fields, BUCKET, size) is None


def gcs_token_allowed(gcs: dict, key: str) -> bool:
    resource = f"projects/_/buckets/{BUCKET}/objects/{key}"
    return any(rule_allows(rule, BUCKET, resource, "storage.objects.create")
               for rule in gcs["boundary"]["accessBoundary"]["accessBoundaryRules"])


def test_grants_the_layout_is_read_from_the_store_and_every_control_path_is_generated():
    templates = layout()
    assert {"runs/<run>/ends/<group>.<n>.json", "runs/<run>/launches/<group>.<n>",
            "runs/<run>/run.json", "control.lock"} <= set(templates)
    assert {"ends", "launches", "flags", "starts"} <= set(folders(templates))
    keys = set(ATTACK.keys())
    # the two forged ledger entries of the finding, in the open run and in a made-up run
    assert f"ax/runs/{RUN}/ends/{MINE}.1.json" in keys
    assert f"ax/runs/{FILLER[:7]}/launches/{MINE}.1" in keys
    assert len(keys) > 5000 and 0 < sum(map(ATTACK.owned, keys)) < len(keys) / 10


def test_grants_the_generated_keys_catch_a_wildcard_run_segment():
    """The generator is strong enough to fail the grant this issue replaced: the run matched
    by its length (`?` per character), which IAM lets cross `/`."""
    old = session_policy()
    old["Statement"][0]["Resource"] = [f"arn:aws:s3:::{BUCKET}/ax/runs/{'?' * n}/{MINE}.*"
                                       for n in run_id_lengths()]
    leaks = [k for k in ATTACK.keys() if s3_put_allowed(old, k) and not ATTACK.owned(k)]
    assert f"ax/runs/{RUN}/ends/{MINE}.1.json" in leaks  # the forged end record
    assert any("/launches/" in k for k in leaks)  # launch records in made-up run folders
    assert any(k.startswith(f"ax/runs/{ATTACK.closed}/") for k in leaks)  # another run


def test_grants_aws_session_policy_allows_exactly_the_groups_keys():
    policy = session_policy()
    wrong = [(k, ATTACK.owned(k)) for k in ATTACK.keys() if s3_put_allowed(policy, k) != ATTACK.owned(k)]
    assert not wrong, wrong[:10]
    resources = [r for s in policy["Statement"] if "s3:PutObject" in s["Action"]
                 for r in s["Resource"] if isinstance(s["Resource"], list)] + \
        [s["Resource"] for s in policy["Statement"] if "s3:PutObject" in s["Action"]
         and isinstance(s["Resource"], str)]
    # the one wildcard of each resource is its last character, after the group's own prefix
    for arn in resources:
        assert "?" not in arn and arn.index("*") == len(arn) - 1, arn
        assert arn.endswith((f"/runs/{RUN}/{MINE}.*", f"/checkpoints/{MINE}/*")), arn


def test_grants_aws_presigned_post_allows_exactly_the_groups_records(aws_post):
    wrong = [k for k in ATTACK.keys()
             if post_policy_allows(aws_post, k, BUCKET, 1) != k.startswith(f"ax/{GRANT.records}")]
    assert not wrong, wrong[:10]
    own = f"ax/runs/{RUN}/{MINE}.1.jsonl"
    assert post_policy_allows(aws_post, own, BUCKET, MAX_OBJECT_BYTES)
    assert not post_policy_allows(aws_post, own, BUCKET, MAX_OBJECT_BYTES + 1)  # the size cap


def test_grants_gcs_post_policy_and_checkpoint_token_allow_exactly_the_groups_keys(gcs):
    wrong_post = [k for k in ATTACK.keys()
                  if gcs_post_allowed(gcs, k) != k.startswith(f"ax/{GRANT.records}")]
    assert not wrong_post, wrong_post[:10]
    wrong_token = [k for k in ATTACK.keys()
                   if gcs_token_allowed(gcs, k) != k.startswith(f"ax/checkpoints/{MINE}/")]
    assert not wrong_token, wrong_token[:10]
    own = f"ax/runs/{RUN}/{MINE}.1.jsonl"
    assert gcs_post_allowed(gcs, own, MAX_OBJECT_BYTES)
    assert not gcs_post_allowed(gcs, own, MAX_OBJECT_BYTES + 1)  # the size cap


SEGMENT = st.one_of(
    st.sampled_from([RUN, f"{RUN}-1a2b", ATTACK.closed, "runs", "ends", "launches", "flags",
                     "starts", "checkpoints", "..", ".", MINE, OTHER, OTHER2, f"{MINE}.1",
                     f"{MINE}.1.jsonl", f"{OTHER}.1", "ax", ""]),
    st.text(alphabet=FILLER + "./*?", min_size=1, max_size=26),
    st.integers(1, 30).map(lambda n: (FILLER * 2)[:n]),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(SEGMENT, min_size=1, max_size=6), root=st.sampled_from(["ax/", "", "ax/ax/", "other/"]))
def test_grants_hypothesis_keys_around_the_layout_match_the_rule_on_both_clouds(gcs, parts, root):
    """Keys hypothesis assembles from the layout's segments, runs of any length and stray
    `/`, `.`, `*`, `?`: every grant allows a key iff it is the group's."""
    key = root + "/".join(parts)
    records = key.startswith(f"ax/{GRANT.records}")
    assert s3_put_allowed(session_policy(), key) == ATTACK.owned(key), key
    assert gcs_post_allowed(gcs, key) == records, key
    assert gcs_token_allowed(gcs, key) == key.startswith(f"ax/checkpoints/{MINE}/"), key
