"""Schedule control on AWS: EventBridge Scheduler + the start Lambda on a real moto_server."""

from __future__ import annotations

import io
import json
import zipfile

import boto3
import pytest
import requests

from spotbench.ops.schedule import describe
from spotbench.clouds.aws.scheduler import AwsSchedule
from spotbench.spec import load_spec

REGION = "us-east-1"


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("handler.py", "def start(event, context):\n    return event\n")
    return buf.getvalue()


@pytest.fixture
def deployed(moto_url):
    """What the AWS stack deploys for sweep `osu`: a start Lambda and the schedule pair."""
    requests.post(moto_url + "/moto-api/config", json={"lambda": {"use_docker": False}}, timeout=10)
    iam = boto3.client("iam", region_name=REGION, endpoint_url=moto_url)
    role = iam.create_role(RoleName="sched", AssumeRolePolicyDocument=json.dumps({}))["Role"]["Arn"]
    lam = boto3.client("lambda", region_name=REGION, endpoint_url=moto_url)
    fn = lam.create_function(
        FunctionName="osu-start", Runtime="python3.12", Role=role, Handler="handler.start",
        Code={"ZipFile": _zip()},
    )["FunctionArn"]
    sched = boto3.client("scheduler", region_name=REGION, endpoint_url=moto_url)
    for name, cron in (("osu-start", "cron(0 3 * * ? *)"), ("osu-stop", "cron(30 3 * * ? *)")):
        sched.create_schedule(
            Name=name, ScheduleExpression=cron, ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"}, State="ENABLED",
            Target={"Arn": fn, "RoleArn": role, "Input": json.dumps({"tick": "scheduled"})},
        )
    return sched


def _spec():
    return load_spec({
        "name": "osu", "cloud": "aws", "region": REGION, "workload": {"name": "osu"},
        "matrix": {"machine_type": ["c5.large"]}, "schedule": {"cron": "0 3 * * *"},
        "deadline": "30m",
    })


def test_pause_resume_touch_only_the_start_schedule(deployed, moto_url):
    control = AwsSchedule.for_spec(_spec(), endpoint_url=moto_url)
    assert "DISABLED" in control.pause()
    assert deployed.get_schedule(Name="osu-start")["State"] == "DISABLED"
    assert deployed.get_schedule(Name="osu-stop")["State"] == "ENABLED"
    start = deployed.get_schedule(Name="osu-start")
    assert start["ScheduleExpression"] == "cron(0 3 * * ? *)"  # definition kept whole
    assert json.loads(start["Target"]["Input"]) == {"tick": "scheduled"}
    info = describe(_spec(), control)
    assert info.paused is True and info.jobs == {"osu-start": "DISABLED", "osu-stop": "ENABLED"}

    assert "ENABLED" in control.resume()
    assert deployed.get_schedule(Name="osu-start")["State"] == "ENABLED"
    assert describe(_spec(), control).paused is False


def test_run_now_invokes_the_start_lambda(deployed, moto_url):
    control = AwsSchedule.for_spec(_spec(), endpoint_url=moto_url)
    assert "osu-start" in control.run_now()
    lam = boto3.client("lambda", region_name=REGION, endpoint_url=moto_url)
    lam.delete_function(FunctionName="osu-start")
    with pytest.raises(Exception, match="osu-start|Function not found"):
        control.run_now()  # the target Lambda is gone: an error, not a silent success


def test_unknown_sweep_is_an_error(deployed, moto_url):
    control = AwsSchedule("nope", REGION, endpoint_url=moto_url)
    with pytest.raises(Exception, match="nope-start|ResourceNotFound"):
        control.pause()
