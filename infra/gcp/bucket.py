"""The results bucket: uniform access, public access prevented, labelled.

The sweep's member account (every VM) may read the sweep's results (the run ledger tells
it the open run) and write nothing: a group writes its records with the signed POST policy
and its checkpoints with the downscoped token the `grant` function mints for it alone
(`runs/<run>/<group>.` and `checkpoints/<group>/`, until its deadline; spotbench/clouds/gcp/grants.py).
Those credentials carry the function account's access, which may read and write the sweep's
prefix (run ledger, control's own records) — the grant narrows it to one group's names.
Operators may read them and add collected logs (`spotbench report`, `collect`) — each only
under the sweep's results prefix (an IAM condition on the object name, and on the list
prefix for listings), so a sweep sharing a bucket cannot reach another's results, and
nobody but the build reads the functions' source archive under `_spotbench/`. The bucket's
policy holds the same few bindings whatever the group count.
`force_destroy` is on so `pulumi destroy` removes everything: copy the results first
(`gcloud storage cp -r gs://BUCKET/SWEEP .`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from infra.once import kept_after_run
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


def results_url(spec: SweepSpec, project: str) -> str:
    """Where members write: the spec's gs:// URL, or gs://<bucket>/<sweep>."""
    return gcp_names.results_url(spec, project)


@dataclass
class ResultsBucketArgs:
    spec: SweepSpec
    project: str
    location: str
    readers: list[pulumi.Input[str]]  # emails: objectViewer (the sweep's member account)
    managers: list[pulumi.Input[str]]  # emails: objectUser (read/write/overwrite)
    operators: list[str] = field(default_factory=list)  # IAM members: objectViewer + objectCreator


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
            opts=kept_after_run(args.spec, child),  # `schedule: once`: outlives the stack
        )
        prefix = self.url.removeprefix(f"gs://{self.bucket_name}").strip("/")
        sa = lambda e: pulumi.Output.from_input(e).apply(lambda v: f"serviceAccount:{v}")  # noqa: E731
        prefix = prefix or args.spec.name
        sweep_wide = prefix_condition(self.bucket_name, prefix, "results")
        grants = [(sa(e), "roles/storage.objectViewer", sweep_wide) for e in args.readers]
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
        self.register_outputs({"bucket": self.bucket.name, "url": self.url})
