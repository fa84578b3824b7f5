from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the simulator backend (an OpenAI-compatible Chat Completions server)."

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

    def handle(self, *args, **options):
        import uvicorn

        from responses_api.simulator import Simulator

        app = Simulator(
            models=[m for m in options["models"].split(",") if m],
            max_concurrency=options["max_concurrency"],
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
