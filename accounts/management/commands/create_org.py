from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand

from accounts.management.commands._common import command_error
from accounts.services import organisation_ensure


class Command(BaseCommand):
    help = "Create an organisation (idempotent)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name")

    def handle(self, *args: Any, slug: str, name: str | None, **options: Any) -> None:
        try:
            org, created = organisation_ensure(slug=slug, name=name)
        except ValidationError as exc:
            raise command_error(exc) from None
        verb = "Created" if created else "Exists:"
        self.stdout.write(f"{verb} organisation {org.slug} ({org.name}) id={org.id}")
