"""Operational endpoints and the front page (the API itself is in consumers.py)."""

import hmac

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    from responses_api.gateway.draining import drain

    if drain.draining:
        # SIGTERM received: take no new work while the open streams finish.
        return JsonResponse({"status": "draining", "checks": {}}, status=503)
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    if settings.REDIS_URL:
        try:
            import redis

            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
            checks["redis"] = "ok"
        except Exception as exc:
            checks["redis"] = f"error: {type(exc).__name__}"
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503
    )


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition, only for ``Authorization: Bearer $METRICS_TOKEN``."""
    from responses_api.backends.health import BackendHealthCollector
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
    body, content_type = exposition(BackendHealthCollector())
    return HttpResponse(body, content_type=content_type)


def openapi_json(request: HttpRequest) -> HttpResponse:
    """The OpenAPI 3.1 schema of the public API (public, like the API's shape)."""
    from responses_api.gateway.openapi import openapi_schema

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
    from responses_api.gateway.routes import PREFIXES, SCHEMA_PAGE

    return docs_page(schema_url=PREFIXES[0] + SCHEMA_PAGE.path, title="Switchyard API reference")


def home(request: HttpRequest) -> HttpResponse:
    return redirect("/console/")
