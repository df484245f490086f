"""What the AWS functions hand one run group: storage grants and its secret entries.

Isolation by instance, authorization by the functions (issue #29, docs/identity.md): every
member of a sweep runs as one role, which writes nothing. Once the function has mapped the
calling instance to its group (from the sweep's own records), it mints for that group:

- `session_policy()` + `assume_grant()`: `sts:AssumeRole` on the sweep's grant role with a
  session policy naming only `runs/<open run>/<group>.*` (put; `group_objects`: the run
  and group literal, the one `*` after `<group>.`) and, when the sweep keeps
  checkpoints, `checkpoints/<group>/*` (get/put/delete, list with that `s3:prefix`). AWS
  grants a session the intersection of the role's policy and the session policy. The
  functions' own credentials are a role session, so this is role chaining: at most 1 h
  (`MAX_CHAINED_S`); a member asks again for a fresh grant. The policy also refuses
  everything once `aws:CurrentTime` passes the group's deadline (`DateLessThan`), so a
  grant is worthless after it even though STS hands out at least 15 minutes.
- `presigned_post()`: an S3 POST policy for the group's records (`starts-with` on
  `$key` = `<prefix>/runs/<run>/<group>.`), each object at most `Grant.max_bytes`
  (`content-length-range`), expiring at the group's deadline (≤ 1 h).
- `read_secrets()`: the group's entries: its ssh login and host keys derived from the
  sweep's one key seed (`seed_parameter_name`, `spotbench.auth.group_keys`), a container's
  env from its parameter (`group_secret_path`); all under the sweep's one parameter path,
  which the functions' role alone may read.

Only botocore is used here (the STS, S3 and SSM clients of the function's own session);
endpoints follow `AWS_ENDPOINT_URL` (tests).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spotbench.auth.group_keys import KEY_FILES, private_openssh

MAX_CHAINED_S = 3600  # a role-chained session lasts at most 1 h (STS AssumeRole)
MIN_SESSION_S = 900  # STS's shortest DurationSeconds


def group_secret_path(sweep: str, group: str) -> str:
    """The parameter path of group `group`'s entries (ssh keys, a container's env), under the
    sweep's one path `/spotbench/<sweep>` (group ids hold no `/`)."""
    return f"/spotbench/{sweep}/{group}"


KEY_SEED = "key-seed.hex"  # group ids hold no `.`: no group's path is this name


def seed_parameter_name(sweep: str) -> str:
    """The SecureString holding the sweep's key seed (hex): every group's ssh keys derive
    from it (`spotbench.auth.group_keys`); the functions alone read it."""
    return f"/spotbench/{sweep}/{KEY_SEED}"


def under(prefix: str, path: str) -> str:
    """`path` (relative to the sweep's results root) as a key of the bucket."""
    return f"{prefix}/{path}" if prefix else path


def checkpoints_prefix(prefix: str, group: str) -> str:
    return under(prefix, f"checkpoints/{group}/")


def group_objects(bucket: str, prefix: str, records: str) -> list[str]:
    """ARNs of the objects run group `group` may store in the open run: every key under
    `records` (`Grant.records`, `runs/<open run>/<group>.`): `runs/<run>/<group>.<n>.jsonl`
    and `runs/<run>/<group>.<n>/<name>` (spotbench/results).

    In an IAM resource `*` and `?` match any characters, `/` included, so no wildcard may
    stand where another owner's key could follow: the run and the group are spelled out,
    and `<group>.` (group ids hold no `.` or `/`) ends the group's name, so the one `*`
    comes after a literal prefix no other group, run or control file starts with (`…-t1.`
    is not a prefix of `…-t10.`, nor of `runs/<run>/ends/…`). Issue #38: the run segment
    was once matched by its length (`?` per character), and `?` matched `/`:
    `runs/<run>/ends/<group>.1.json` fitted a 21-character run."""
    if "*" in records or "?" in records or not records.endswith("."):
        raise ValueError(f"records prefix {records!r} must be literal and end in '.'")
    return [f"arn:aws:s3:::{bucket}/{under(prefix, records)}*"]


