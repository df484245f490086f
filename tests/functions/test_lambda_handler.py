"""The Lambda adapter with function-URL and scheduler events, over the real control logic
(`functions/app.handle` → `spotbench.control`) and the `aws` driver against a real
moto_server on 127.0.0.1 holding the sweep's tagged instances.

The function URL itself (SigV4 verification) is AWS's: the events here are what it hands
the Lambda after verifying, built like the documented payload format 2.0.
"""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import boto3
import pytest

from functions import lambda_handler
from spotbench.clouds.aws.identity import member_role_name
from spotbench.results import Result, ResultStore, utcnow
from spotbench.spec import load_spec
from tests.moto_server import MotoServer

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
SPEC = {"name": "lx", "cloud": "aws", "region": REGION, "workload": {"name": "osu"},
        "matrix": {"machine_type": ["c5n.large"]}, "trials": 2}
ROLE = member_role_name("lx", REGION)  # every member's role (one per sweep, issue #29)
CONTEXT = SimpleNamespace(invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:lx-done")


@pytest.fixture
def sweep(moto_url, monkeypatch, tmp_path):
    """A 2-group OSU sweep on aws: instances tagged as the Pulumi stack tags them, stopped."""
    spec = load_spec(SPEC)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": moto_url, "SPOTBENCH_CLOUD": "aws",
        "SPOTBENCH_SPEC": spec.model_dump_json(),
        "SPOTBENCH_RESULTS_URL": f"file://{tmp_path}/results",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(lambda_handler, "_config", None)
    MotoServer.reset_url(moto_url)
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)
    image = MotoServer.any_image(ec2)
    ids: dict[str, list[str]] = {}
    for group in spec.plan():
        for member in group.members:
            tags = {**group.member_labels(member), "Name": member.name}
            out = ec2.run_instances(
                ImageId=image, InstanceType="c5n.large", MinCount=1, MaxCount=1,
                TagSpecifications=[{"ResourceType": "instance",
                                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
            )
            ids.setdefault(group.id, []).append(out["Instances"][0]["InstanceId"])
    ec2.stop_instances(InstanceIds=[i for group_ids in ids.values() for i in group_ids])
    return SimpleNamespace(spec=spec, groups=spec.plan(), ids=ids, ec2=ec2, monkeypatch=monkeypatch,
                           store=ResultStore(f"file://{tmp_path}/results"))


def store_result(sweep, run: str, group: str) -> None:
    """What the workload does before it calls done: store its (complete) records."""
    now = utcnow()
    sweep.store.write_group(run, group, [Result(
        sweep=sweep.spec.name, run=run, group=group, trial=1, workload="osu", metric="latency",
        value=1.0, unit="us", cloud="aws", machine_type="c5n.large", started_at=now, ended_at=now)])


def states(sweep) -> dict[str, str]:
    out = {}
    for reservation in sweep.ec2.describe_instances()["Reservations"]:
        for inst in reservation["Instances"]:
            out[inst["InstanceId"]] = inst["State"]["Name"]
    return out


def url_event(body, *, iam: dict | None, raw: str | None = None, b64: bool = False) -> dict:
    text = raw if raw is not None else json.dumps(body)
    if b64:
        text = base64.b64encode(text.encode()).decode()
    ctx = {"accountId": "anonymous", "http": {"method": "POST", "path": "/"}}
    if iam is not None:
        ctx["authorizer"] = {"iam": iam}
    return {"version": "2.0", "rawPath": "/", "headers": {"content-type": "application/json"},
            "requestContext": ctx, "body": text, "isBase64Encoded": b64}


def instance_iam(instance_id: str, account: str = ACCOUNT, role: str = ROLE) -> dict:
    return {"accountId": account, "userId": f"AROAEXAMPLE:{instance_id}",
            "userArn": f"arn:aws:sts::{account}:assumed-role/{role}/{instance_id}",
            "callerId": f"AROAEXAMPLE:{instance_id}", "accessKey": "ASIAEXAMPLE"}


def invoke_done(sweep, event):
    sweep.monkeypatch.setenv("SPOTBENCH_ACTION", "done")
    sweep.monkeypatch.setattr(lambda_handler, "_config", None)
    resp = lambda_handler.handler(event, CONTEXT)
    return resp["statusCode"], json.loads(resp["body"])


def start_all(sweep) -> dict:
    sweep.monkeypatch.setenv("SPOTBENCH_ACTION", "start")
    sweep.monkeypatch.setattr(lambda_handler, "_config", None)
    arn = f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/lx-start"
    return lambda_handler.handler({"schedule": arn, "body": {"tick": "2025-01-01T03:00:00Z"}}, CONTEXT)


def test_scheduler_start_then_member_done_stops_exactly_its_group(sweep):
    out = start_all(sweep)
    assert out["status"] == 200 and sorted(out["started"]) == sorted(sweep.ids)
    assert set(states(sweep).values()) == {"running"}

    g0, g1 = sweep.groups[0].id, sweep.groups[1].id
    me = sweep.ids[g0][1]
    store_result(sweep, out["run"], g0)
    status, body = invoke_done(sweep, url_event({"group": g0}, iam=instance_iam(me)))

    assert status == 200, body
    assert body["group"] == g0 and sorted(body["stopped"]) == sorted(sweep.ids[g0])
    now = states(sweep)
    assert {now[i] for i in sweep.ids[g0]} == {"stopped"}
    assert {now[i] for i in sweep.ids[g1]} == {"running"}


def test_member_of_another_group_is_403_and_nothing_stops(sweep):
    start_all(sweep)
    g0, g1 = sweep.groups[0].id, sweep.groups[1].id
    status, body = invoke_done(sweep, url_event({"group": g1}, iam=instance_iam(sweep.ids[g0][0])))
    assert status == 403 and g0 in body["error"]
    assert set(states(sweep).values()) == {"running"}


def test_unsigned_other_account_and_non_instance_callers_are_refused(sweep):
    start_all(sweep)
    g0 = sweep.groups[0].id
    me = sweep.ids[g0][0]
    status, body = invoke_done(sweep, url_event({"group": g0}, iam=None))
    assert status == 401 and "not signed" in body["error"]
    status, body = invoke_done(sweep, url_event({"group": g0}, iam=instance_iam(me, "210987654321")))
    assert status == 403 and "account" in body["error"]
    status, _ = invoke_done(sweep, url_event({"group": g0}, iam=instance_iam(me, role="admin")))
    assert status == 403
    status, body = invoke_done(sweep, url_event({"group": g0}, iam=instance_iam("alice")))
    assert status == 403 and "instance id" in body["error"]
    stranger = "i-0123456789abcdef0"  # well-formed, but not an instance of this sweep
    status, body = invoke_done(sweep, url_event({"group": g0}, iam=instance_iam(stranger)))
    assert status == 403 and "not part of sweep" in body["error"]
    assert set(states(sweep).values()) == {"running"}


def test_malformed_bodies_are_400(sweep):
    me = sweep.ids[sweep.groups[0].id][0]
    status, body = invoke_done(sweep, url_event(None, iam=instance_iam(me), raw="{not json"))
    assert status == 400 and "not valid JSON" in body["error"]
    status, body = invoke_done(sweep, url_event(None, iam=instance_iam(me), raw="[1, 2]"))
    assert status == 400 and "JSON object" in body["error"]
    status, body = invoke_done(sweep, url_event({"grp": "x"}, iam=instance_iam(me)))
    assert status == 400 and "group" in body["error"]


def test_base64_bodies_are_decoded(sweep):
    start_all(sweep)
    g0 = sweep.groups[0].id
    event = url_event({"group": g0}, iam=instance_iam(sweep.ids[g0][0]), b64=True)
    status, body = invoke_done(sweep, event)
    assert status == 200 and body["group"] == g0


def test_scheduler_stop_closes_the_run_and_server_errors_raise_for_retry(sweep):
    start_all(sweep)
    sweep.monkeypatch.setenv("SPOTBENCH_ACTION", "stop")
    sweep.monkeypatch.setattr(lambda_handler, "_config", None)
    arn = f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/lx-stop"
    out = lambda_handler.handler({"schedule": arn, "body": {"reason": "deadline"}}, CONTEXT)
    assert out["status"] == 200 and out.get("closed") is True
    assert set(states(sweep).values()) == {"stopped"}

    # EC2 unreachable → control answers 500 → the invocation fails so the scheduler retries.
    sweep.monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    sweep.monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    sweep.monkeypatch.setattr(lambda_handler, "_config", None)
    with pytest.raises(lambda_handler.InvocationFailed, match="stop failed"):
        lambda_handler.handler({"schedule": arn, "body": {}}, CONTEXT)
