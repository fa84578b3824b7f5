#!/usr/bin/env bash
# Installs the Codex CLI used by the end-to-end tests (tests/e2e/test_codex.py)
# into ${SWITCHYARD_CACHE_DIR:-$HOME/.cache/switchyard}/codex unless that
# version is already there. Needs npm (the npm registry only; the native binary
# comes in an optional dependency, about 424 MB unpacked).
# The last line of output is the path of the codex binary.
set -euo pipefail

VERSION="${CODEX_VERSION:-0.171.0}"
DIR="${SWITCHYARD_CACHE_DIR:-$HOME/.cache/switchyard}/codex"
BIN="$DIR/node_modules/.bin/codex"

installed_version() {
    "$BIN" --version 2>/dev/null | awk '{print $NF}'
}

if [ ! -x "$BIN" ] || [ "$(installed_version)" != "$VERSION" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "npm is required to install @openai/codex@$VERSION" >&2
        exit 1
    fi
    mkdir -p "$DIR"
    npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "@openai/codex@$VERSION" >&2
fi
if [ "$(installed_version)" != "$VERSION" ]; then
    echo "codex at $BIN does not report version $VERSION" >&2
    exit 1
fi
echo "$BIN"
