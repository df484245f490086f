"""The sweep's image registry: an Artifact Registry Docker repository `spotbench-<sweep>`.

`make images REGISTRY=$(pulumi stack output image_registry)` builds `images/*` and pushes
them here (`<registry>/mpi`, `/tf-cpu`, `/tf-gpu`); a group whose spec sets no `image`
runs `<registry>/<image for its workload and accelerator>:latest` (spotbench.images). The
VM account reads it through `roles/artifactregistry.reader` (identity.py).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp


def repository_id(sweep: str) -> str:
    return f"spotbench-{sweep}"


def registry_url(region: str, project: str, sweep: str) -> str:
    return f"{region}-docker.pkg.dev/{project}/{repository_id(sweep)}"


class GcpRegistry(pulumi.ComponentResource):
    def __init__(self, name: str, *, sweep: str, project: str, region: str,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:gcp:Registry", name, None, opts)
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-images", repository_id=repository_id(sweep), location=region,
            project=project, format="DOCKER",
            description=f"spotbench {sweep}: workload images (make images REGISTRY=…)",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.url = registry_url(region, project, sweep)
        self.register_outputs({"url": self.url})
