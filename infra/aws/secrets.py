"""A run group's ssh private keys — and a `container` group's env file — in SSM Parameter
Store, for its members only.

User-data is readable by anyone allowed `ec2:DescribeInstanceAttribute` and, on the VM, by
any process that reaches IMDS: it carries the public key files only. Each private key
(`infra.keys.private_keys`: the login key, the sshd host key) is one `SecureString`
parameter `/spotbench/<sweep>/<group>/<file>` (encrypted with the account's AWS-managed
`aws/ssm` key), holding the key base64-encoded (one line, so the boot's `sed` reads it
from the JSON answer without a JSON parser: the AMIs have none). Only that group's
the functions' role may `ssm:GetParameter` under the sweep's path (`keys_arn`,
infra/aws/identity.py: one grant per sweep, whatever its group count); the function's `keys`
path hands a group's entries to that group's instances only (functions/aws_grants.py), and
the unit's `fetch-keys` step (infra/aws/user_data.py) asks it for them at boot.
"""

from __future__ import annotations

import base64

import pulumi
import pulumi_aws as aws

from infra.keys import HOST_KEY, LOGIN_KEY, SshKeys, private_keys
from spotbench.clouds.aws.grants import group_secret_path


def keys_path(sweep: str, group: str) -> str:
    """The parameter path holding run group `group`'s keys, under the sweep's path (the
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


def group_key_parameters(name: str, sweep: str, group: str, keys: pulumi.Output[SshKeys],
                         tags: dict[str, str], opts: pulumi.ResourceOptions
                         ) -> dict[str, aws.ssm.Parameter]:
    """file name → the SecureString parameter holding that private key of `group` (its
    members' login key and sshd host key: `mpi_keys` makes both)."""
    out = {}
    for file in (LOGIN_KEY, HOST_KEY):
        value = keys.apply(lambda k, f=file: encode(private_keys(k)[f]))
        out[file] = aws.ssm.Parameter(
            f"{name}-{group}-{file}", name=f"{keys_path(sweep, group)}/{file}",
            type="SecureString", value=pulumi.Output.secret(value), tier="Standard",
            description=f"spotbench {sweep}: ssh {file} of group {group} (base64)",
            tags=tags, opts=opts)
    return out


USER_ENV = "user.env"  # a container group's env file (the spec's `env`), beside its keys
STANDARD_VALUE_MAX = 4096  # characters of a Standard-tier parameter's value (base64 here)


class EnvTooLarge(ValueError):
    """The container env does not fit one Standard-tier SSM parameter."""


def user_env_parameter(name: str, sweep: str, group: str, text: str, tags: dict[str, str],
                       opts: pulumi.ResourceOptions) -> aws.ssm.Parameter:
    """The group's env file as a SecureString under its own path (the same grant as its
    keys: only its member role reads it), fetched at boot by the unit's `fetch-keys` step."""
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
