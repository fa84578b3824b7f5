import json

from django.core.management.base import BaseCommand, CommandError

from responses_api.checks.model_check import CheckError, as_json, run_check, table


class Command(BaseCommand):
    help = (
        "Check a model's readiness for Codex through Switchyard's own translation: "
        "text, tools, parallel and custom calls, namespaces, reasoning, JSON output, "
        "the context window and cancellation."
    )

    def add_arguments(self, parser):
        parser.add_argument("model", help="The model's public id.")
        parser.add_argument("--org", required=True, help="The organisation's slug.")
        parser.add_argument("--backend", help="Run on this backend (by name) only.")
        parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
        parser.add_argument(
            "--timeout", type=float, default=60.0, help="Seconds per request (default 60)."
        )

    def handle(self, *args, **options):
        try:
            check = run_check(
                options["org"], options["model"], options["backend"], timeout=options["timeout"]
            )
        except CheckError as error:
            raise CommandError(str(error)) from error
        if options["json"]:
            self.stdout.write(json.dumps(as_json(check), indent=2))
        else:
            self.stdout.write(table(check))
        if not check.passed:
            raise CommandError("The model failed the check.", returncode=1)
