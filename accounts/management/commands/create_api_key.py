from argparse import ArgumentParser
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.management.commands._common import (
    add_spend_arguments,
    command_error,
    get_org,
    spend_options,
)
from accounts.services.api_keys import api_key_create


class Command(BaseCommand):
    help = "Create an API key. The key is printed once, alone on the last line of output."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--models", default="", help="Comma-separated model ids (default: all)."
        )
        parser.add_argument("--rpm", type=int)
        parser.add_argument("--tpm", type=int)
        parser.add_argument("--concurrency", type=int)
        parser.add_argument("--expires", help="ISO 8601 date-time, e.g. 2027-01-31T00:00:00Z")
        add_spend_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        org = get_org(options["org"])
        expires = None
        if options["expires"]:
            try:
                expires = datetime.fromisoformat(options["expires"].replace("Z", "+00:00"))
            except ValueError:
                raise CommandError("--expires must be an ISO 8601 date-time.") from None
            if timezone.is_naive(expires):
                expires = timezone.make_aware(expires, UTC)
        models = [m.strip() for m in options["models"].split(",") if m.strip()]
        try:
            key, raw = api_key_create(
                organisation=org,
                name=options["name"],
                allowed_models=models,
                rpm=options["rpm"],
                tpm=options["tpm"],
                concurrency=options["concurrency"],
                expires_at=expires,
                **spend_options(options),
            )
        except ValidationError as exc:
            raise command_error(exc) from None
        self.stdout.write(
            f"Created API key '{key.name}' ({key.prefix}…) id={key.id} for {org.slug}; "
            f"models: {', '.join(models) or 'all'}; it is shown only once:"
        )
        self.stdout.write(raw)
