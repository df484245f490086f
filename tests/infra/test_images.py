"""Which image a group boots: the stack's registry + the image for its workload and GPU
(spotbench.images), unless the spec names one; the registry is declared by the stack."""

from __future__ import annotations

import pytest

from spotbench.images import IMAGES, image_name, resolve_image
from tests.infra.test_aws import members as aws_members, sweep as aws_sweep
from tests.infra.test_gcp import INSTANCE as GCP_INSTANCE, _sweep as gcp_sweep, _spec as gcp_spec

ROOT_IMAGES = {p.name for p in (__import__("pathlib").Path(__file__).resolve().parents[2]
                                / "images").iterdir() if (p / "Dockerfile").is_file()}


def _image(unit_text: str) -> str:
    start = next(line.strip() for line in unit_text.splitlines()
                 if line.strip().startswith("ExecStart="))
    return start.split()[-1]


def _gcp_images(mocks) -> set[str]:
    return {_image(vm.inputs["metadata"]["user-data"]) for vm in mocks.of_type(GCP_INSTANCE)}


def test_every_resolved_image_is_built_from_images():
    assert set(IMAGES.values()) <= ROOT_IMAGES
    assert image_name("tf-mnist", True) == "tf-gpu" and image_name("tf-mnist", False) == "tf-cpu"
    assert resolve_image("mine:1", "reg", "osu", False) == "mine:1"
    with pytest.raises(ValueError, match="set `image:`"):
        image_name("nope", False)


def test_gcp_groups_get_the_image_of_their_workload_and_accelerator():
    mocks = gcp_sweep(gcp_spec(matrix={"machine_type": ["n1-standard-4"],
                                       "accelerator": ["nvidia-tesla-t4", None]}))
    repo = mocks.one("gcp:artifactregistry/repository:Repository")
    assert repo.inputs["repositoryId"] == "spotbench-t" and repo.inputs["format"] == "DOCKER"
    registry = "us-central1-docker.pkg.dev/proj-1/spotbench-t"
    by_gpu = {bool(vm.inputs.get("guestAccelerators")): _image(vm.inputs["metadata"]["user-data"])
              for vm in mocks.of_type(GCP_INSTANCE)}
    assert by_gpu == {True: f"{registry}/tf-gpu:latest", False: f"{registry}/tf-cpu:latest"}
    assert _gcp_images(gcp_sweep(gcp_spec(image="docker.io/me/x:2"))) == {"docker.io/me/x:2"}


def test_aws_gpu_group_gets_the_gpu_image_from_the_stack_repository(declare):
    _, mocks = aws_sweep(declare, name="gx", workload={"name": "tf-mnist", "workers": 1},
                         matrix={"machine_type": ["g4dn.xlarge"]}, placement="none",
                         image=None, results=None)
    repos = [r.inputs["name"] for r in mocks.of_type("aws:ecr/repository:Repository")]
    assert repos == ["spotbench-gx/tf-gpu"]
    images = {_image(i.inputs["userData"]) for i in aws_members(mocks)}
    assert images == {"123456789012.dkr.ecr.eu-west-1.amazonaws.com/spotbench-gx/tf-gpu:latest"}
