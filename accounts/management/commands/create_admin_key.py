from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand

from accounts.admin_keys import admin_key_create
from accounts.management.commands._common import command_error, get_org
from accounts.models import AdminApiKey


class Command(BaseCommand):
    help = (
        "Create an admin API key, for the management API (/api/v1/admin/). "
        "The key is printed once, alone on the last line of output."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--role",
            choices=AdminApiKey.Role.values,
            default=AdminApiKey.Role.ADMIN,
            help="admin: read and write; viewer: read only (default: admin).",
        )
        parser.add_argument(
            "--scope",
            action="append",
            choices=AdminApiKey.Scope.values,
            default=[],
            dest="scopes",
            help="Also let the key use scim: SCIM 2.0 provisioning at /scim/v2/ (repeatable).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        org = get_org(options["org"])
        try:
            key, raw = admin_key_create(
                organisation=org,
                name=options["name"],
                role=options["role"],
                scopes=options["scopes"],
            )
        except ValidationError as exc:
            raise command_error(exc) from None
        scopes = f", scopes {', '.join(key.scopes)}" if key.scopes else ""
        self.stdout.write(
            f"Created admin API key '{key.name}' ({key.prefix}…) id={key.id} for {org.slug}, "
            f"role {key.role}{scopes}; it is shown only once:"
        )
        self.stdout.write(raw)
