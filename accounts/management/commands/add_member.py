import os
from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand

from accounts.management.commands._common import command_error, get_org
from accounts.models import Membership
from accounts.services.members import member_ensure


class Command(BaseCommand):
    help = (
        "Add a person to an organisation with a role, creating the user when missing. "
        "The password may also come from SWITCHYARD_MEMBER_PASSWORD."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--email", required=True)
        parser.add_argument("--role", required=True, choices=Membership.Role.values)
        parser.add_argument("--password")

    def handle(self, *args: Any, **options: Any) -> None:
        org = get_org(options["org"])
        password = options["password"] or os.environ.get("SWITCHYARD_MEMBER_PASSWORD") or None
        try:
            membership, created = member_ensure(
                organisation=org, email=options["email"], role=options["role"], password=password
            )
        except ValidationError as exc:
            raise command_error(exc) from None
        who = "Created user" if created else "User"
        self.stdout.write(f"{who} {membership.user.username} is {membership.role} of {org.slug}")
