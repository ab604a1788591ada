#!/usr/bin/env bash
# Builds the four images from the repository root with Docker (or any
# BuildKit-compatible builder) and tags them for a registry.
#   REGISTRY=ghcr.io/you TAG=v1 deploy/build_images.sh [--push]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REGISTRY="${REGISTRY:-ghcr.io/rill}"
TAG="${TAG:-latest}"
DOCKER="${DOCKER:-docker}"
for target in frontend engine engine-gpu model-fetch smg; do
  image="$REGISTRY/rill-$target:$TAG"
  echo "building $image" >&2
  "$DOCKER" build -f "$ROOT/deploy/docker/Dockerfile" --target "$target" -t "$image" "$ROOT"
  [ "${1:-}" = "--push" ] && "$DOCKER" push "$image"
done
