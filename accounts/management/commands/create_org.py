from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand

from accounts.audit import CLI
from accounts.management.commands._common import add_spend_arguments, command_error, spend_options
from accounts.services import organisation_ensure, organisation_settings_update


class Command(BaseCommand):
    help = (
        "Create an organisation (idempotent). On an existing one, the name and the "
        "spend limits given are set; 'none' removes a limit."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name")
        add_spend_arguments(parser)

    def handle(self, *args: Any, slug: str, name: str | None, **options: Any) -> None:
        limits = spend_options(options)
        try:
            org, created = organisation_ensure(slug=slug, name=name)
            if limits:
                org = organisation_settings_update(organisation=org, actor=CLI, data=limits)
        except ValidationError as exc:
            raise command_error(exc) from None
        verb = "Created" if created else "Exists:"
        budget = "none" if org.monthly_budget is None else f"{org.monthly_budget.normalize():f}"
        tokens = "none" if org.monthly_tokens is None else org.monthly_tokens
        self.stdout.write(
            f"{verb} organisation {org.slug} ({org.name}) id={org.id}; "
            f"monthly budget: {budget}; monthly tokens: {tokens}"
        )
