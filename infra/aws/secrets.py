"""The sweep's entries in SSM Parameter Store, which the functions alone read: the one key
seed every group's ssh keys derive from, and a `container` group's env file.

User-data is readable by anyone allowed `ec2:DescribeInstanceAttribute` and, on the VM, by
any process that reaches IMDS: it carries the public key files only. The private keys are in
no parameter: the sweep keeps one `SecureString` `/spotbench/<sweep>/key-seed.hex`
(`seed_parameter`, encrypted with the account's AWS-managed `aws/ssm` key), whatever its
group count (issue #29), and each group's login and sshd host keys are derived from it
(`spotbench.auth.group_keys`, as on GCP): the deployment derives the public halves
(authorized_keys, known_hosts), the function derives a group's private halves for that
group's instances only (its `keys` path, functions/aws_grants.py), and the unit's
`fetch-keys` step (infra/aws/user_data.py) asks it for them at boot. A container group's
env is a parameter `/spotbench/<sweep>/<group>/user.env` (base64, one line, so the boot's
`sed` reads it from the JSON answer without a JSON parser: the AMIs have none). Only the
functions' role may `ssm:GetParameter` under the sweep's path (`keys_arn`,
infra/aws/identity.py: one grant per sweep, whatever its group count).
"""

from __future__ import annotations

import base64

import pulumi
import pulumi_aws as aws

from spotbench.clouds.aws.grants import group_secret_path, seed_parameter_name


def keys_path(sweep: str, group: str) -> str:
    """The parameter path holding run group `group`'s entries, under the sweep's path (the
    functions read it there: one home, `spotbench.clouds.aws.grants`)."""
    return group_secret_path(sweep, group)


def sweep_path(sweep: str) -> str:
    """The sweep's one parameter path: every group's entry lies under it."""
    return f"/spotbench/{sweep}"


def keys_arn(region: str, account: str, sweep: str) -> str:
    """Every parameter under the sweep's path, which the functions' role alone reads (a
    name with a leading `/` is the ARN's `parameter/...` without a second slash)."""
    return f"arn:aws:ssm:{region}:{account}:parameter{sweep_path(sweep)}/*"


def encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def seed_parameter(name: str, sweep: str, seed_hex: pulumi.Output, tags: dict[str, str],
                   opts: pulumi.ResourceOptions) -> aws.ssm.Parameter:
    """The SecureString holding the sweep's key seed (hex), which every group's ssh keys
    derive from; the functions alone read it."""
    return aws.ssm.Parameter(
        f"{name}-key-seed", name=seed_parameter_name(sweep), type="SecureString",
        value=pulumi.Output.secret(seed_hex), tier="Standard",
        description=f"spotbench {sweep}: the seed every group's ssh keys derive from (hex)",
        tags=tags, opts=opts)


USER_ENV = "user.env"  # a container group's env file (the spec's `env`), beside its keys
STANDARD_VALUE_MAX = 4096  # characters of a Standard-tier parameter's value (base64 here)


class EnvTooLarge(ValueError):
    """The container env does not fit one Standard-tier SSM parameter."""


def user_env_parameter(name: str, sweep: str, group: str, text: str, tags: dict[str, str],
                       opts: pulumi.ResourceOptions) -> aws.ssm.Parameter:
    """The group's env file as a SecureString under its own path (the functions alone read
    it, and hand it to the group's members only), fetched at boot by the unit's `fetch-keys` step."""
    value = encode(text)
    if len(value) > STANDARD_VALUE_MAX:
        raise EnvTooLarge(f"group {group}: the container env is {len(text.encode())} bytes; one SSM "
                          f"Standard parameter holds {STANDARD_VALUE_MAX} characters of base64 "
                          "(about 3 KiB of env): shorten `env` (or pass large values as files)")
    return aws.ssm.Parameter(
        f"{name}-{group}-{USER_ENV}", name=f"{keys_path(sweep, group)}/{USER_ENV}",
        type="SecureString", value=pulumi.Output.secret(value), tier="Standard",
        description=f"spotbench {sweep}: the container env of group {group} (base64)",
        tags=tags, opts=opts)
