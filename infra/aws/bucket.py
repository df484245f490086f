"""The results bucket: private (public access blocked), encrypted (SSE-S3), versioned.

`results_url` is the spec's `results` when it is an `s3://` URL, else
`s3://<bucket>/<sweep>`; `prefix_arn` is what the instance and Lambda roles may touch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.once import kept_after_run
from spotbench.spec import SweepSpec


def split_s3_url(url: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` → (`bucket`, `some/prefix`)."""
    if not url.startswith("s3://"):
        raise pulumi.RunError(f"results URL {url!r} is not an s3:// URL")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    return bucket, prefix.strip("/")


@dataclass
class ResultsBucketArgs:
    spec: SweepSpec
    tags: dict[str, str]


class ResultsBucket(pulumi.ComponentResource):
    def __init__(self, name: str, args: ResultsBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:ResultsBucket", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        self.bucket = aws.s3.Bucket(f"{name}", bucket_prefix=f"{spec.name}-results-",
                                    force_destroy=False, tags=args.tags,
                                    opts=kept_after_run(spec, child))  # once: outlives the stack
        self.public_access = aws.s3.BucketPublicAccessBlock(
            f"{name}-private", bucket=self.bucket.id, block_public_acls=True,
            block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
            opts=child,
        )
        self.encryption = aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-sse", bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"},
                    "bucket_key_enabled": True}],
            opts=child,
        )
        self.versioning = aws.s3.BucketVersioning(
            f"{name}-versioning", bucket=self.bucket.id,
            versioning_configuration={"status": "Enabled"}, opts=child,
        )
        if spec.results and spec.results.startswith("s3://"):
            bucket, prefix = split_s3_url(spec.results.rstrip("/"))
            self.results_url: pulumi.Output[str] = pulumi.Output.from_input(spec.results.rstrip("/"))
            self.results_bucket: pulumi.Output[str] = pulumi.Output.from_input(bucket)
            self.prefix = prefix
        else:
            self.results_url = self.bucket.bucket.apply(lambda b: f"s3://{b}/{spec.name}")
            self.results_bucket = self.bucket.bucket
            self.prefix = spec.name
        self.register_outputs({"bucket": self.bucket.bucket, "results_url": self.results_url})
