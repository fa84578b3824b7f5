from django.core.management.base import CommandError

from accounts.models import Organisation


def get_org(slug: str) -> Organisation:
    try:
        return Organisation.objects.get(slug=slug)
    except Organisation.DoesNotExist:
        raise CommandError(
            f"No organisation with slug '{slug}'. Create it with create_org."
        ) from None
