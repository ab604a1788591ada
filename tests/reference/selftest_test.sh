#!/bin/bash
# Runs selftest.py with the project venv: $RILL_VENV if set, else the repo's
# .venv (found through the real path of this script, since Bazel runs it from
# runfiles).
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
venv="${RILL_VENV:-$here/../../.venv}"
py="$venv/bin/python"
if [[ ! -x "$py" ]]; then
  echo "error: no python at $py; set RILL_VENV to a venv with numpy, gguf, safetensors, tokenizers" >&2
  exit 1
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$py" "$here/selftest.py" "$@"
