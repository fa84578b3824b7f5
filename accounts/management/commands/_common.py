"""What the account commands share. Each command is the command line's door
to the same services the console calls; their audit entries say ``cli``."""

from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from accounts.models import Organisation


def get_org(slug: str) -> Organisation:
    try:
        return Organisation.objects.get(slug=slug)
    except Organisation.DoesNotExist:
        raise CommandError(
            f"No organisation with slug '{slug}'. Create it with create_org."
        ) from None


def command_error(exc: ValidationError) -> CommandError:
    """A service's validation error as the command's one-line error."""
    if hasattr(exc, "error_dict"):
        text = "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
    else:
        text = " ".join(exc.messages)
    return CommandError(text)


# Given as the value of a limit flag, removes the limit.
NO_LIMIT = "none"
# A limit flag left out: the setting stays as it is.
UNSET = object()


def _amount(text: str) -> str | None:
    """An amount is passed on as text: the service parses it exactly."""
    return None if text.strip().lower() == NO_LIMIT else text


def _tokens(text: str) -> int | None:
    if text.strip().lower() == NO_LIMIT:
        return None
    try:
        return int(text)
    except ValueError:
        raise ArgumentTypeError(f"expected a whole number or '{NO_LIMIT}'") from None


def add_spend_arguments(parser: ArgumentParser) -> None:
    """``--monthly-budget AMOUNT --monthly-tokens N`` ('none' removes one)."""
    parser.add_argument(
        "--monthly-budget",
        type=_amount,
        default=UNSET,
        metavar="AMOUNT",
        help="Monthly budget (calendar month, UTC) in the currency of the model prices.",
    )
    parser.add_argument(
        "--monthly-tokens",
        type=_tokens,
        default=UNSET,
        metavar="N",
        help="Monthly quota of input + output tokens.",
    )


def spend_options(options: dict[str, Any]) -> dict[str, Any]:
    """The spend limits the command line gave, by service field name."""
    return {
        field: options[field]
        for field in ("monthly_budget", "monthly_tokens")
        if options.get(field, UNSET) is not UNSET
    }
