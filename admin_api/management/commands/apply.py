"""``manage.py apply -f switchyard.yaml [--dry-run] [--prune]``: provision
from a file (``admin_api.provision``; an example is platform/switchyard.example.yaml)."""

from __future__ import annotations

import os
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError

from admin_api.provision import ProvisionError, apply_document


class Command(BaseCommand):
    help = (
        "Create or update organisations, backends, models, API keys and MCP servers as a "
        "YAML file declares them, and print what changed. Created API keys are printed once."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("-f", "--file", required=True, help="The YAML file.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Print the plan; change nothing."
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Also delete backends, models and MCP servers, and revoke API keys, that the "
            "file's organisations do not name.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            document = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise CommandError(f"{path} cannot be read: {exc.strerror}.") from None
        except yaml.YAMLError as exc:
            raise CommandError(f"{path} is not valid YAML: {exc}") from None
        try:
            plan = apply_document(
                document, environ=os.environ, prune=options["prune"], dry_run=options["dry_run"]
            )
        except ProvisionError as exc:
            raise CommandError(f"{path}: {exc} Nothing was changed.") from None
        for change in plan.changes:
            self.stdout.write(change.line())
        counts = ", ".join(
            f"{plan.count(verb)} {verb}" for verb in ("create", "update", "unchanged", "delete")
        )
        dry = " (dry run: nothing was changed)" if options["dry_run"] else ""
        self.stdout.write(f"{counts}{dry}.")
        for label, raw in plan.secrets:
            self.stdout.write(f"Created {label}; it is shown only once:")
            self.stdout.write(raw)
