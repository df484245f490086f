#!/usr/bin/env bash
# Build every workload image under images/ and push it to a registry:
#
#   make images REGISTRY=us-central1-docker.pkg.dev/PROJECT/spotbench-SWEEP
#   scripts/build_images.sh REGISTRY [TAG] [IMAGE ...]
#
# REGISTRY is the stack's `image_registry` output (`pulumi stack output image_registry`);
# each images/NAME/Dockerfile becomes REGISTRY/NAME:TAG (TAG defaults to latest, what a spec
# without `image:` runs). The build context is the repository root. Uses docker, else
# podman, else buildah (BUILDER=... to choose). Log in to the registry first (docs/gcp.md,
# docs/aws.md).
set -euo pipefail
if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "usage: $0 REGISTRY [TAG] [IMAGE ...]   (e.g. make images REGISTRY=\$(pulumi stack output image_registry))" >&2
  exit 2
fi
registry="${1%/}"
tag="${2:-latest}"
shift $(( $# >= 2 ? 2 : 1 ))
root="$(cd "$(dirname "$0")/.." && pwd)"
builder="${BUILDER:-}"
if [ -z "$builder" ]; then
  for candidate in docker podman buildah; do
    if command -v "$candidate" >/dev/null 2>&1; then builder="$candidate"; break; fi
  done
fi
if [ -z "$builder" ]; then
  echo "build_images: no docker, podman or buildah on PATH" >&2
  exit 1
fi
if [ $# -gt 0 ]; then images=("$@"); else
  images=()
  for dockerfile in "$root"/images/*/Dockerfile; do
    images+=("$(basename "$(dirname "$dockerfile")")")
  done
fi
for name in "${images[@]}"; do
  dockerfile="$root/images/$name/Dockerfile"
  if [ ! -f "$dockerfile" ]; then
    echo "build_images: no $dockerfile" >&2
    exit 1
  fi
  ref="$registry/$name:$tag"
  echo "== $ref ($builder)"
  if [ "$builder" = buildah ]; then
    buildah bud -f "$dockerfile" -t "$ref" "$root"
  else
    "$builder" build -f "$dockerfile" -t "$ref" "$root"
  fi
  "$builder" push "$ref"
done
