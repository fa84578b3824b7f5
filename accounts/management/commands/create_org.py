from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.audit import CLI
from accounts.management.commands._common import add_spend_arguments, command_error, spend_options
from accounts.models import Organisation
from accounts.services.organisations import organisation_ensure, organisation_settings_update


class Command(BaseCommand):
    help = (
        "Create an organisation (idempotent). On an existing one, the name, the retention "
        "settings and the spend limits given are set; 'none' removes a limit. "
        "--retention none deletes what the organisation has stored."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name")
        parser.add_argument(
            "--retention",
            choices=Organisation.Retention.values,
            help="none: store nothing (zero data retention); store: keep responses",
        )
        parser.add_argument(
            "--store-ttl-hours",
            type=int,
            help="with --retention store: hours a response is kept after its last use",
        )
        add_spend_arguments(parser)

    def handle(
        self,
        *args: Any,
        slug: str,
        name: str | None,
        retention: str | None,
        store_ttl_hours: int | None,
        **options: Any,
    ) -> None:
        data: dict[str, Any] = dict(spend_options(options))
        if retention is not None:
            data["retention_policy"] = retention
        if store_ttl_hours is not None:
            data["store_ttl_hours"] = store_ttl_hours
        try:
            with transaction.atomic():
                fields = ("name", *data)
                existing = Organisation.objects.filter(slug=slug).first()
                before = existing and [getattr(existing, field) for field in fields]
                org, created = organisation_ensure(slug=slug, name=name)
                if data:
                    org = organisation_settings_update(organisation=org, actor=CLI, data=data)
        except ValidationError as exc:
            raise command_error(exc) from None
        changed = before != [getattr(org, field) for field in fields]
        verb = "Created" if created else "Updated" if changed else "Exists:"
        budget = "none" if org.monthly_budget is None else f"{org.monthly_budget.normalize():f}"
        tokens = "none" if org.monthly_tokens is None else org.monthly_tokens
        self.stdout.write(
            f"{verb} organisation {org.slug} ({org.name}) id={org.id} "
            f"retention={org.retention_policy} store_ttl_hours={org.store_ttl_hours}; "
            f"monthly budget: {budget}; monthly tokens: {tokens}"
        )
