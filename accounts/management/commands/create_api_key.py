from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.management.commands._common import get_org
from accounts.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key. The key is printed once, alone on the last line of output."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--models", default="", help="Comma-separated model ids (default: all)."
        )
        parser.add_argument("--rpm", type=int)
        parser.add_argument("--tpm", type=int)
        parser.add_argument("--concurrency", type=int)
        parser.add_argument("--expires", help="ISO 8601 date-time, e.g. 2027-01-31T00:00:00Z")

    def handle(self, *args, **options):
        org = get_org(options["org"])
        expires = None
        if options["expires"]:
            try:
                expires = datetime.fromisoformat(options["expires"].replace("Z", "+00:00"))
            except ValueError:
                raise CommandError("--expires must be an ISO 8601 date-time.") from None
            if timezone.is_naive(expires):
                expires = timezone.make_aware(expires, UTC)
        for flag in ("rpm", "tpm", "concurrency"):
            if options[flag] is not None and options[flag] < 1:
                raise CommandError(f"--{flag} must be a positive integer.")
        models = [m.strip() for m in options["models"].split(",") if m.strip()]
        key, raw = api_key_create(
            organisation=org,
            name=options["name"],
            allowed_models=models,
            rpm=options["rpm"],
            tpm=options["tpm"],
            concurrency=options["concurrency"],
            expires_at=expires,
        )
        self.stdout.write(
            f"Created API key '{key.name}' ({key.prefix}…) id={key.id} for {org.slug}; "
            f"models: {', '.join(models) or 'all'}; it is shown only once:"
        )
        self.stdout.write(raw)
