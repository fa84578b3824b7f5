import json
import uuid

from django.core.management.base import BaseCommand, CommandError

from responses_api.models import UsageLog
from responses_api.usage.trace import usage_row_dict


class Command(BaseCommand):
    help = "Print a request's usage row as JSON, by its X-Request-Id."

    def add_arguments(self, parser):
        parser.add_argument("request_id")

    def handle(self, *args, request_id, **options):
        try:
            uuid.UUID(request_id)
        except ValueError:
            raise CommandError(f"{request_id!r} is not a request id (a UUID).") from None
        row = (
            UsageLog.objects.select_related("organisation", "api_key", "backend")
            .filter(request_id=request_id)
            .first()
        )
        if row is None:
            raise CommandError(f"No request {request_id} in the usage log.")
        self.stdout.write(json.dumps(usage_row_dict(row), indent=2))
