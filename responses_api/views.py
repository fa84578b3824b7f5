"""Operational endpoints and the front page (the API itself is in consumers.py)."""

import hmac
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.deprecation import MiddlewareMixin

from responses_api.runtime.outages import outages


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


_redis_probes: dict[str, Any] = {}


# A probe waits this long for an answer (an unreachable host may never
# refuse the connection; the kubelet's own probe timeout must not fire first).
PROBE_SECONDS = 2.0
# Its own thread: a connection hanging on an unreachable database times the
# probe out instead of holding the request, and later probes queue behind it
# (and time out too) until it gives up.
_database_prober = ThreadPoolExecutor(max_workers=1, thread_name_prefix="switchyard-readyz")


def _select_one() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        # A new connection each time: what a failover changes is whether
        # one can be made, and the probe holds none between its runs.
        connection.close()


def _probe_database() -> None:
    _database_prober.submit(_select_one).result(timeout=PROBE_SECONDS)


def _probe_redis() -> None:
    from responses_api.runtime.redis_conn import sync_client

    client = _redis_probes.get(settings.REDIS_URL)
    if client is None:
        client = sync_client(socket_timeout=PROBE_SECONDS, socket_connect_timeout=PROBE_SECONDS)
        _redis_probes[settings.REDIS_URL] = client
    client.ping()


def readyz(request: HttpRequest) -> HttpResponse:
    """200 ``ok``; 200 ``degraded`` naming the dependencies failing for less
    than the grace window; 503 once one has failed for longer, or at once
    when the process drains."""
    from responses_api.pipeline.draining import drain

    if drain.draining:
        # SIGTERM received: take no new work while the open streams finish.
        return JsonResponse({"status": "draining", "checks": {}}, status=503)
    probes = [("database", _probe_database)]
    if settings.REDIS_URL:
        probes.append(("redis", _probe_redis))
    grace = settings.SWITCHYARD_READY_GRACE_SECONDS
    checks: dict[str, str] = {}
    degraded: dict[str, float] = {}
    down = False
    for name, probe in probes:
        try:
            probe()
        except Exception as exc:
            checks[name] = f"error: {type(exc).__name__}"
            failing = outages.failed(name, time.monotonic())
            degraded[name] = round(failing, 1)
            down = down or failing >= grace
            continue
        checks[name] = "ok"
        outages.recovered(name)
    body: dict[str, Any] = {"status": "ok", "checks": checks}
    if degraded:
        body["status"] = "unavailable" if down else "degraded"
        body["degraded"] = sorted(degraded)
        body["failing_seconds"] = degraded
        body["grace_seconds"] = grace
    return JsonResponse(body, status=503 if down else 200)


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition, only for ``Authorization: Bearer $METRICS_TOKEN``."""
    from responses_api.backends.health import BackendHealthCollector
    from responses_api.backends.kv_subscriber import EventsCollector
    from responses_api.runtime.metrics import exposition

    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse("Not found: /metrics is off (METRICS_TOKEN is not set).\n", status=404)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    valid = hmac.compare_digest(given.strip().encode(), token.encode())
    if scheme.lower() != "bearer" or not valid:
        response = HttpResponse("Unauthorized\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = exposition(BackendHealthCollector(), EventsCollector())
    return HttpResponse(body, content_type=content_type)


class OperationalEndpoints(MiddlewareMixin):
    """Answers ``/healthz``, ``/readyz`` and ``/metrics`` before Django checks
    the Host header: the kubelet and Prometheus address a pod by its IP,
    which ``ALLOWED_HOSTS`` cannot list. None of the three builds a URL from
    the Host, and ``/metrics`` wants its bearer token whatever the Host."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        view = OPERATIONAL.get(request.path_info)
        return view(request) if view is not None else None


OPERATIONAL = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}


def openapi_json(request: HttpRequest) -> HttpResponse:
    """The OpenAPI 3.1 schema of the public API (public, like the API's shape)."""
    from responses_api.edge.openapi import openapi_schema

    response = JsonResponse(openapi_schema(), json_dumps_params={"indent": 1})
    response["Access-Control-Allow-Origin"] = "*"
    return response


DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="{icon}" type="image/svg+xml">
<link rel="stylesheet" href="{css}">
</head>
<body>
<div id="swagger-ui" data-schema="{schema}"></div>
<script src="{bundle}"></script>
<script src="{init}"></script>
</body>
</html>
"""


def docs_page(*, schema_url: str, title: str) -> HttpResponse:
    """An interactive reference of the schema at ``schema_url``, rendered in
    the browser from Swagger UI as the pinned ``drf-spectacular-sidecar``
    serves it among the static files: nothing comes from another host."""
    from django.templatetags.static import static
    from django.utils.html import escape

    vendor = "drf_spectacular_sidecar/swagger-ui-dist/"
    page = DOCS_PAGE.format(
        title=escape(title),
        icon=escape(static("console/favicon.svg")),
        css=escape(static(vendor + "swagger-ui.css")),
        bundle=escape(static(vendor + "swagger-ui-bundle.js")),
        init=escape(static("apidocs/init.js")),
        schema=escape(schema_url),
    )
    return HttpResponse(page)


def api_docs(request: HttpRequest) -> HttpResponse:
    """Interactive API reference, rendered in the browser from the vendored Swagger UI."""
    from responses_api.edge.routes import PREFIXES, SCHEMA_PAGE

    return docs_page(schema_url=PREFIXES[0] + SCHEMA_PAGE.path, title="Switchyard API reference")


def home(request: HttpRequest) -> HttpResponse:
    return redirect("/console/")
