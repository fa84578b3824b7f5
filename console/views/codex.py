"""“Use with Codex”: the Codex CLI files for one API key (docs/api/codex.md)."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.access import get_api_key_for_member
from responses_api.catalogue import codex_kit
from responses_api.models import Backend, ServedModel

# The setting's default: while it is unchanged, the page uses the host the
# browser reached the console on.
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"

PART_NOTES = {
    codex_kit.CONFIG_FILE: "Declares Switchyard as a model provider; Codex reads it at start.",
    codex_kit.PROFILE_FILE: (
        "The switchyard profile: which provider, model and catalogue "
        "`codex --profile switchyard` uses."
    ),
    codex_kit.CATALOG_FILE: (
        "Describes each model this key may use, so Codex knows its context window, "
        "reasoning levels and that it can edit files with apply_patch."
    ),
}


def _base_url(request: HttpRequest) -> str:
    configured = getattr(settings, "SWITCHYARD_PUBLIC_URL", "") or DEFAULT_PUBLIC_URL
    if configured.rstrip("/") != DEFAULT_PUBLIC_URL:
        return configured
    return f"{request.scheme}://{request.get_host()}"


def _default_model(models: list[ServedModel]) -> ServedModel | None:
    """The profile's model when none is chosen: the first one a backend
    answers for, so that a first ``codex --profile`` works; else one whose
    backend is not known to be down; else the first."""

    def reachable(model: ServedModel, healths: tuple[str, ...]) -> bool:
        return any(
            d.backend.enabled and d.backend.health in healths for d in model.deployments.all()
        )

    online, unknown = Backend.Health.ONLINE, Backend.Health.UNKNOWN
    for healths in ((online,), (online, unknown)):
        found = next((m for m in models if reachable(m, healths)), None)
        if found is not None:
            return found
    return models[0] if models else None


@require_GET
def key_codex(request: HttpRequest, membership, key_id) -> HttpResponse:
    key = get_api_key_for_member(membership=membership, key_id=key_id)
    models = list(codex_kit.usable_models(key).prefetch_related("deployments__backend"))
    model = _default_model(models)
    if model is not None and request.GET.get("model"):
        model = next((m for m in models if m.public_id == request.GET["model"]), model)
    base_url = _base_url(request)
    files = (
        codex_kit.kit_files(
            models=models,
            model=model,
            base_url=base_url,
            catalog_path=codex_kit.DEFAULT_CATALOG_PATH,
        )
        if model is not None
        else {}
    )
    download = request.GET.get("download")
    if download:
        if download not in files:
            raise Http404("No such file.")
        content_type = "application/json" if download.endswith(".json") else "application/toml"
        response = HttpResponse(files[download], content_type=f"{content_type}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{download}"'
        return response
    parts = [
        {"name": name, "slug": name.replace(".", "-"), "text": text, "note": PART_NOTES[name]}
        for name, text in files.items()
    ]
    context = {
        "key": key,
        "models": models,
        "model": model,
        "base_url": base_url,
        "parts": parts,
        "provider_lines": codex_kit.provider_lines(base_url=base_url),
        "profile_lines": (
            codex_kit.profile_lines(model=model, catalog_path=codex_kit.DEFAULT_CATALOG_PATH)
            if model is not None
            else []
        ),
        "export_line": codex_kit.export_line(key.prefix),
        "profile": codex_kit.PROVIDER,
    }
    return render(request, "console/key_codex.html", context)
