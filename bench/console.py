"""The console at scale: seed N usage rows into PostgreSQL, time the pages.

    python bench/console.py --rows 1000000 [--database-url postgres://…/sy_bench]

1. Provisions (through the services, like ``make run``) an organisation with
   ten keys, three backends, four models and an owner, plus a second
   organisation holding 2 % of the rows.
2. Seeds ``--rows`` usage rows over the last 30 days with one ``COPY``
   stream, indexes dropped during the copy and rebuilt after, then
   ``ANALYZE``. The mix: keys Zipf-weighted, four models on three backends,
   70 % streamed, statuses 200 (≈91 %), 400, 404, 429, 499, 500, 502, 503.
3. Builds the roll-ups for those rows with the writer's own code
   (``rollups.cells_of`` + the upsert of ``rollups_add_cells``).
4. Starts daphne on that database and times, signed in, each console page
   (``--repeat`` times after one warm-up; medians), and the CSV export's time
   to its first data row.

A database already holding the organisation's rows is reused (``--reseed``
seeds again). Prints a Markdown table, also written to
``bench/results/console-<rows>.md``.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/sy_usage_bench"
MODELS = {
    # public id: (backends, price in, cached, out per million, reasoning)
    "qwen3-32b": (("gpu1", "gpu2"), "0.10", "0.05", "0.40", True),
    "qwen3-coder-30b": (("gpu2",), "0.12", "0.06", "0.50", False),
    "gpt-oss-20b": (("gpu1", "gpu3"), "0.05", "0.02", "0.20", True),
    "llama-3.1-8b": (("gpu3",), "0.02", "0.01", "0.05", False),
}
MODEL_WEIGHTS = (45, 25, 20, 10)
STATUSES = (200, 400, 404, 429, 499, 500, 502, 503)
STATUS_WEIGHTS = (910, 20, 5, 30, 25, 3, 4, 3)
ERRORS = {
    400: ("invalid_request_error", "Unknown parameter: 'messages'."),
    404: ("model_not_found", "The model does not exist."),
    429: ("rate_limit_exceeded", "Rate limit reached for requests per minute."),
    499: ("", ""),
    500: ("server_error", "The backend failed."),
    502: ("bad_gateway", "The backend answered badly."),
    503: ("backends_saturated", "Every backend is busy."),
}
AGENTS = ("openai-python/2.8.0", "codex_cli_rs/0.171.0", "curl/8.5.0", "openai-node/6.1.0")


def _setup(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def _ensure_database(database_url: str) -> None:
    import psycopg

    url = urlparse(database_url)
    name = url.path.lstrip("/")
    admin = url._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def provision() -> dict:
    from accounts.models import ApiKey
    from accounts.services.api_keys import api_key_create
    from accounts.services.members import member_ensure
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure
    from responses_api.models import Backend

    orgs = {}
    for slug in ("bench", "bench-other"):
        org, _ = organisation_ensure(slug=slug, name=slug.title())
        org.usage_retention_days = 3650
        org.save(update_fields=["usage_retention_days"])
        backends = {}
        for name in ("gpu1", "gpu2", "gpu3"):
            backends[name], _ = backend_ensure(
                organisation=org, name=name, base_url=f"http://{name}.bench.invalid:8000/v1"
            )
        for public_id, (served_by, p_in, p_cached, p_out, _) in MODELS.items():
            for backend in served_by:
                model_ensure(
                    organisation=org,
                    public_id=public_id,
                    backend=backends[backend],
                    price_input=Decimal(p_in),
                    price_cached_input=Decimal(p_cached),
                    price_output=Decimal(p_out),
                )
        keys = list(ApiKey.objects.filter(organisation=org).order_by("name"))
        for i in range(len(keys), 10 if slug == "bench" else 2):
            key, _ = api_key_create(organisation=org, name=f"key-{i:02d}")
            keys.append(key)
        orgs[slug] = {
            "org": org,
            "keys": keys,
            "backends": {b.name: b for b in Backend.objects.filter(organisation=org)},
        }
    membership, _ = member_ensure(
        organisation=orgs["bench"]["org"],
        email="bench-owner@example.com",
        role="owner",
        password="bench-password-1",
    )
    orgs["user"] = membership.user
    return orgs


def _rows(n: int, orgs: dict, seed: int = 16):
    """(the row's columns as ``COPY`` text, roll-up dict) per row, oldest
    first over 30 days."""
    rng = random.Random(seed)
    now = datetime.now(tz=UTC)
    start = now - timedelta(days=30)
    span = (now - start).total_seconds()
    main, other = orgs["bench"], orgs["bench-other"]
    key_weights = [1 / (i + 1) for i in range(len(main["keys"]))]
    models = list(MODELS)
    chunk = 20_000
    for base in range(0, n, chunk):
        size = min(chunk, n - base)
        in_other = rng.choices((False, True), (98, 2), k=size)
        statuses = rng.choices(STATUSES, STATUS_WEIGHTS, k=size)
        model_picks = rng.choices(models, MODEL_WEIGHTS, k=size)
        key_picks = rng.choices(range(len(main["keys"])), key_weights, k=size)
        for j in range(size):
            i = base + j
            tenant = other if in_other[j] else main
            key = tenant["keys"][key_picks[j] % len(tenant["keys"])]
            model = model_picks[j]
            served_by, p_in, p_cached, p_out, reasoning = MODELS[model]
            backend = tenant["backends"][served_by[i % len(served_by)]]
            status = statuses[j]
            stream = rng.random() < 0.7
            created = start + timedelta(seconds=span * (i + rng.random()) / n)
            reached_backend = status in (200, 499, 500, 502)
            ttft = rng.lognormvariate(math.log(250), 0.8) if status in (200, 499) else None
            inp = int(rng.lognormvariate(math.log(2000), 1.0)) if reached_backend else 0
            cached = int(inp * rng.random()) if reached_backend and rng.random() < 0.4 else 0
            out = int(rng.lognormvariate(math.log(300), 0.9)) if status in (200, 499) else 0
            if status == 499:
                out //= 3
            think = int(out * 0.3) if reasoning else 0
            cost = (
                (inp - cached) * Decimal(p_in) + cached * Decimal(p_cached) + out * Decimal(p_out)
            ) / 1_000_000
            tps = rng.uniform(30, 120)
            duration = (ttft or rng.uniform(2, 40)) + out / tps * 1000
            code, message = ERRORS.get(status, ("", ""))
            note = "Client disconnected" if status == 499 else ""
            request_id = uuid.UUID(int=rng.getrandbits(128), version=4)
            finished = created + timedelta(milliseconds=duration)
            client = dict(
                zip(
                    ("session_id", "thread_id", "client_request_id", "originator"),
                    _client_ids(i, request_id),
                    strict=True,
                )
            )
            values = {
                "request_id": str(request_id),
                "organisation_id": str(tenant["org"].id),
                "api_key_id": str(key.id),
                "key_prefix": key.prefix,
                "model": model,
                "backend_id": str(backend.id),
                "backend_name": backend.name,
                "endpoint": "/v1/responses",
                "method": "POST",
                "stream": "t" if stream else "f",
                "status": str(status),
                "error_code": code,
                "error_message": message,
                "note": note,
                "notices": "[]",
                "input_tokens": str(inp),
                "cached_tokens": str(cached),
                "output_tokens": str(out),
                "reasoning_tokens": str(think),
                "cost": f"{cost:.8f}",
                "attempts": "1",
                "queue_wait_ms": f"{rng.uniform(0, 5):.2f}",
                "ttft_ms": f"{ttft:.2f}" if ttft is not None else "\\N",
                "duration_ms": f"{duration:.2f}",
                "tokens_per_second": f"{tps:.1f}" if out else "\\N",
                "client_ip": f"10.0.{i % 250}.{i % 200 + 1}",
                "user_agent": AGENTS[i % len(AGENTS)],
                "is_check": "f",
                "created_at": created.isoformat(),
                "finished_at": finished.isoformat(),
                **client,
            }
            rollup = {
                "organisation_id": tenant["org"].id,
                "created_at": created,
                "model": model,
                "api_key_id": key.id,
                "backend_id": backend.id,
                "status": status,
                "input_tokens": inp,
                "cached_tokens": cached,
                "output_tokens": out,
                "reasoning_tokens": think,
                "cost": cost,
                "ttft_ms": ttft,
            }
            yield values, rollup


def _client_ids(i: int, request_id: uuid.UUID) -> tuple[str, str, str, str]:
    """Codex's turns carry its session, thread and request ids (a session of
    about a dozen turns); other clients' rows carry none."""
    if not AGENTS[i % len(AGENTS)].startswith("codex"):
        return ("", "", "", "")
    session = str(uuid.UUID(int=(i // (12 * len(AGENTS))) + 1, version=4))
    return (session, session, str(request_id), "codex_exec")


def seed(n: int, orgs: dict) -> dict[str, float]:
    from django.db import connection, transaction

    from responses_api.models import UsageDaily, UsageHourly, UsageLog
    from responses_api.usage.columns import usage_columns
    from responses_api.usage.rollups import cells_of, rollups_add_cells

    table = UsageLog._meta.db_table
    timings: dict[str, float] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"TRUNCATE {table}, {UsageHourly._meta.db_table}, {UsageDaily._meta.db_table}"
        )
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
            "AND indexname NOT LIKE %s",
            [table, "%_pkey"],
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            constraint = cursor.execute(
                "SELECT conname FROM pg_constraint WHERE conname = %s", [name]
            ).fetchone()
            if constraint:
                cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
            else:
                cursor.execute(f'DROP INDEX "{name}"')
    raw = connection.connection
    cells: dict = {}
    started = time.perf_counter()
    pending = []
    with raw.cursor() as cur:
        # The rows' organisations, keys and backends exist (provisioned
        # above): skip the per-row foreign-key triggers during the copy.
        cur.execute("SET session_replication_role = replica")
        columns = usage_columns()
        with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            buffer = io.StringIO()
            for i, (values, rollup) in enumerate(_rows(n, orgs), 1):
                buffer.write("\t".join(values[c] for c in columns))
                buffer.write("\n")
                pending.append(rollup)
                if i % 20_000 == 0:
                    copy.write(buffer.getvalue())
                    buffer = io.StringIO()
                    for cell, sums in cells_of(pending).items():
                        into = cells.get(cell)
                        if into is None:
                            cells[cell] = sums
                        else:
                            for k, v in enumerate(sums):
                                into[k] += v
                    pending = []
                    if i % 1_000_000 == 0:
                        print(f"  {i:,} rows copied", file=sys.stderr, flush=True)
            copy.write(buffer.getvalue())
        cur.execute("SET session_replication_role = DEFAULT")
    raw.commit()
    for cell, sums in cells_of(pending).items():
        into = cells.setdefault(cell, [0] * len(sums))
        for k, v in enumerate(sums):
            into[k] += v
    timings["copy_s"] = time.perf_counter() - started

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for name, definition in indexes:
            if "UNIQUE" in definition:
                cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" UNIQUE (request_id)')
            else:
                cursor.execute(definition)
    timings["index_s"] = time.perf_counter() - started

    started = time.perf_counter()
    ordered = sorted(cells.items(), key=lambda item: (item[0][0], item[0][1]))
    for start in range(0, len(ordered), 5000):
        with transaction.atomic():
            rollups_add_cells(dict(ordered[start : start + 5000]))
    timings["rollups_s"] = time.perf_counter() - started
    timings["rollup_cells"] = float(len(cells))
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute(f"VACUUM ANALYZE {UsageHourly._meta.db_table}")
        cursor.execute(f"VACUUM ANALYZE {UsageDaily._meta.db_table}")
    return timings


def _session_cookie(user) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _median_ms(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def time_pages(base: str, cookie: str, orgs: dict, repeat: int) -> list[tuple[str, float]]:
    import httpx

    from responses_api.models import UsageLog

    main = orgs["bench"]
    client = httpx.Client(base_url=base, cookies={"sessionid": cookie}, timeout=120)

    def page(path: str, params: dict | None = None):
        def get():
            response = client.get(path, params=params)
            assert response.status_code == 200, (path, params, response.status_code)
            return response

        return get

    key = main["keys"][3]
    backend = main["backends"]["gpu2"]
    now = datetime.now(tz=UTC)
    window = {
        "since": (now - timedelta(days=12)).strftime("%Y-%m-%dT%H:%M"),
        "until": (now - timedelta(days=11)).strftime("%Y-%m-%dT%H:%M"),
    }
    rows: list[tuple[str, float]] = []
    for label, params in (
        ("dashboard, 24 hours", {"range": "24h"}),
        ("dashboard, 7 days", {"range": "7d"}),
        ("dashboard, 30 days", {"range": "30d"}),
    ):
        rows.append((label, _median_ms(page("/console/", params), repeat)))
    filters = (
        ("no filter", {}),
        ("key", {"key": str(key.id)}),
        ("model", {"model": "llama-3.1-8b"}),
        ("backend", {"backend": str(backend.id)}),
        ("status 200", {"status": "200"}),
        ("status 4xx", {"status": "4xx"}),
        ("status 429", {"status": "429"}),
        ("status 499", {"status": "499"}),
        ("status 5xx", {"status": "5xx"}),
        ("streamed", {"stream": "yes"}),
        ("last hour", {"range": "1h"}),
        ("from–to, one day 11 days ago", window),
        ("key + status 499 + 7 days", {"key": str(key.id), "status": "499", "range": "7d"}),
    )
    for label, params in filters:
        rows.append(
            (f"usage log, first page, {label}", _median_ms(page("/console/usage/", params), repeat))
        )
    older_cursor: dict = {}
    for label, params in (("no filter", {}), ("status 499", {"status": "499"})):
        first = client.get("/console/usage/", params=params)
        marker = "before="
        text = first.text
        cursor = text[text.index(marker) + len(marker) :].split('"')[0]
        older = {**params, "before": cursor}
        older_cursor[label] = older
        rows.append(
            (f"usage log, next page, {label}", _median_ms(page("/console/usage/", older), repeat))
        )
    second = client.get("/console/usage/", params=older_cursor["no filter"]).text
    newer = second[second.index("after=") + len("after=") :].split('"')[0]
    rows.append(
        ("usage log, newer page", _median_ms(page("/console/usage/", {"after": newer}), repeat))
    )
    request_id = (
        UsageLog.objects.filter(organisation=main["org"], status=499)
        .order_by("-created_at")
        .values_list("request_id", flat=True)[500]
    )
    rows.append(("trace page", _median_ms(page(f"/console/trace/{request_id}/"), repeat)))

    def first_row() -> None:
        with client.stream("GET", "/console/usage/export.csv") as response:
            assert response.status_code == 200
            seen = b""
            for chunk in response.iter_raw():
                seen += chunk
                if seen.count(b"\n") >= 2:  # the header, then a row
                    return
            raise AssertionError("empty export")

    rows.append(("usage CSV, time to first row", _median_ms(first_row, repeat)))
    client.close()
    return rows


def _start_daphne(database_url: str) -> tuple[subprocess.Popen, str]:
    import socket

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("REDIS_URL", None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "config.serve",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(base + "/healthz", timeout=1)
            return process, base
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("daphne did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--reseed", action="store_true")
    args = parser.parse_args()
    if not args.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("the console benchmark runs on PostgreSQL: give --database-url postgres://…")
    _ensure_database(args.database_url)
    _setup(args.database_url)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    orgs = provision()
    from responses_api.models import UsageHourly, UsageLog

    have = UsageLog.objects.count()
    timings: dict[str, float] = {}
    if args.reseed or have != args.rows:
        print(f"seeding {args.rows:,} rows …", file=sys.stderr, flush=True)
        timings = seed(args.rows, orgs)
        print(f"  {json.dumps({k: round(v, 1) for k, v in timings.items()})}", file=sys.stderr)
    cells = UsageHourly.objects.count()
    process, base = _start_daphne(args.database_url)
    try:
        results = time_pages(base, _session_cookie(orgs["user"]), orgs, args.repeat)
    finally:
        process.terminate()
        process.wait(10)
    lines = [
        f"Console, {args.rows:,} usage rows over 30 days (PostgreSQL, {cells:,} hourly roll-up "
        f"cells), median of {args.repeat} through daphne, signed in:",
        "",
        "| page | median |",
        "|---|---:|",
        *(f"| {label} | {ms:,.1f} ms |" for label, ms in results),
    ]
    if timings:
        lines += [
            "",
            f"Seeding: COPY {timings['copy_s']:.0f} s, indexes {timings['index_s']:.0f} s, "
            f"roll-ups {timings['rollups_s']:.0f} s "
            f"({int(timings['rollup_cells']):,} hourly cells).",
        ]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"console-{args.rows}.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
