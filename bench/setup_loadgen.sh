#!/usr/bin/env bash
# bench/.venv-loadgen: the independent OpenAI-API load generator (aiperf) that
# bench/gateway_compare.py drives, in its own venv. It is NOT in the project
# venv nor tools/requirements.txt: it pulls ~100 packages (pandas, pyarrow,
# scipy, transformers, ...) that no test needs, and CI never installs it.
#   bash bench/setup_loadgen.sh            # install from bench/requirements-loadgen.txt
#   bash bench/setup_loadgen.sh --relock   # re-resolve AIPERF_VERSION and rewrite that file
# Every package is pinned to one version and its wheel's SHA-256 (pip
# --require-hashes), resolved for CPython 3.11 on manylinux x86_64.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LOADGEN_VENV:-$ROOT/bench/.venv-loadgen}"
REQ="$ROOT/bench/requirements-loadgen.txt"
AIPERF_VERSION=0.13.0
PYTHON="${PYTHON:-python3}"

"$PYTHON" -c 'import sys; assert (3, 11) <= sys.version_info[:2] < (3, 14), "aiperf needs Python 3.11-3.13"'
if [[ "${1:-}" != "--relock" ]] && ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "error: $REQ pins CPython 3.11 wheels; use PYTHON=python3.11, or --relock for this Python" >&2
  exit 2
fi

if [[ "${1:-}" == "--relock" ]]; then
  # Resolve in a throw-away venv; pip's install report names each wheel and its hash.
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  "$PYTHON" -m venv "$scratch/venv"
  "$scratch/venv/bin/pip" install -q --dry-run --ignore-installed --only-binary=:all: \
    --report "$scratch/report.json" "aiperf==$AIPERF_VERSION"
  "$scratch/venv/bin/python" - "$scratch/report.json" "$REQ" "$AIPERF_VERSION" <<'PY'
import json, sys
report, out, version = sys.argv[1:]
rows = []
for item in json.load(open(report))["install"]:
    meta = item["metadata"]
    sha = item["download_info"]["archive_info"]["hashes"]["sha256"]
    rows.append((meta["name"].lower(), meta["version"], sha))
with open(out, "w") as f:
    f.write("# The load generator of bench/gateway_compare.py and its whole dependency closure,\n"
            f"# resolved from aiperf=={version} by `bash bench/setup_loadgen.sh --relock`\n"
            "# (CPython 3.11, manylinux x86_64 wheels). Installed only into bench/.venv-loadgen\n"
            "# by bench/setup_loadgen.sh, with --require-hashes --no-deps; never into .venv.\n")
    for name, ver, sha in sorted(rows):
        f.write(f"{name}=={ver} --hash=sha256:{sha}\n")
print(f"{len(rows)} packages pinned in {out}")
PY
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: -r "$REQ"
"$VENV/bin/pip" check
"$VENV/bin/aiperf" --version 2>/dev/null || "$VENV/bin/python" -c 'import aiperf; print("aiperf", aiperf.__version__)'
echo "load generator ready: $VENV/bin/aiperf"
