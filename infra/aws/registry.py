"""The sweep's image registry: one ECR repository `spotbench-<sweep>/<image>` per image the
plan runs (mpi, tf-cpu, tf-gpu; spotbench.images).

`make images REGISTRY=$(pulumi stack output image_registry)` pushes `images/*` there; a
group whose spec sets no `image` runs `<registry>/<image>:latest`. Members pull with the
instance role (`PullImage` on `repository/spotbench-<sweep>/*`, identity.py).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


def repository_prefix(sweep: str) -> str:
    return f"spotbench-{sweep}"


class AwsRegistry(pulumi.ComponentResource):
    def __init__(self, name: str, *, sweep: str, images: list[str], account: pulumi.Input[str],
                 region: str, tags: dict[str, str], opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Registry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.repositories = {
            image: aws.ecr.Repository(
                f"{name}-{image}", name=f"{repository_prefix(sweep)}/{image}",
                image_tag_mutability="MUTABLE", force_delete=True,
                image_scanning_configuration={"scan_on_push": True}, tags=tags, opts=child)
            for image in images
        }
        self.url = pulumi.Output.from_input(account).apply(
            lambda a: f"{a}.dkr.ecr.{region}.amazonaws.com/{repository_prefix(sweep)}")
        self.register_outputs({"url": self.url})
