#!/usr/bin/env bash
# Build (or reuse a cached) llama.cpp `llama-server` binary, reproducibly.
#
# The llama.cpp sources are taken from the llama-cpp-python sdist on PyPI
# (pinned version; its vendor/llama.cpp is the upstream tree), so no network
# access beyond PyPI (and Debian, for cmake if missing) is needed.
#
# Usage:  LLAMA_SERVER=$(scripts/build-llama-server.sh | tail -n1)
#
# Environment:
#   SWITCHYARD_CACHE_DIR  cache root (default: $HOME/.cache/switchyard)
#   PYTHON                python used for `pip download` (default: python3)
#   JOBS                  parallel build jobs (default: 2)
#
# All progress goes to stderr; the last (only) line on stdout is the absolute
# path of the binary.
set -euo pipefail

VERSION="0.3.36"
HOME_DIR="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE_ROOT="${SWITCHYARD_CACHE_DIR:-${HOME_DIR}/.cache/switchyard}"
DEST_DIR="${CACHE_ROOT}/llama-server-${VERSION}"
BIN="${DEST_DIR}/bin/llama-server"
PY="${PYTHON:-python3}"
JOBS="${JOBS:-2}"

log() { echo "[build-llama-server] $*" >&2; }

# Fast path: already built and working.
if [[ -x "${BIN}" ]] && "${BIN}" --version >/dev/null 2>&1; then
    log "using cached ${BIN}"
    echo "${BIN}"
    exit 0
fi

# Toolchain.
if ! command -v cmake >/dev/null 2>&1; then
    log "cmake not found; installing with apt-get"
    if [[ "$(id -u)" -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
    ${SUDO} apt-get update >&2
    DEBIAN_FRONTEND=noninteractive ${SUDO} apt-get install -y --no-install-recommends cmake >&2
fi
for tool in cc c++ make; do
    if ! command -v "${tool}" >/dev/null 2>&1; then
        log "missing ${tool}; installing build-essential with apt-get"
        if [[ "$(id -u)" -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
        ${SUDO} apt-get update >&2
        DEBIAN_FRONTEND=noninteractive ${SUDO} apt-get install -y --no-install-recommends build-essential >&2
        break
    fi
done

mkdir -p "${DEST_DIR}/bin"
WORK="$(mktemp -d "${CACHE_ROOT}/.build-llama-server.XXXXXX")"
cleanup() { rm -rf "${WORK}"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$(date +%s)
log "downloading llama-cpp-python==${VERSION} sdist into ${WORK}"
"${PY}" -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==${VERSION}" -d "${WORK}/dl" >&2

SDIST="$(ls "${WORK}"/dl/llama_cpp_python-"${VERSION}".tar.gz "${WORK}"/dl/llama-cpp-python-"${VERSION}".tar.gz 2>/dev/null | head -n1 || true)"
if [[ -z "${SDIST}" ]]; then
    SDIST="$(ls "${WORK}"/dl/*.tar.gz | head -n1)"
fi
log "unpacking ${SDIST}"
mkdir -p "${WORK}/src"
tar -xzf "${SDIST}" -C "${WORK}/src"
SRC="$(ls -d "${WORK}"/src/*/vendor/llama.cpp | head -n1)"
if [[ ! -f "${SRC}/CMakeLists.txt" ]]; then
    log "error: llama.cpp sources not found in ${SDIST}"
    exit 1
fi

log "configuring ${SRC}"
cmake -S "${SRC}" -B "${WORK}/build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF >&2

log "building llama-server with -j${JOBS} (several minutes)"
cmake --build "${WORK}/build" --target llama-server -j"${JOBS}" >&2

BUILT="${WORK}/build/bin/llama-server"
if [[ ! -x "${BUILT}" ]]; then
    BUILT="$(find "${WORK}/build" -type f -name llama-server -perm -u+x | head -n1)"
fi
"${BUILT}" --version >&2

# Atomic install: copy next to the destination, then rename.
TMP_BIN="${DEST_DIR}/bin/.llama-server.tmp.$$"
cp "${BUILT}" "${TMP_BIN}"
chmod 0755 "${TMP_BIN}"
mv -f "${TMP_BIN}" "${BIN}"

log "built in $(( $(date +%s) - start ))s"
echo "${BIN}"
