"""The workload container images (`images/*/Dockerfile`): which one a group runs, as whom.

Each workload's descriptor answers "which image does this group boot?" — whether the group
has a GPU → the folder under `images/` (also the image's name in the registry):

    osu                 → mpi
    tf-mnist (CPU)      → tf-cpu
    tf-mnist (GPU)      → tf-gpu
    container           → the spec's `image:` (the user's, run as it is) + runner (collects)

A workload whose descriptor has `user_image` (container) boots two images: the spec's, which
runs the user's command and needs nothing of spotbench, and spotbench's `runner` from the
stack's registry, which checks the run before and stores the results and calls `done` after.

`IMAGE_UID` is the uid every image runs as (`useradd --uid 1000 bench` + `USER bench` in
each Dockerfile, checked by tests/images). The boot path writes the files a container
reads (the MPI ssh keys) owned by this uid, so it must be known before any image runs.
"""

from __future__ import annotations

from spotbench.workload_registry import get_workload, registry

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
# every image (folder under images/) a stack's registry must hold: the table's + the runners
# that run beside users' images
REGISTRY_IMAGES: frozenset[str] = frozenset(IMAGES.values()) | {
    w.user_image.runner for w in registry().values() if w.user_image}


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
    """The image whose entrypoint is spotbench's: the spec's `image` when set, else the stack
    registry's image for this group; for a workload that runs the user's image first
    (`user_image`), its runner from the registry (the spec's image is `user_image_of`'s)."""
    user = get_workload(workload).user_image
    if user is not None:
        return f"{registry.rstrip('/')}/{user.runner}:{DEFAULT_TAG}"
    return explicit or image_ref(registry, workload, gpu)


def user_image_of(explicit: str | None, workload: str) -> str | None:
    """The user's own image a group runs before spotbench's runner (None: the workload's
    image is spotbench's alone). The spec must give it."""
    if get_workload(workload).user_image is None:
        return None
    if explicit is None:
        raise ValueError(f"workload {workload!r} runs your image: set `image:` in the spec")
    return explicit


def registry_images(explicit: str | None, workload: str, gpu: bool) -> list[str]:
    """The images (folders under images/) a group pulls from the stack's registry."""
    user = get_workload(workload).user_image
    if user is not None:
        return [user.runner]
    return [] if explicit else [image_name(workload, gpu)]
