"""The results bucket: uniform access, public access prevented, labelled.

Each run group's member account may read the sweep's results (the run ledger tells it the
open run) and create objects named for its own group only — `runs/<run>/<group>.<n>.jsonl`
and `runs/<run>/<group>.<n>/…` (`group_condition`); it never overwrites or deletes them, and
a VM of one group cannot store records, raw output or anything else under another group's
names. When the workload keeps checkpoints (`Workload.checkpoints`), each group's account
also holds the sweep's `ckpt` custom role (create + delete, identity.py) on its own
`checkpoints/<group>/` folder only (`checkpoint_condition`): a second binding rather than
one wider role on both names, because an IAM condition cannot tell which permission is
checked — one binding would let a group delete or overwrite its own records too. The function account may read and write them (run ledger), operators may read
them and add collected logs (`spotbench report`, `collect`) — each only under the sweep's results prefix (an IAM condition on the object name, and
on the list prefix for listings), so a sweep sharing a bucket cannot reach another's
results, and nobody but the build reads the functions' source archive under `_spotbench/`.
`force_destroy` is on so `pulumi destroy` removes everything: copy the results first
(`gcloud storage cp -r gs://BUCKET/SWEEP .`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from spotbench.clouds import gcp as gcp_names
from spotbench.plan import sweep_labels
from spotbench.spec import SweepSpec


def bucket_name(spec: SweepSpec, project: str) -> str:
    """The spec's gs:// bucket, or `spotbench-<sweep>-<project>` (≤ 63 chars); the CLI
    finds the same name (spotbench.clouds.gcp.bucket_name)."""
    if spec.results and not spec.results.startswith("gs://"):
        raise pulumi.RunError(
            f"results {spec.results!r}: a gcp sweep stores results in Cloud Storage; give a "
            "gs://BUCKET[/prefix] URL or leave 'results' out for a bucket named after the sweep"
        )
    return gcp_names.bucket_name(spec, project)


def prefix_condition(bucket: str, prefix: str, what: str) -> dict[str, str]:
    """IAM condition: objects under `prefix/` of `bucket`, and listings of that prefix.

    `storage.objects.list` is checked on the bucket, so a listing is allowed only when the
    request's list prefix (`storage.googleapis.com/objectListPrefix`) lies under it.
    """
    prefix = prefix.strip("/") + "/"
    objects = f"projects/_/buckets/{bucket}/objects/{prefix}"
    return {
        "title": f"{what} under {prefix}"[:100],
        "description": f"objects under gs://{bucket}/{prefix} only",
        "expression": (
            f'resource.name.startsWith("{objects}") || '
            f'(resource.type == "storage.googleapis.com/Bucket" && '
            f'api.getAttribute("storage.googleapis.com/objectListPrefix", "")'
            f'.startsWith("{prefix}"))'
        ),
    }


def group_condition(bucket: str, prefix: str, group: str) -> dict[str, str]:
    """IAM condition: objects `<prefix>/runs/<run>/<group>.…` of `bucket` — one group's
    records (`<group>.<n>.jsonl`) and raw output (`<group>.<n>/…`), in any run.

    The run id is not known when the stack is deployed, so the name is matched around it
    with `extract()` (https://cloud.google.com/iam/docs/conditions-attribute-reference,
    resource name: the text between the template's first prefix match and the next
    occurrence of its suffix, '' when absent): the text before `/<group>.` must be the
    first path segment after `runs/` (one run id, no `/`). The `.` after the group id is
    the delimiter group ids never contain, so group `…-t1` is not granted `…-t10.1.jsonl`,
    and `runs/<run>/<other>.1/<group>.x` (inside another group's folder) is refused.
    """
    runs = f"projects/_/buckets/{bucket}/objects/{prefix.strip('/')}/runs/"
    mine = f'resource.name.extract("{runs}{{run}}/{group}.")'
    first = f'resource.name.extract("{runs}{{run}}/")'
    return {
        "title": f"{group} objects"[:100],
        "description": f"gs://{bucket}/{prefix.strip('/')}/runs/<run>/{group}.* only"[:256],
        "expression": f'resource.name.startsWith("{runs}") && {mine} != "" && {mine} == {first}',
    }


def checkpoint_condition(bucket: str, prefix: str, group: str) -> dict[str, str]:
    """IAM condition: objects under `<prefix>/checkpoints/<group>/` of `bucket` — one group's
    TF checkpoints (workloads/tf_mnist/checkpoints.py), any run. The `/` after the group id
    keeps group `…-t1` out of `…-t10/`."""
    folder = f"{prefix.strip('/')}/checkpoints/{group}/"
    return {
        "title": f"{group} checkpoints"[:100],
        "description": f"gs://{bucket}/{folder}* only"[:256],
        "expression": f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{folder}")',
    }


def results_url(spec: SweepSpec, project: str) -> str:
    """Where members write: the spec's gs:// URL, or gs://<bucket>/<sweep>."""
    return gcp_names.results_url(spec, project)


@dataclass
class ResultsBucketArgs:
    spec: SweepSpec
    project: str
    location: str
    members: Mapping[str, pulumi.Input[str]]  # group id → email: objectViewer + its own objectCreator
    managers: list[pulumi.Input[str]]  # emails: objectUser (read/write/overwrite)
    operators: list[str] = field(default_factory=list)  # IAM members: objectViewer + objectCreator
    # members keep checkpoints: this custom role (create + delete) on their own group's folder
    checkpoint_role: pulumi.Input[str] | None = None


class ResultsBucket(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: ResultsBucketArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotbench:gcp:ResultsBucket", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.bucket_name = bucket_name(args.spec, args.project)
        self.url = results_url(args.spec, args.project)
        self.bucket = gcp.storage.Bucket(
            f"{name}-results",
            name=self.bucket_name,
            location=args.location.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=True,
            labels=sweep_labels(args.spec.name),
            project=args.project,
            opts=child,
        )
        prefix = self.url.removeprefix(f"gs://{self.bucket_name}").strip("/")
        sa = lambda e: pulumi.Output.from_input(e).apply(lambda v: f"serviceAccount:{v}")  # noqa: E731
        prefix = prefix or args.spec.name
        sweep_wide = prefix_condition(self.bucket_name, prefix, "results")
        grants = [(sa(e), "roles/storage.objectViewer", sweep_wide) for e in args.members.values()]
        grants += [(sa(e), "roles/storage.objectUser", sweep_wide) for e in args.managers]
        grants += [(pulumi.Output.from_input(m), r, sweep_wide) for m in args.operators  # report, collect
                   for r in ("roles/storage.objectViewer", "roles/storage.objectCreator")]
        for i, (member, role, condition) in enumerate(grants):
            gcp.storage.BucketIAMMember(
                f"{name}-{role.split('.')[-1]}-{i}",
                bucket=self.bucket.name,
                role=role,
                member=member,
                condition=condition,
                opts=child,
            )
        for gid, email in args.members.items():  # each group creates only its own objects
            gcp.storage.BucketIAMMember(
                f"{name}-creator-{gid}",
                bucket=self.bucket.name,
                role="roles/storage.objectCreator",
                member=sa(email),
                condition=group_condition(self.bucket_name, prefix, gid),
                opts=child,
            )
            if args.checkpoint_role is not None:  # a second binding: records stay immutable
                gcp.storage.BucketIAMMember(
                    f"{name}-checkpoints-{gid}",
                    bucket=self.bucket.name,
                    role=args.checkpoint_role,
                    member=sa(email),
                    condition=checkpoint_condition(self.bucket_name, prefix, gid),
                    opts=child,
                )
        self.register_outputs({"bucket": self.bucket.name, "url": self.url})
