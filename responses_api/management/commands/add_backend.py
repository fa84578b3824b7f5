import argparse
import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.management.commands._common import command_error, get_org
from responses_api.catalogue.services.backends import backend_ensure
from responses_api.models import Backend


class Command(BaseCommand):
    help = "Add (or update) a backend of an organisation."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--url", required=True, help="Base URL, e.g. http://gpu1:8000/v1")
        parser.add_argument("--api-key")
        parser.add_argument("--dialect", choices=Backend.Dialect.values)
        parser.add_argument("--max-concurrency", type=int)
        parser.add_argument(
            "--extra-body",
            help='JSON object merged into every chat request, e.g. \'{"logit_bias": {"2": 100}}\'',
        )
        parser.add_argument(
            "--allow-private",
            action=argparse.BooleanOptionalAction,
            help="Let this backend sit on a loopback, private or link-local address, even "
            "where SWITCHYARD_BACKEND_ALLOW_PRIVATE is off (the default keeps the current flag).",
        )

    def handle(self, *args, **options):
        org = get_org(options["org"])
        extra_body = None
        if options["extra_body"] is not None:
            try:
                extra_body = json.loads(options["extra_body"])
            except json.JSONDecodeError as exc:
                raise CommandError(f"--extra-body is not valid JSON: {exc}") from None
            if not isinstance(extra_body, dict):
                raise CommandError("--extra-body must be a JSON object.")
        try:
            backend, created = backend_ensure(
                organisation=org,
                name=options["name"],
                base_url=options["url"],
                api_key=options["api_key"],
                dialect=options["dialect"],
                max_concurrency=options["max_concurrency"],
                extra_body=extra_body,
                allow_private=options["allow_private"],
            )
        except ValidationError as exc:
            raise command_error(exc) from None
        verb = "Created" if created else "Updated"
        self.stdout.write(
            f"{verb} backend {backend.name} id={backend.id} url={backend.base_url} "
            f"dialect={backend.dialect} max_concurrency={backend.max_concurrency} org={org.slug}"
            + (" allow_private" if backend.allow_private else "")
        )
