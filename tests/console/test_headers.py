"""Response headers of the pages Django serves: a strict Content-Security-Policy
everywhere, and no-store on what a signed-in person sees."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}


def _policy(response) -> dict[str, str]:
    header = response.headers["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


@pytest.mark.parametrize(
    "url", ["/console/login/", "/admin/login/", "/api/v1/docs", "/v1/openapi.json", "/"]
)
def test_every_django_page_carries_the_content_security_policy(client, url):
    response = client.get(url, follow=True)
    assert response.status_code == 200
    policy = _policy(response)
    for directive, value in POLICY.items():
        assert policy[directive] == value, directive
    assert "unsafe-inline" not in response.headers["Content-Security-Policy"]
    assert "unsafe-eval" not in response.headers["Content-Security-Policy"]


def test_signed_in_console_and_admin_pages_carry_the_policy(as_user, estates):
    client = as_user("alice")
    for url in [reverse("console:dashboard"), reverse("console:members"), "/admin/"]:
        response = client.get(url)
        assert response.status_code in (200, 302), url
        assert _policy(response)["script-src"] == "'self'", url


def test_templates_have_no_inline_script_style_or_event_handlers():
    """The policy forbids inline code, so none may be written into a template."""
    inline = re.compile(r"<script(?![^>]*\bsrc=)|<style|\sstyle=|\son[a-z]+=", re.IGNORECASE)
    found = [
        f"{path.relative_to(TEMPLATES)}: {match.group(0).strip()}"
        for path in TEMPLATES.rglob("*.html")
        for match in inline.finditer(path.read_text())
    ]
    assert found == []


def test_console_pages_and_the_usage_export_are_not_stored(as_user, estates):
    client = as_user("alice")
    for url in [
        reverse("console:dashboard"),
        reverse("console:usage"),
        reverse("console:usage_export"),
        reverse("console:trace", args=[estates["acme"].row.request_id]),
    ]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert "no-store" in response.headers["Cache-Control"], url


def test_static_files_stay_cacheable_for_a_signed_in_person(as_user, crew):
    static = as_user("alice").get("/static/console/console.css")
    assert static.status_code == 200
    assert "no-store" not in static.headers.get("Cache-Control", "")
