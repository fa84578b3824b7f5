"""The Codex kit (docs/api/codex.md): the files that point the Codex CLI
(0.171) at Switchyard with one API key. The two TOML files, the provider's
``config.toml`` and the ``switchyard.config.toml`` profile, are written here,
line by line with the sentence the console shows beside each; the third,
``model_catalog.json``, comes from :mod:`.codex_catalog`.

Everything here is computed from objects already loaded: no database, file or
network access. The key itself is never written anywhere, only its prefix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from responses_api.catalogue.codex_catalog import model_catalog_json

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from accounts.models import ApiKey
    from responses_api.models import ServedModel

PROVIDER = "switchyard"
# Codex (0.171) turns remote compaction on by the provider's name: "OpenAI"
# (or an Azure endpoint). Anything else compacts on the client, with a
# summary turn of its own, and drops the compaction items it is sent.
PROVIDER_NAME = "OpenAI"
ENV_KEY = "SWITCHYARD_API_KEY"
CONFIG_FILE = "config.toml"
PROFILE_FILE = PROVIDER + ".config.toml"
CATALOG_FILE = "model_catalog.json"
# Where the catalogue lives when the files go into the default ``~/.codex``.
DEFAULT_CATALOG_PATH = "~/.codex/" + CATALOG_FILE


def usable_models(key: ApiKey) -> QuerySet[ServedModel]:
    """The models ``key`` may call (its ``allowed_models``; none listed: all
    of its organisation's), keeping only those some backend serves and that
    generate (Codex cannot use an embedding model). Lazy: the caller
    evaluates it."""
    from responses_api.models import ServedModel

    models = ServedModel.objects.filter(
        organisation_id=key.organisation_id, deployments__isnull=False, kind="generate"
    ).distinct()
    if key.allowed_models:
        models = models.filter(public_id__in=key.allowed_models)
    return models.order_by("public_id")


def export_line(prefix: str) -> str:
    """The shell line that gives Codex the key: it asks for the whole key.
    Only the prefix is known here, and a line setting the variable to the
    prefix, run as copied, would give Codex a key that is refused."""
    return f"printf 'Paste the full key ({prefix}…): '; read -r {ENV_KEY}; export {ENV_KEY}"


def _toml_string(value: str) -> str:
    # A JSON string is a valid TOML basic string for the characters used here.
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class ConfigLine:
    """One line of a TOML file and the sentence that explains it (none for a
    blank line)."""

    text: str
    comment: str = ""


def provider_lines(*, base_url: str) -> list[ConfigLine]:
    """``config.toml``: the Switchyard provider block."""
    api_url = base_url.rstrip("/") + "/v1"
    return [
        ConfigLine(
            f"[model_providers.{PROVIDER}]",
            "Declares Switchyard as a model provider Codex can talk to.",
        ),
        ConfigLine(
            f"name = {_toml_string(PROVIDER_NAME)}",
            "Codex compacts long sessions on the server (remote compaction) only for a "
            "provider named OpenAI; Switchyard serves that compaction for your models.",
        ),
        ConfigLine(
            f"base_url = {_toml_string(api_url)}",
            "Switchyard's OpenAI-compatible API; Codex appends /responses to it.",
        ),
        ConfigLine(
            f"env_key = {_toml_string(ENV_KEY)}",
            "Codex reads the API key from this environment variable, so it is never stored here.",
        ),
        ConfigLine(
            f"wire_api = {_toml_string('responses')}",
            "Switchyard speaks the OpenAI Responses API, which Codex uses natively.",
        ),
        ConfigLine(
            "supports_websockets = true",
            "Codex holds one WebSocket to Switchyard for a session and continues each "
            "response on it (WebSocket mode): a turn sends only what is new.",
        ),
    ]


def profile_lines(
    *, model: ServedModel, catalog_path: str = DEFAULT_CATALOG_PATH
) -> list[ConfigLine]:
    """``switchyard.config.toml``: the profile ``codex --profile switchyard``
    loads (Codex 0.171 keeps each profile in its own ``NAME.config.toml``)."""
    lines = [
        ConfigLine(
            f"model_provider = {_toml_string(PROVIDER)}",
            "Send this profile's requests to the Switchyard provider from config.toml.",
        ),
        ConfigLine(
            f"model = {_toml_string(model.public_id)}",
            "The model Codex asks for, as your organisation names it.",
        ),
    ]
    effort = model.effort_default()
    if effort:
        lines.append(
            ConfigLine(
                f"model_reasoning_effort = {_toml_string(effort)}",
                "The reasoning effort this model uses by default; /model in Codex changes it.",
            )
        )
    lines.append(
        ConfigLine(
            f"model_catalog_json = {_toml_string(catalog_path)}",
            "Tells Codex about Switchyard's models (context window, reasoning levels, "
            "apply_patch tool).",
        )
    )
    return lines


def _render(header: list[str], lines: list[ConfigLine]) -> str:
    out = list(header)
    for line in lines:
        if line.comment:
            out.append(f"# {line.comment}")
        out.append(line.text)
    return "\n".join(out) + "\n"


def config_toml(*, base_url: str) -> str:
    """``config.toml``: a comment line above each setting explains it."""
    return _render(
        [
            "# Codex CLI configuration: the Switchyard provider (generated for Codex 0.171).",
            "# Run Codex with: codex --profile switchyard",
            "",
        ],
        provider_lines(base_url=base_url),
    )


def profile_toml(*, model: ServedModel, catalog_path: str = DEFAULT_CATALOG_PATH) -> str:
    """``switchyard.config.toml``, next to ``config.toml``."""
    return _render(
        [
            "# Codex CLI profile for Switchyard (generated for Codex 0.171).",
            f"# Set the key first: export {ENV_KEY}=<your key>",
            "",
        ],
        profile_lines(model=model, catalog_path=catalog_path),
    )


def kit_files(
    *, models: list[ServedModel], model: ServedModel, base_url: str, catalog_path: str
) -> dict[str, str]:
    """The three files, by name, for ``$CODEX_HOME`` (``~/.codex``)."""
    return {
        CONFIG_FILE: config_toml(base_url=base_url),
        PROFILE_FILE: profile_toml(model=model, catalog_path=catalog_path),
        CATALOG_FILE: model_catalog_json(models),
    }
