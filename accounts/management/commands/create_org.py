from django.core.management.base import BaseCommand

from accounts.services import organisation_ensure


class Command(BaseCommand):
    help = "Create an organisation (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name")

    def handle(self, *args, slug, name, **options):
        org, created = organisation_ensure(slug=slug, name=name)
        verb = "Created" if created else "Exists:"
        self.stdout.write(f"{verb} organisation {org.slug} ({org.name}) id={org.id}")
