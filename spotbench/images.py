"""The workload container images (`images/*/Dockerfile`): which one a group runs, as whom.

Each workload's descriptor answers "which image does this group boot?" — whether the group
has a GPU → the folder under `images/` (also the image's name in the registry):

    osu                 → mpi
    tf-mnist (CPU)      → tf-cpu
    tf-mnist (GPU)      → tf-gpu
    container           → none: the spec gives `image:`

`IMAGE_UID` is the uid every image runs as (`useradd --uid 1000 bench` + `USER bench` in
each Dockerfile, checked by tests/images). The boot path writes the files a container
reads (the MPI ssh keys) owned by this uid, so it must be known before any image runs.
"""

from __future__ import annotations

from spotbench.workload import get_workload, registry

IMAGE_UID = 1000
IMAGE_GID = 1000
IMAGE_USER = "bench"
DEFAULT_TAG = "latest"

# (workload, has GPU) → image name (= folder under images/), from the descriptors
IMAGES: dict[tuple[str, bool], str] = {
    (w.name, gpu): image
    for w in registry().values()
    for gpu, image in ((False, w.images.cpu), (True, w.images.gpu))
    if image
}


def image_name(workload: str, gpu: bool) -> str:
    """The image (folder under images/) a group of `workload` runs, with or without GPU."""
    try:
        return get_workload(workload).image(gpu)
    except ValueError:
        known = sorted({w for w, _ in IMAGES})
        raise ValueError(f"no image for workload {workload!r} (known: {', '.join(known)}); "
                         "set `image:` in the spec") from None


def image_ref(registry: str, workload: str, gpu: bool, tag: str = DEFAULT_TAG) -> str:
    """`REGISTRY/NAME:TAG`, e.g. `us-central1-docker.pkg.dev/proj/spotbench/mpi:latest`."""
    return f"{registry.rstrip('/')}/{image_name(workload, gpu)}:{tag}"


def resolve_image(explicit: str | None, registry: str, workload: str, gpu: bool) -> str:
    """The spec's `image` when set, else the stack registry's image for this group."""
    return explicit or image_ref(registry, workload, gpu)
