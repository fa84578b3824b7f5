from django.core.management.base import BaseCommand

from responses_api.simulator.plan import CONTEXT_WINDOW


class Command(BaseCommand):
    help = "Run the simulator backend (an OpenAI-compatible Chat Completions server)."
    # It serves none of the project's URLs, models or templates: Django's
    # system checks (most of its start-up time) have nothing to say about it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8100)
        parser.add_argument(
            "--models", default="sim-model", help="Comma-separated model ids it serves."
        )
        parser.add_argument(
            "--max-concurrency",
            type=int,
            default=0,
            help="Answer 429 above this many requests at once (0: no limit).",
        )

        parser.add_argument(
            "--break",
            dest="breaks",
            action="append",
            default=[],
            choices=["freeform"],
            help="Break one capability (freeform: custom tool input comes back JSON-wrapped).",
        )
        parser.add_argument(
            "--context-window",
            type=int,
            default=CONTEXT_WINDOW,
            help=f"Refuse prompts over this many tokens with a 400 (default {CONTEXT_WINDOW}; "
            "0: no limit).",
        )

    def handle(self, *args, **options):
        import uvicorn

        from responses_api.simulator.server import Simulator

        app = Simulator(
            models=[m for m in options["models"].split(",") if m],
            max_concurrency=options["max_concurrency"],
            breaks=options["breaks"],
            context_window=options["context_window"],
        )
        self.stdout.write(f"Simulator backend on http://{options['host']}:{options['port']}/v1")
        self.stdout.flush()
        uvicorn.run(
            app,
            host=options["host"],
            port=options["port"],
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
