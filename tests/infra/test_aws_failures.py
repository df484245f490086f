"""EventBridge Scheduler invokes start/stop asynchronously: the schedule's retries cover
delivering the event to Lambda, Lambda's own retries a failing function, and after either
gives up the event is dropped unless it has somewhere to go. Each sweep declares one SQS
queue both send to, and only the roles that send may (asserted from the mocks' inputs)."""

from __future__ import annotations

import json

import pytest

from infra.aws.failures import LAMBDA_RETRIES, MAX_EVENT_AGE_S, RETENTION_S, queue_name
from tests.infra.test_aws import POLICY, SCHEDULE, sweep

QUEUE = "aws:sqs/queue:Queue"
INVOKE_CONFIG = "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig"


def _statements(mocks) -> list[tuple[str, dict]]:
    return [(p.inputs["role"], s) for p in mocks.of_type(POLICY)
            for s in json.loads(p.inputs["policy"])["Statement"]]


@pytest.mark.fidelity
def test_aws_failed_start_and_stop_invocations_land_in_the_sweeps_queue(declare):
    _, mocks = sweep(declare)
    [queue] = mocks.of_type(QUEUE)
    assert queue.inputs["name"] == queue_name("ax")
    assert queue.inputs["messageRetentionSeconds"] == RETENTION_S
    assert queue.inputs["sqsManagedSseEnabled"] is True
    arn = f"arn:aws:sqs:us-east-1:123456789012:{queue.name}"  # what the mocks give it
    # Lambda's own retries of a failing function, then the on-failure destination
    configs = {c.inputs["functionName"]: c.inputs for c in mocks.of_type(INVOKE_CONFIG)}
    assert sorted(configs) == ["ax-start", "ax-stop"]
    for name, config in configs.items():
        action = name.removeprefix("ax-")
        assert config["maximumRetryAttempts"] == LAMBDA_RETRIES
        assert config["maximumEventAgeInSeconds"] == MAX_EVENT_AGE_S[action]
        assert config["destinationConfig"]["onFailure"]["destination"] == arn
    # the scheduler's retries of the delivery, then its dead-letter queue
    for schedule in mocks.of_type(SCHEDULE):
        target = schedule.inputs["target"]
        assert target["retryPolicy"]["maximumRetryAttempts"] >= 1
        assert target["deadLetterConfig"]["arn"] == arn
    # who may send: the functions' role (Lambda's destination) and the scheduler's (its
    # DLQ), that queue only; no other role touches SQS
    senders = {role for role, s in _statements(mocks)
               if any(a.startswith("sqs:") for a in ([s["Action"]] if isinstance(s["Action"], str)
                                                     else s["Action"]))}
    assert {r.removesuffix("-id") for r in senders} == {"ax-id-lambda", "ax-id-scheduler"}
    for role, s in _statements(mocks):
        if s["Action"] == "sqs:SendMessage":
            assert s["Resource"] == arn, (role, s)


def test_aws_the_queue_name_fits_sqs_for_every_sweep_name():
    """SQS queue names: 1-80 characters of letters, digits, `-` and `_` (CreateQueue); the
    longest sweep name the spec allows (24) still fits."""
    import re

    from spotbench.spec import NAME_PATTERN

    longest = "a" * 24
    assert re.match(NAME_PATTERN, longest) and not re.match(NAME_PATTERN, longest + "a")
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,80}", queue_name(longest))
