"""``make run``: the embedded default in one command.

Provisions a demo organisation, an admin login and an API key the first
time (kept in ``.run/demo.json``, readable only by you), starts the simulator
backend and daphne, and runs the periodic tasks (backend health, the purge of
expired stored responses) on a local timer.
"""

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils.module_loading import import_string

from accounts.services.api_keys import api_key_create
from accounts.services.members import member_ensure
from accounts.services.organisations import organisation_ensure
from responses_api.catalogue.services.backends import backend_ensure
from responses_api.catalogue.services.served_models import model_ensure

STATE = Path(settings.BASE_DIR) / ".run" / "demo.json"
# The beat schedule's entries the embedded default runs on its local timer
# (usage rows need no drain without Redis).
EMBEDDED_JOBS = (
    "backend-health",
    "stored-responses-purge",
    "health-history-purge",
    "usage-purge",
)


class Command(BaseCommand):
    help = "Run Switchyard's embedded default: simulator backend, daphne, demo data."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--simulator-port", type=int, default=8100)

    def handle(self, *args, host, port, simulator_port, **options):
        state = self.provision(simulator_port)
        base = f"http://{host}:{port}"
        children = [
            subprocess.Popen(
                [sys.executable, "manage.py", "simulator", "--port", str(simulator_port)],
                cwd=settings.BASE_DIR,
            ),
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "config.serve",
                    "-b",
                    host,
                    "-p",
                    str(port),
                    "config.asgi:application",
                ],
                cwd=settings.BASE_DIR,
            ),
        ]
        self.print_welcome(base, state)
        stop = threading.Event()
        threading.Thread(target=self.timer_loop, args=(stop,), daemon=True).start()

        def terminate(*_):
            stop.set()
            for child in children:
                if child.poll() is None:
                    child.terminate()

        signal.signal(signal.SIGTERM, terminate)
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            terminate()
            for child in children:
                child.wait(15)

    def provision(self, simulator_port: int) -> dict:
        org, _ = organisation_ensure(slug="demo", name="Demo organisation")
        backend, _ = backend_ensure(
            organisation=org,
            name="simulator",
            base_url=f"http://127.0.0.1:{simulator_port}/v1",
            dialect="openai",
        )
        model_ensure(
            organisation=org,
            public_id="sim-model",
            backend=backend,
            upstream_name="sim-model",
            context_window=32768,
            max_output_tokens=4096,
        )
        if STATE.exists():
            return json.loads(STATE.read_text())
        password = secrets.token_urlsafe(12)
        membership, _ = member_ensure(
            organisation=org, email="admin@example.com", role="owner", password=password
        )
        membership.user.is_staff = membership.user.is_superuser = True
        membership.user.save(update_fields=["is_staff", "is_superuser"])
        _, raw = api_key_create(organisation=org, name="demo key")
        state = {
            "email": "admin@example.com",
            "password": password,
            "api_key": raw,
            "model": "sim-model",
        }
        STATE.parent.mkdir(exist_ok=True)
        fd = os.open(STATE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(state, handle)
        return state

    def timer_loop(self, stop: threading.Event) -> None:
        # Stands in for Celery beat: runs the tasks the beat schedule names,
        # each at its interval (the health check also keeps the console's
        # health history; the purges delete expired stored responses, usage
        # rows past retention and roll-ups past 400 days).
        schedule = settings.CELERY_BEAT_SCHEDULE
        jobs = [
            (import_string(str(schedule[name]["task"])), float(str(schedule[name]["schedule"])))
            for name in EMBEDDED_JOBS
        ]
        due = [time.monotonic() + 2.0] * len(jobs)
        while not stop.wait(max(0.0, min(due) - time.monotonic())):
            for index, (task, interval) in enumerate(jobs):
                if due[index] > time.monotonic():
                    continue
                try:
                    task()
                except Exception as exc:  # keep the timer alive; report and go on
                    self.stderr.write(f"{task.name} failed: {exc}")
                due[index] = time.monotonic() + interval

    def print_welcome(self, base: str, state: dict) -> None:
        key, model = state["api_key"], state["model"]
        self.stdout.write(f"""
Switchyard is running (embedded default: SQLite, in-process cache, simulator backend).

  Console   {base}/console/   login {state["email"]} / {state["password"]}
  API       {base}/v1/responses
  API key   {key}
  Model     {model}   (served by the simulator backend, a development backend)

curl:
  curl {base}/v1/responses -H "Authorization: Bearer {key}" \\
       -H "Content-Type: application/json" -d '{{"model": "{model}", "input": "Say hi"}}'

OpenAI Python SDK:
  from openai import OpenAI
  client = OpenAI(base_url="{base}/v1", api_key="{key}")
  print(client.responses.create(model="{model}", input="Say hi").output_text)

Codex CLI (~/.codex/config.toml), then: SWITCHYARD_API_KEY={key} codex
  model = "{model}"
  model_provider = "switchyard"
  [model_providers.switchyard]
  name = "Switchyard"
  base_url = "{base}/v1"
  env_key = "SWITCHYARD_API_KEY"
  wire_api = "responses"

Stop with Ctrl-C. The demo credentials are kept in .run/demo.json.
""")
        self.stdout.flush()
