"""Does this machine have AWS credentials? Asked before an operator command calls the
cloud, so a missing login is one line in a second or two — not boto3 probing the instance
metadata service per client, and its tracebacks.

The SDK's default credential chain (environment, shared files, SSO, container and instance
metadata), asked once.
https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html
"""

from __future__ import annotations

import os
from collections.abc import Mapping

AWS_FIX = ("run `aws configure` or `aws sso login` (or set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
           "AWS_SECRET_ACCESS_KEY)")


def aws_problem(env: Mapping[str, str] | None = None) -> str | None:
    import boto3

    env = os.environ if env is None else env
    try:
        found = boto3.Session(profile_name=env.get("AWS_PROFILE") or None).get_credentials()
    except Exception as exc:  # noqa: BLE001 - a broken profile is a credentials problem too
        return f"AWS credentials cannot be read ({exc}): {AWS_FIX}"
    return None if found is not None else f"no AWS credentials on this machine: {AWS_FIX}"
