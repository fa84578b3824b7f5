import argparse
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.management.commands._common import command_error, get_org
from responses_api.catalogue.services.served_models import model_ensure
from responses_api.models import Backend


def _price(value: str) -> Decimal:
    try:
        return Decimal(value)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None


def _levels(value: str) -> list[str]:
    return [level.strip() for level in value.split(",") if level.strip()]


class Command(BaseCommand):
    help = (
        "Add a model served by a backend, or update it; again with another --backend adds "
        "that backend. Only the options given change an existing model."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("public_id")
        parser.add_argument("--org", required=True)
        parser.add_argument("--backend", required=True, help="Backend name")
        parser.add_argument("--upstream-name", help="The backend's name for it (default: the id)")
        parser.add_argument(
            "--alias",
            action="append",
            dest="aliases",
            help="Another name clients may use (repeatable; replaces the aliases)",
        )
        parser.add_argument("--context-window", type=int)
        parser.add_argument("--max-output-tokens", type=int)
        parser.add_argument("--default-max-output-tokens", type=int)
        parser.add_argument(
            "--first-token-timeout",
            type=int,
            help="Seconds a non-streamed request waits for the first token (default: platform's)",
        )
        parser.add_argument("--temperature", type=float, help="Recommended temperature")
        parser.add_argument("--top-p", type=float, help="Recommended top_p")
        parser.add_argument(
            "--vision", action=argparse.BooleanOptionalAction, help="Accepts images"
        )
        parser.add_argument(
            "--reasoning", action=argparse.BooleanOptionalAction, help="Can reason (think)"
        )
        parser.add_argument(
            "--reasoning-levels",
            type=_levels,
            help="Reasoning efforts it takes, e.g. low,medium,high",
        )
        parser.add_argument(
            "--default-reasoning", help="The effort clients such as Codex send by default"
        )
        parser.add_argument(
            "--kind",
            choices=["generate", "embed"],
            help="generate (/v1/responses, the default) or embed (/v1/embeddings)",
        )
        for name in ("input", "cached-input", "output"):
            parser.add_argument(f"--price-{name}", type=_price, help=f"Price per 1M {name} tokens")

    def handle(self, *args: Any, **options: Any) -> None:
        org = get_org(options["org"])
        backend = Backend.objects.filter(organisation=org, name=options["backend"]).first()
        if backend is None:
            raise CommandError(f"No backend named '{options['backend']}' in {org.slug}.")
        fields = {
            "aliases": options["aliases"],
            "default_max_output_tokens": options["default_max_output_tokens"],
            "first_token_timeout": options["first_token_timeout"],
            "temperature": options["temperature"],
            "top_p": options["top_p"],
            "supports_vision": options["vision"],
            "supports_reasoning": options["reasoning"],
            "kind": options["kind"],
            "reasoning_levels": options["reasoning_levels"],
            "default_reasoning_effort": options["default_reasoning"],
            "price_input": options["price_input"],
            "price_cached_input": options["price_cached_input"],
            "price_output": options["price_output"],
        }
        try:
            model, created = model_ensure(
                organisation=org,
                public_id=options["public_id"],
                backend=backend,
                upstream_name=options["upstream_name"],
                context_window=options["context_window"],
                max_output_tokens=options["max_output_tokens"],
                **{name: value for name, value in fields.items() if value is not None},
            )
        except ValidationError as exc:
            raise command_error(exc) from None
        verb = "Created" if created else "Updated"
        backends = ", ".join(
            f"{d.backend.name} as {d.upstream_name}"
            for d in model.deployments.select_related("backend")
        )
        self.stdout.write(
            f"{verb} model {model.public_id} id={model.id} in {org.slug}; served by {backends}"
        )
