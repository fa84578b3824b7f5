"""What the account commands share. Each command is the command line's door
to the same services the console calls; their audit entries say ``cli``."""

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
