#!/usr/bin/env bash
# Copies the built service binaries out of bazel-bin into one folder (the
# image build's COPY source). Fails if any is missing.
set -euo pipefail
out="${1:?usage: collect_binaries.sh OUT_DIR}"
mkdir -p "$out"
for b in frontend/rill-frontend engine/service/rill-engine worker/rill-worker; do
  if [ -x "bazel-bin/$b" ]; then
    cp -L "bazel-bin/$b" "$out/"
  else
    echo "note: bazel-bin/$b not built (skipped)" >&2
  fi
done
ls "$out"/rill-* >/dev/null
