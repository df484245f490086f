"""Attack: a member VM invokes the `done` Lambda directly with a forged function-URL event.

The function URL is what verifies the SigV4 signer and writes it into
`requestContext.authorizer.iam`; a direct `lambda:Invoke` lets the caller write that field
itself, naming an instance of ANOTHER group, and stop it. AWS's decision is taken on the
instance role's policy as the Pulumi program declares it (read from the mocks), evaluated
with the request context each path carries (`tests/iam/policy.py`: moto ignores these
condition keys); what IAM lets through goes to the real Lambda adapter over moto's EC2.
"""

from __future__ import annotations

import json

import pytest

from functions import lambda_handler
from infra.preview import _computed
from spotbench.spec import load_spec
from tests.functions.test_lambda_handler import (  # noqa: F401 - sweep: a fixture (moto_url: tests/conftest.py)
    CONTEXT,
    instance_iam,
    start_all,
    states,
    store_result,
    sweep,
    url_event,
)
from tests.iam.policy import allowed

pytestmark = pytest.mark.security

POLICY = "aws:iam/rolePolicy:RolePolicy"
FUNCTION = "aws:lambda/function:Function"


@pytest.fixture
def declared(declare, sweep):
    """The member role's policy (one per sweep) and the done function's ARN, as `pulumi up`
    would make them for the same spec the moto instances belong to."""
    from infra.aws import AwsSweep, AwsSweepArgs

    spec = load_spec({**sweep.spec.model_dump(mode="json", exclude_none=True),
                      "schedule": {"cron": "0 3 * * *", "timezone": "UTC"}})
    mocks = declare(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)))
    policy = json.loads(mocks.one(POLICY, f"{spec.name}-id-member").inputs["policy"])
    done = next(f for f in mocks.of_type(FUNCTION) if f.inputs["name"] == f"{spec.name}-done")
    return policy, _computed(done.type, done.name, done.inputs)["arn"]  # the mock's ARN


def member_call(sweep, declared, event: dict, *, via_url: bool):
    """A member's request as AWS handles it: IAM first, then the Lambda (None: AccessDenied)."""
    policy, done_arn = declared
    if via_url:
        if not allowed([policy], "lambda:InvokeFunctionUrl", done_arn,
                       {"lambda:FunctionUrlAuthType": "AWS_IAM"}):
            return None
        context = {"lambda:InvokedViaFunctionUrl": "true", "lambda:FunctionUrlAuthType": "AWS_IAM"}
    else:
        context = {}  # a plain Invoke carries neither key
    if not allowed([policy], "lambda:InvokeFunction", done_arn, context):
        return None
    sweep.monkeypatch.setenv("SPOTBENCH_ACTION", "done")
    sweep.monkeypatch.setattr(lambda_handler, "_config", None)
    return lambda_handler.handler(event, CONTEXT)


def test_direct_invoke_with_a_forged_url_event_stops_nothing(sweep, declared):
    out = start_all(sweep)
    g0, g1 = sweep.groups[0].id, sweep.groups[1].id
    victim = sweep.ids[g1][0]
    store_result(sweep, out["run"], g1)
    forged = url_event({"group": g1}, iam=instance_iam(victim))  # written by a g0 member

    answer = member_call(sweep, declared, forged, via_url=False)

    assert answer is None, f"IAM let a direct invoke of done through: {answer}"
    assert {states(sweep)[i] for i in sweep.ids[g1]} == {"running"}


def test_through_the_url_a_member_still_stops_its_own_group(sweep, declared):
    out = start_all(sweep)
    g0 = sweep.groups[0].id
    me = sweep.ids[g0][1]
    store_result(sweep, out["run"], g0)

    answer = member_call(sweep, declared, url_event({"group": g0}, iam=instance_iam(me)),
                         via_url=True)

    assert answer is not None and answer["statusCode"] == 200, answer
    assert {states(sweep)[i] for i in sweep.ids[g0]} == {"stopped"}


def test_each_lambda_takes_only_its_own_kind_of_event(sweep):
    start_all(sweep)
    g0 = sweep.groups[0].id
    me = sweep.ids[g0][0]
    sweep.monkeypatch.setenv("SPOTBENCH_ACTION", "done")
    sweep.monkeypatch.setattr(lambda_handler, "_config", None)
    out = lambda_handler.handler({"schedule": "arn:aws:scheduler:x", "body": {"group": g0}}, CONTEXT)
    assert out["status"] == 403 and "function URL" in out["error"]

    for action in ("start", "stop"):
        sweep.monkeypatch.setenv("SPOTBENCH_ACTION", action)
        sweep.monkeypatch.setattr(lambda_handler, "_config", None)
        out = lambda_handler.handler(url_event({}, iam=instance_iam(me)), CONTEXT)
        assert out["statusCode"] == 403 and "no function URL" in json.loads(out["body"])["error"]
    assert {states(sweep)[i] for i in sweep.ids[g0]} == {"running"}
