"""AWS identity both ways: the VM signs `done` (SigV4), the Lambda reads who signed it.

- `signed_post()` runs on a member VM: it signs the POST with the instance role's
  credentials (botocore's chain: IMDSv2 on EC2, env vars elsewhere) for service `lambda`,
  which is what a function URL with `AWS_IAM` auth verifies.
- `caller_from_function_url()` runs in the Lambda: the function URL has already verified the
  signature and put the signer into `requestContext.authorizer.iam`. An EC2 instance role's
  session is named after the instance (`arn:aws:sts::ACCT:assumed-role/ROLE/i-0abc…`), so
  the caller is `Caller("member", "i-0abc…")`. Every member of a sweep
  runs as one role (`member_role_name`): which group an instance speaks for comes from the
  sweep's own records (the instance's deployer-written tags), never from the caller.
- A member asks the function for its group's storage grant or keys with the same signature
  (`spotbench.clouds.aws.member_grant`).

Only botocore is used here (signing); EC2 calls stay in `spotbench.clouds.aws.ec2`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import requests

from spotbench.auth import Caller, Forbidden, Unauthorized

_URL_REGION = re.compile(r"\.lambda-url\.([a-z0-9-]+)\.on\.aws")
_ASSUMED_ROLE = re.compile(
    r"^arn:aws[a-z-]*:sts::(?P<account>\d{12}):assumed-role/(?P<role>[\w+=,.@-]+)/(?P<session>[\w+=,.@-]+)$"
)
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
_FUNCTION_ARN = re.compile(r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:(?P<account>\d{12}):function:")


def url_region(url: str) -> str | None:
    """The region of a Lambda function URL (`https://ID.lambda-url.REGION.on.aws/`)."""
    match = _URL_REGION.search(url)
    return match.group(1) if match else None


def signed_post(
    url: str,
    body: Mapping[str, Any],
    timeout: float = 30,
    *,
    region: str | None = None,
    credentials: Any = None,
) -> requests.Response:
    """POST `body` as JSON to a function URL, signed with SigV4 (service `lambda`)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.session import Session

    region = (region or url_region(url) or os.environ.get("AWS_REGION")
              or os.environ.get("AWS_DEFAULT_REGION"))
    if not region:
        raise ValueError(f"cannot tell the AWS region of {url}; set AWS_REGION")
    if credentials is None:
        credentials = Session().get_credentials()
    if credentials is None:
        raise Unauthorized(
            "no AWS credentials to sign the done call: on EC2 the instance needs its "
            "instance profile (and IMDSv2 reachable: hop limit 2 for containers)"
        )
    data = json.dumps(dict(body)).encode()
    request = AWSRequest(method="POST", url=url, data=data,
                         headers={"Content-Type": "application/json"})
    SigV4Auth(credentials.get_frozen_credentials(), "lambda", region).add_auth(request)
    return requests.post(url, data=data, headers=dict(request.headers.items()), timeout=timeout)


def function_account(invoked_function_arn: str) -> str:
    """The account id of the Lambda itself (from `context.invoked_function_arn`)."""
    match = _FUNCTION_ARN.match(invoked_function_arn or "")
    if not match:
        raise ValueError(f"not a Lambda function ARN: {invoked_function_arn!r}")
    return match.group("account")


def _sweep_iam_name(sweep: str, region: str, what: str) -> str:
    name = f"{sweep}-{region}-{what}"
    if len(name) > 64:
        raise ValueError(f"sweep {sweep!r} in {region} is too long for an IAM role name ({name}); "
                         "use a shorter sweep name")
    return name


def member_role_name(sweep: str, region: str) -> str:
    """The IAM role (and instance profile) every member of sweep `sweep` runs as: one per
    sweep, whatever its group count (issue #29, docs/identity.md). IAM names are account-wide,
    so the region is part of it: the same sweep deployed in two regions does not collide.
    Sweep names are at most 24 characters, regions 14: within IAM's 64."""
    return _sweep_iam_name(sweep, region, "member")


def grant_role_name(sweep: str, region: str) -> str:
    """The role the functions assume (with a per-group session policy) to mint a group's
    storage grant (`spotbench.clouds.aws.grants`)."""
    return _sweep_iam_name(sweep, region, "grant")


def caller_from_function_url(event: Mapping[str, Any], *, account: str, member_role: str) -> Caller:
    """The member instance that signed a function-URL request: an EC2 instance session
    (`arn:aws:sts::ACCT:assumed-role/<member_role>/<instance id>`) of the sweep's member role
    in the function's own account. Which group it speaks for is not said here: the function
    looks the instance up among the sweep's own (`spotbench.auth.instance`, the EC2 lookup).

    Raises `Unauthorized` (401) when the request carries no IAM caller, and `Forbidden` (403)
    for another account, another role or a session that is not an EC2 instance id.
    """
    iam = ((event.get("requestContext") or {}).get("authorizer") or {}).get("iam")
    if not isinstance(iam, Mapping) or not iam.get("userArn"):
        raise Unauthorized("the request is not signed with AWS credentials (SigV4)")
    arn = str(iam["userArn"])
    caller_account = str(iam.get("accountId") or "")
    match = _ASSUMED_ROLE.match(arn)
    if match and not caller_account:
        caller_account = match.group("account")
    if caller_account != account or (match and match.group("account") != account):
        raise Forbidden(f"caller {arn} is from account {caller_account or '?'}, not {account}")
    if not match:
        raise Forbidden(f"caller {arn} is not an assumed role (expected an EC2 instance role)")
    role = match.group("role")
    if role != member_role:
        raise Forbidden(f"caller role {role} is not this sweep's member role ({member_role})")
    session = match.group("session")
    if not _INSTANCE_ID.match(session):
        raise Forbidden(f"caller session {session!r} is not an EC2 instance id")
    return Caller("member", session)  # EC2 names an instance by its id


def function_url_path(done_url: str, action: str) -> str:
    """The URL of `action` (`done`, `grant`, `keys`) on the sweep's function URL."""
    return done_url.rstrip("/") + "/" + action


def caller_from_invocation(event: Mapping[str, Any]) -> Caller:
    """A direct invocation (not via the function URL): IAM already allowed it.

    EventBridge Scheduler sends `{"schedule": "<schedule ARN>", "body": {...}}` (see
    `infra/aws/scheduler.py`) → `Caller("scheduler", ARN)`; any other direct invocation
    (`aws lambda invoke` by an operator holding lambda:InvokeFunction) → operator.
    """
    schedule = event.get("schedule")
    if isinstance(schedule, str) and schedule:
        return Caller("scheduler", schedule)
    return Caller("operator", "lambda-invoke")
