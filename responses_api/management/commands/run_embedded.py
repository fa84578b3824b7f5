"""``make run``: the embedded default in one command.

Provisions a demo organisation (which stores responses, so that
``previous_response_id`` works from the first request), an admin login and
an API key the first time (kept in ``.run/demo.json``, readable only by you),
starts the simulator backend and daphne, and runs the periodic tasks (backend
health, the purge of expired stored responses) on a local timer. Both ports
are tried before anything is printed: a taken port is an error, not a banner
over a server that is not there.
"""

import errno
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import import_string

from accounts.audit import CLI
from accounts.services.api_keys import api_key_create
from accounts.services.members import member_ensure
from accounts.services.organisations import organisation_ensure, organisation_settings_update
from responses_api.catalogue.services.backends import backend_ensure
from responses_api.catalogue.services.served_models import model_ensure
from responses_api.simulator.plan import CONTEXT_WINDOW

STATE = Path(settings.BASE_DIR) / ".run" / "demo.json"
# The beat schedule's entries the embedded default runs on its local timer
# (usage rows need no drain without Redis).
EMBEDDED_JOBS = (
    "backend-health",
    "stored-responses-purge",
    "health-history-purge",
    "usage-purge",
    "file-orphans-purge",
)


class Command(BaseCommand):
    help = "Run Switchyard's embedded default: simulator backend, daphne, demo data."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--simulator-port", type=int, default=8100)
        parser.add_argument(
            "--state", default=str(STATE), help="Where the demo credentials are kept."
        )

    def handle(self, *args, host, port, simulator_port, state, **options):
        port_free(host, port, "PORT")
        port_free("127.0.0.1", simulator_port, "SIMULATOR_PORT")
        path = Path(state)
        state = self.provision(simulator_port, path)
        base = f"http://{host}:{port}"
        named = {
            "the simulator": subprocess.Popen(
                [sys.executable, "manage.py", "simulator", "--port", str(simulator_port)],
                cwd=settings.BASE_DIR,
            ),
            "daphne": subprocess.Popen(
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
        }
        children = list(named.values())
        try:
            ready(named, f"http://127.0.0.1:{simulator_port}/v1/models", f"{base}/healthz")
        except CommandError:
            for child in children:
                child.terminate()
            raise
        self.print_welcome(base, state, os.path.relpath(path, settings.BASE_DIR))
        stop = threading.Event()
        threading.Thread(target=self.timer_loop, args=(stop,), daemon=True).start()

        def terminate(*_):
            stop.set()
            for child in children:
                if child.poll() is None:
                    child.terminate()

        signal.signal(signal.SIGTERM, terminate)
        try:
            while all(child.poll() is None for child in children) and not stop.is_set():
                time.sleep(0.5)
        except KeyboardInterrupt:
            stop.set()
        finally:
            died = None if stop.is_set() else next(c for c in children if c.poll() is not None)
            terminate()
            for child in children:
                child.wait(15)
        if died is not None:
            name = next(name for name, child in named.items() if child is died)
            raise CommandError(f"{name} stopped (exit status {died.returncode}); see above.")

    def provision(self, simulator_port: int, path: Path) -> dict:
        org, created = organisation_ensure(slug="demo", name="Demo organisation")
        if created:
            organisation_settings_update(
                organisation=org, actor=CLI, data={"retention_policy": "store"}
            )
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
            context_window=CONTEXT_WINDOW,
            max_output_tokens=4096,
        )
        if path.exists():
            return json.loads(path.read_text())
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
        path.parent.mkdir(exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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

    def print_welcome(self, base: str, state: dict, kept_in: str) -> None:
        key, model = state["api_key"], state["model"]
        python = os.path.relpath(sys.executable, settings.BASE_DIR)
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

The demo organisation stores responses: send "previous_response_id" to go on
from an earlier answer (and "store": false for one that should not be kept).

Codex CLI (the same files as the console's API keys -> Use with Codex):
  {python} manage.py codex_config --org demo --key-name "demo key" --base-url {base} --out ~/.codex
  export SWITCHYARD_API_KEY={key}
  codex --profile switchyard

The simulator answers with deterministic text; directives in the prompt steer
it, e.g. "[[call:get_weather {{"city": "Paris"}}]]" for a tool call (docs/api/simulator.md).

Stop with Ctrl-C. The demo credentials are kept in {kept_in}.
""")
        self.stdout.flush()


def port_free(host: str, port: int, variable: str) -> None:
    """Refuse to start when ``port`` is taken, naming the ``make run`` variable
    that moves it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc})"
            raise CommandError(
                f"Port {port} on {host} {reason}: choose another with make run {variable}=<port>."
            ) from exc


def ready(children: dict[str, subprocess.Popen], *urls: str, timeout: float = 60.0) -> None:
    """Wait until every URL answers, so that the banner is only printed over
    servers that are there; a child that exits first is an error."""
    deadline = time.monotonic() + timeout
    for url in urls:
        while True:
            for name, child in children.items():
                if child.poll() is not None:
                    raise CommandError(f"{name} stopped (exit status {child.returncode}).")
            try:
                with urllib.request.urlopen(url, timeout=1.0):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise CommandError(f"{url} did not answer within {timeout:.0f} s.") from None
                time.sleep(0.2)
