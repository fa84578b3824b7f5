from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.management.commands._common import command_error, get_org
from responses_api.models import Backend
from responses_api.services import model_ensure


class Command(BaseCommand):
    help = "Add a model served by a backend; again with another --backend adds that backend."

    def add_arguments(self, parser):
        parser.add_argument("public_id")
        parser.add_argument("--org", required=True)
        parser.add_argument("--backend", required=True, help="Backend name")
        parser.add_argument("--upstream-name")
        parser.add_argument("--context-window", type=int)
        parser.add_argument("--max-output-tokens", type=int)

    def handle(self, *args, **options):
        org = get_org(options["org"])
        backend = Backend.objects.filter(organisation=org, name=options["backend"]).first()
        if backend is None:
            raise CommandError(f"No backend named '{options['backend']}' in {org.slug}.")
        try:
            model, created = model_ensure(
                organisation=org,
                public_id=options["public_id"],
                backend=backend,
                upstream_name=options["upstream_name"],
                context_window=options["context_window"],
                max_output_tokens=options["max_output_tokens"],
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
