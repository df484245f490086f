"""The clouds' limits on what a deploy sends, in one place: plain data and one checker.

Each `Limit` is one documented cap (its source and the day it was read are docs/platform.md's
"Limits on what a deploy sends" rows too). What measures a size calls `require(key, field,
size)` with the real rendered thing: the Pulumi program renders each boot document, metadata
map, function environment and IAM condition and measures it where it declares it (infra/),
`spotbench plan` and `spotbench preview` run that program under mocks, and spec checks measure
names and labels. A size over its limit is a `LimitError` naming the field, the size and the
limit; exactly at the limit passes.

`collecting()` gathers every overrun of a block instead of raising at the first (what `plan`
shows: every field past a limit, not only the first the program reached).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

READ = "2026-12-07"  # the day each source below was read (docs/platform.md)


@dataclass(frozen=True)
class Limit:
    """One cap: `max` `unit` of `what`, per `source`."""

    key: str
    what: str
    max: int
    unit: str
    source: str
    fix: str = ""


def _limits(*items: Limit) -> dict[str, Limit]:
    return {limit.key: limit for limit in items}


LIMITS: dict[str, Limit] = _limits(
    Limit("gce.metadata.value", "a GCE metadata value (the boot document, `user-data`)", 262_144, "bytes",
          "https://cloud.google.com/dotnet/docs/reference/Google.Cloud.Compute.V1/latest/"
          "Google.Cloud.Compute.V1.Items (a metadata value: 'less than or equal to 262144 bytes')",
          "fewer members per group, or a shorter `workload`/`env` config"),
    Limit("gce.metadata.total", "a GCE instance's (or template's) metadata, keys and values together",
          524_288, "bytes",
          "https://googleapis.dev/dotnet/Google.Apis.Compute.alpha/latest/api/"
          "Google.Apis.Compute.alpha.Data.Metadata.ItemsData.html ('The total size of all keys and "
          "values must be less than 512 KB')",
          "fewer members per group, or a shorter `workload`/`env` config"),
    Limit("ec2.user_data", "EC2 user data (raw, before base64)", 16_384, "bytes",
          "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html "
          "('limited to 16 KB, in raw form, before it is base64-encoded')",
          "fewer members per group, or a shorter `workload`/`env` config"),
    Limit("lambda.env", "a Lambda function's environment variables (keys and values, in aggregate)",
          4_096, "bytes", "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html "
          "(environment variables: 4 KB)", "a shorter sweep name or results URL"),
    Limit("cloudrun.env.value", "a Cloud Run (gen2 function) environment variable's value", 32_768, "bytes",
          "https://cloud.google.com/dotnet/docs/reference/Google.Cloud.Run.V2/latest/"
          "Google.Cloud.Run.V2.EnvVar ('the maximum length is 32768 bytes')", "a shorter sweep name or results URL"),
    Limit("cloudrun.env.count", "a Cloud Run service's environment variables", 1_000, "variables",
          "https://cloud.google.com/run/docs/configuring/services/overview-environment-variables "
          "('a maximum of 1000 environment variables')"),
    Limit("sts.session_policy", "an STS session policy's plain text (AssumeRole `Policy`)", 2_048,
          "characters", "https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html "
          "('The plaintext that you use for both inline and managed session policies can't exceed "
          "2,048 characters'; the packed size STS checks apart is reported by STS only)",
          "a shorter sweep name or bucket"),
    Limit("iam.condition.operators", "a GCP IAM condition's logical operators (&&, ||, !)", 12,
          "operators", "https://cloud.google.com/iam/docs/conditions-overview#limitations",
          "fewer candidate zones per region"),
    Limit("gce.labels.count", "the labels of one GCE resource", 64, "labels",
          "https://pub.dev/documentation/pulumi_gcp/latest/parallelstore/Instance/labels.html "
          "(Google's label rules: 'No more than 64 labels can be associated with a given resource')", "fewer spec `labels`"),
    Limit("ec2.tags.count", "the user tags of one AWS resource", 50, "tags",
          "https://docs.aws.amazon.com/sdkfornet/v3/apidocs/items/ECS/TTag.html (AWS tag "
          "restrictions: 'Maximum number of tags per resource - 50')", "fewer spec `labels`"),
    Limit("gce.name", "a GCE resource name (instance, template, address)", 63, "characters",
          "https://cloud.google.com/compute/docs/naming-resources#resource-name-format (1-63 "
          "characters, as the Google provider validates it: terraform-provider-google e911480)", "a shorter sweep name, or fewer trials or members"),
    Limit("lambda.zip", "a Lambda deployment package uploaded directly (zipped)", 52_428_800, "bytes",
          "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html (50 MB zipped, "
          "direct upload)"),
    Limit("lambda.unzipped", "a Lambda function's code and layers, unzipped", 262_144_000, "bytes",
          "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html (250 MB "
          "unzipped, the package and its layers together)"),
)


class LimitError(ValueError):
    """A field past a cloud's limit: names the field, its size and the limit."""

    def __init__(self, field: str, size: int, limit: Limit):
        self.field, self.size, self.limit = field, size, limit
        fix = f"; {limit.fix}" if limit.fix else ""
        super().__init__(f"{field}: {size:,} {limit.unit}, over the limit of {limit.max:,} "
                         f"{limit.unit} on {limit.what} ({limit.source}){fix}")


_collected: list[list[LimitError]] = []


@contextlib.contextmanager
def collecting() -> Iterator[list[LimitError]]:
    """Within the block, `require` records each overrun (once per field) instead of raising."""
    found: list[LimitError] = []
    _collected.append(found)
    try:
        yield found
    finally:
        _collected.remove(found)


def over(key: str, field: str, size: int) -> LimitError | None:
    """The error when `size` is past limit `key` (exactly at it is within), else None."""
    limit = LIMITS[key]
    return LimitError(field, size, limit) if size > limit.max else None


def require(key: str, field: str, size: int) -> None:
    """Raise (or, while `collecting`, record) the `LimitError` of a size past limit `key`."""
    error = over(key, field, size)
    if error is None:
        return
    if _collected:
        found = _collected[-1]
        if all(e.field != error.field or e.limit.key != key for e in found):
            found.append(error)
        return
    raise error


def nbytes(text: str) -> int:
    return len(text.encode())


def metadata_bytes(items: Mapping[str, str]) -> int:
    """A GCE metadata map's size as the API counts it: every key and value, in bytes."""
    return sum(nbytes(k) + nbytes(v) for k, v in items.items())


def env_bytes(env: Mapping[str, str]) -> int:
    """A Lambda environment's size: the keys and values (Lambda counts them in aggregate)."""
    return sum(nbytes(k) + nbytes(v) for k, v in env.items())


_LOGICAL = re.compile(r"&&|\|\||!(?!=)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')


def logical_operators(expression: str) -> int:
    """The logical operators (`&&`, `||`, `!`) of a CEL condition, outside string literals."""
    return len(_LOGICAL.findall(_STRING.sub('""', expression)))
