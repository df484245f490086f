"""TF checkpoints on S3 under IAM enforcement, with the policies the program declares.

A `tf-mnist` member with `checkpoint_every` stores its checkpoints under the sweep's results
prefix (`workloads/tf_mnist/checkpoints.py`) and a restarted group restores them. The path
runs here as the chief does on its instance, with its group's grant (issue #29: the grant
role's session the function mints, narrowed to `checkpoints/<group>/` by its session
policy; the instance role itself writes nothing): build and
restore the model (nothing stored yet), save twice (the older checkpoint is removed), record
the step a preempted attempt reached, then a new attempt restores the latest checkpoint and
reads that progress, and a complete run clears them. Any denied call fails the test.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from spotbench.clouds.aws.identity import grant_role_name, signed_post
from spotbench.spec import load_spec
from tests.iam.account import EnforcedAccount, environment
from tests.iam.deployment import Declared, Deployed, declare, deploy
from tests.iam.policy import evaluate
from tests.moto_server import MotoServer

pytestmark = pytest.mark.fidelity

REGION = "us-east-1"
BUCKET = "spotbench-iam-ckpt"
SPEC = {
    "name": "tfx", "cloud": "aws", "region": REGION, "zone": f"{REGION}a",
    "workload": {"name": "tf-mnist", "strategy": "parameter_server", "workers": 1, "ps": 1,
                 "steps": 40, "checkpoint_every": 10},
    "matrix": {"machine_type": ["c5.large"]}, "trials": 1,
    "results": f"s3://{BUCKET}/tfx", "schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
    "deadline": "45m", "image": f"123456789012.dkr.ecr.{REGION}.amazonaws.com/spotbench/tf:1",
}
RUN = "20260105T030000Z"


@pytest.fixture(scope="module")
def declared() -> Declared:
    return declare(load_spec(SPEC))


@pytest.fixture(scope="module")
def deployed(declared):
    with MotoServer() as url, EnforcedAccount(url, REGION) as account:
        yield deploy(account, declared, BUCKET)


def chief(d: Deployed) -> str:
    return next(n for n, c in d.contexts.items() if c.role == "chief")


def member_env(d: Deployed, name: str) -> dict[str, str]:
    return {**d.member(name).env(), "AWS_ENDPOINT_URL": d.account.url, "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION}


def granted(d: Deployed, name: str):
    """The chief's group's grant (the function's `/grant`), once the group is launched."""
    answer = signed_post(d.done_url + "grant", {}, region=REGION,
                         credentials=d.member(name).credentials())
    assert answer.status_code == 200, answer.text
    creds = answer.json()["credentials"]
    return d.account.principal_of(creds["AccessKeyId"]), {
        "key": creds["AccessKeyId"], "secret": creds["SecretAccessKey"],
        "token": creds["SessionToken"]}


def test_aws_tf_checkpoints_save_and_restore_with_the_member_policy(deployed, declared):
    import tensorflow as tf

    from workloads.tf_mnist import model as m
    from workloads.tf_mnist.checkpoints import CheckpointStore

    d = deployed
    name = chief(d)
    ctx = d.contexts[name]
    d.tick("start")  # the group is launched: the function grants it its checkpoints
    grant, options = granted(d, name)
    strategy = tf.distribute.get_strategy()
    with environment(member_env(d, name)):
        store = CheckpointStore(ctx.results_url, ctx.group, RUN, **options)
        model, step, checkpoint, start, redone = m.build_and_restore(strategy, store)
        assert (start, redone) == (0, 0)
        for at in (10, 20):
            step.assign(at)
            store.save(checkpoint, at)
        store.write_progress(27)
        trained = [v.numpy().copy() for v in model.trainable_variables]

    with environment(member_env(d, name)):  # the group restarted: a new attempt, a new process
        store = CheckpointStore(ctx.results_url, ctx.group, RUN, **options)
        model, step, checkpoint, start, redone = m.build_and_restore(strategy, store)
        assert (start, redone, int(step.numpy())) == (20, 7, 20)
        assert all((a == v.numpy()).all() for a, v in zip(trained, model.trainable_variables))
        store.clear()

    assert d.account.denial_lines() == []
    assert not d.account.errors, d.account.errors
    s3 = d.account.admin("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
            if "/checkpoints/" in o["Key"]]
    assert keys == [], keys  # cleared (and the step-10 checkpoint was gone before)
    role = grant_role_name("tfx", REGION)
    mine = [r for r in d.account.decisions if r.role == role]
    used = {(r.auth.action, r.decision.by) for r in mine}
    assert {("s3:ListBucket", "ListCheckpoints"), ("s3:GetObject", "Checkpoints"),
            ("s3:DeleteObject", "Checkpoints"), ("s3:PutObject", "Checkpoints")} <= used
    # least privilege: without either checkpoint statement a call of this path is refused
    for sid in ("Checkpoints", "ListCheckpoints"):
        smaller = declared.without(role, sid).policies[role]
        assert not all(evaluate(smaller, r.auth) for r in mine), sid

    # and they reach no further: the grant still cannot delete or read results, nor list
    # beyond the group's checkpoints (the sweep's records stay out of its reach)
    member = d.account.client("s3", grant)
    with d.account.setup():
        s3.put_object(Bucket=BUCKET, Key="tfx/runs/r/g.1.jsonl", Body=b"{}")
    for call in (lambda: member.delete_object(Bucket=BUCKET, Key="tfx/runs/r/g.1.jsonl"),
                 lambda: member.get_object(Bucket=BUCKET, Key="tfx/runs/r/g.1.jsonl"),
                 lambda: member.list_objects_v2(Bucket=BUCKET, Prefix="tfx/")):
        with pytest.raises(ClientError, match="AccessDenied"):
            call()
    # another group's checkpoints, and the instance role itself: refused (issue #29)
    with pytest.raises(ClientError, match="AccessDenied"):
        member.put_object(Bucket=BUCKET, Key=f"tfx/checkpoints/tfx--000000-t9/{RUN}/x", Body=b"{}")
    role_only = d.account.client("s3", d.member(name))
    with pytest.raises(ClientError, match="AccessDenied"):
        role_only.put_object(Bucket=BUCKET, Key=f"tfx/checkpoints/{ctx.group}/{RUN}/x", Body=b"{}")