def session_policy(bucket: str, prefix: str, group: str, *, records: str, checkpoints: bool,
                   until: datetime) -> dict[str, Any]:
    """The session policy of group `group`'s grant (`records`: `Grant.records`, the group's
    key prefix in the open run), void after `until`."""
    arn = f"arn:aws:s3:::{bucket}"
    runs = under(prefix, "runs")
    before = {"DateLessThan": {"aws:CurrentTime": until.astimezone(UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")}}
    statements: list[dict[str, Any]] = [
        {"Sid": "PutGroupResults", "Effect": "Allow",
         "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
         "Resource": group_objects(bucket, prefix, records), "Condition": before},
        {"Sid": "ReadLedger", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{arn}/{runs}/*/run.json", "Condition": before},
        {"Sid": "ListRuns", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": arn,
         "Condition": {**before, "StringLike": {"s3:prefix": [f"{runs}/", f"{runs}/*"]}}},
    ]
    if checkpoints:
        ckpt = checkpoints_prefix(prefix, group)
        statements += [
            {"Sid": "GroupCheckpoints", "Effect": "Allow",
             "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
             "Resource": f"{arn}/{ckpt}*", "Condition": before},
            {"Sid": "ListGroupCheckpoints", "Effect": "Allow", "Action": "s3:ListBucket",
             "Resource": arn, "Condition": {**before, "StringLike": {"s3:prefix": f"{ckpt}*"}}},
        ]
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass(frozen=True)
class GrantWindow:
    """When a grant starts being refused: the group's deadline, and how long to ask STS for."""

    deadline: datetime
    duration_s: int

    @classmethod
    def until(cls, deadline: datetime, now: datetime) -> GrantWindow | None:
        """The window up to `deadline` (None once it passed)."""
        left = (deadline - now).total_seconds()
        if left <= 0:
            return None
        return cls(deadline, int(max(MIN_SESSION_S, min(MAX_CHAINED_S, left))))

    def expires(self, now: datetime) -> datetime:
        """When the credentials stop working: STS's expiry or the deadline, the earlier."""
        return min(self.deadline, now + timedelta(seconds=self.duration_s))


def _client(service: str) -> Any:
    from botocore.session import get_session

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return get_session().create_client(service, region_name=region,
                                       endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)


def assume_grant(role_arn: str, policy: dict[str, Any], *, session_name: str,
                 duration_s: int) -> dict[str, str]:
    """Credentials of the grant role narrowed by `policy`: AccessKeyId, SecretAccessKey,
    SessionToken, Expiration (ISO 8601)."""
    import json

    answer = _client("sts").assume_role(RoleArn=role_arn, RoleSessionName=session_name[:64],
                                        Policy=json.dumps(policy, separators=(",", ":")),
                                        DurationSeconds=duration_s)
    creds = answer["Credentials"]
    return {"AccessKeyId": creds["AccessKeyId"], "SecretAccessKey": creds["SecretAccessKey"],
            "SessionToken": creds["SessionToken"],
            "Expiration": creds["Expiration"].astimezone(UTC).isoformat()}


def post_conditions(key_prefix: str, max_bytes: int) -> list[Any]:
    """An S3 POST policy's conditions for one object named `key_prefix…` of at most
    `max_bytes` (`content-length-range`: S3 refuses a larger upload, EntityTooLarge)."""
    return [["starts-with", "$key", key_prefix], ["content-length-range", 0, max_bytes]]


def presigned_post(bucket: str, key_prefix: str, until: datetime, max_bytes: int) -> dict[str, Any]:
    """An S3 POST policy for objects named `key_prefix…` (`starts-with $key`), each at most
    `max_bytes`, that expires by `until`, signed with the function's credentials (which may
    put under the whole sweep: the policy's conditions are what confine it). Its expiration
    is counted from the moment of signing, rounded down, so it never passes `until`."""
    client = _client("s3")
    left = int((until - datetime.now(UTC)).total_seconds()) - 1
    return client.generate_presigned_post(
        bucket, key_prefix + "${filename}",
        Conditions=post_conditions(key_prefix, max_bytes), ExpiresIn=max(1, left))


def group_entries(sweep: str, group: str, files: Iterable[str],
                  read: Callable[[str], str | None]) -> dict[str, str]:
    """file name → base64 value of the group's entries that exist: a key file derived from
    the sweep's seed (`read(seed_parameter_name(sweep))`, hex) for `group` alone, any other
    entry as stored at `group_secret_path(sweep, group)/<file>`. `read(name)`: a parameter's
    decrypted value, None when there is none."""
    out: dict[str, str] = {}
    seed: bytes | None = None
    for file in files:
        if file in KEY_FILES:
            if seed is None:
                text = read(seed_parameter_name(sweep))
                if text is None:
                    continue
                seed = bytes.fromhex(text)
            out[file] = base64.b64encode(private_openssh(seed, group, file).encode()).decode()
            continue
        value = read(f"{group_secret_path(sweep, group)}/{file}")
        if value is not None:
            out[file] = value
    return out


def read_secrets(sweep: str, group: str, files: Iterable[str]) -> dict[str, str]:
    """`group_entries` read from SSM with the function's own role."""
    ssm = _client("ssm")

    def read(name: str) -> str | None:
        try:
            return ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
        except ssm.exceptions.ParameterNotFound:
            return None

    return group_entries(sweep, group, files, read)
