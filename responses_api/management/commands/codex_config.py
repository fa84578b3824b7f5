from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.management.commands._common import get_org
from accounts.models import ApiKey
from responses_api.catalogue import codex_kit


class Command(BaseCommand):
    help = (
        "Print (or write into --out) the Codex CLI files for an API key: config.toml, "
        f"{codex_kit.PROFILE_FILE} and {codex_kit.CATALOG_FILE}. The key itself is never "
        "written; set it with the printed export line."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--org", required=True, help="The organisation's slug.")
        parser.add_argument("--key-name", required=True, help="The API key's name.")
        parser.add_argument(
            "--model", help="The profile's model (default: the first one the key may use)."
        )
        parser.add_argument(
            "--out", help="Write the files into this directory (e.g. ~/.codex) instead."
        )
        parser.add_argument(
            "--base-url",
            help="Switchyard's address as Codex reaches it "
            "(default: SWITCHYARD_PUBLIC_URL, http://127.0.0.1:8000).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        org = get_org(options["org"])
        key = self._key(org, options["key_name"])
        models = list(codex_kit.usable_models(key))
        if not models:
            raise CommandError(
                f"Key '{key.name}' may use no model that a backend serves: add a model "
                "(add_model) or widen the key's allowed models."
            )
        model = models[0]
        if options["model"]:
            chosen = [m for m in models if m.public_id == options["model"]]
            if not chosen:
                raise CommandError(
                    f"Key '{key.name}' may not use model '{options['model']}' (or no backend "
                    f"serves it). It may use: {', '.join(m.public_id for m in models)}."
                )
            model = chosen[0]
        out = Path(options["out"]).expanduser().resolve() if options["out"] else None
        catalog_path = str(out / codex_kit.CATALOG_FILE) if out else codex_kit.DEFAULT_CATALOG_PATH
        files = codex_kit.kit_files(
            models=models,
            model=model,
            base_url=options["base_url"] or settings.SWITCHYARD_PUBLIC_URL,
            catalog_path=catalog_path,
        )
        if out:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (out / name).write_text(text)
                self.stdout.write(f"Wrote {out / name}")
        else:
            for name, text in files.items():
                self.stdout.write(f"# ---- ~/.codex/{name} ----")
                self.stdout.write(text)
        self.stdout.write(codex_kit.export_line(key.prefix))
        self.stdout.write(f"codex --profile {codex_kit.PROVIDER}")

    def _key(self, org: Any, name: str) -> ApiKey:
        keys = sorted(
            ApiKey.objects.filter(organisation=org, name=name).order_by("-created_at"),
            key=lambda key: key.status != "active",
        )
        if not keys:
            raise CommandError(f"No API key named '{name}' in organisation '{org.slug}'.")
        return keys[0]
