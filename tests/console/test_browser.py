"""The console in a real headless Chromium against a live daphne and the
simulator: sign in, create a key, call the API with it, find the request in
the usage log, trace it by its X-Request-Id, revoke the key, and see the API
refuse it. And how pages lay out: the widest ones fit a 1,400 px window, and
a dark desktop gets the dark palette with readable badges.

Needs Debian's ``chromium`` and the ``playwright`` package (which drives the
installed browser; it downloads nothing). Without them the test is skipped,
except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import io
import os
import uuid
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from openai import AuthenticationError, OpenAI

from tests.console.conftest import usage_row
from tests.support import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            f"{reason} (CI must install it: apt-get install chromium; pip install playwright)"
        )
    pytest.skip(f"{reason}; install Debian's chromium and the playwright package to run it")


@pytest.fixture
def page(monkeypatch):
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is missing")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing")
    # Playwright's sync API runs an event loop in this thread; the ORM calls
    # the fixtures make around it are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
        context.close()
        browser.close()


def _wait_for_text(page, url: str, text: str, timeout: float = 15.0) -> None:
    def shown() -> bool:
        page.goto(url)
        return text in page.content()

    wait_until(shown, timeout=timeout, interval=0.3, message=f"{text!r} did not appear on {url}")


def test_key_lifecycle_usage_and_trace_in_a_browser(page, api_server, provision, simulator):
    provision("acme", simulator.url)
    console = api_server.url + "/console/"
    # Chromium reports each Content-Security-Policy violation on the console.
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )

    page.goto(console)
    page.fill("input[name=username]", "alice@example.com")
    page.fill("input[name=password]", "alice-password-1")
    page.click("button[type=submit]")
    page.wait_for_url(console)
    assert page.locator("h1").inner_text() == "Dashboard"

    page.click("text=API keys")
    page.click("text=New key")
    page.fill("input[name=name]", "browser key")
    page.check("input[name=allowed_models][value=sim-model]")
    page.click("button:has-text('Create key')")
    raw_key = page.locator("#new-key").inner_text().strip()
    assert raw_key.startswith("sy_sk_")
    assert page.locator("button[data-copy]").is_visible()

    client = OpenAI(base_url=api_server.url + "/v1", api_key=raw_key, max_retries=0)
    raw = client.responses.with_raw_response.create(model="sim-model", input="Say hi")
    request_id = raw.headers["x-request-id"]
    assert raw.parse().output_text
    with client.responses.stream(model="sim-model", input="Stream [[tokens:40]]") as stream:
        stream.get_final_response()
    # A client that gives up (a 499 row) and a backend error, for the dashboard.
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            api_server.url + "/v1/responses",
            headers={"authorization": f"Bearer {raw_key}"},
            json={"model": "sim-model", "input": "[[delay:3000]] slow", "stream": True},
            timeout=httpx.Timeout(5.0, read=0.5),
        )
    failed = httpx.post(
        api_server.url + "/v1/responses",
        headers={"authorization": f"Bearer {raw_key}"},
        json={"model": "sim-model", "input": "[[status:500]] fail"},
    )
    assert failed.status_code >= 500

    _wait_for_text(page, console + "usage/", request_id)
    page.select_option("select[name=status]", "200")
    page.wait_for_url("**status=200**")
    assert request_id in page.content()
    page.screenshot(path=str(ARTIFACTS / "console-usage.png"), full_page=True)

    page.fill("input[name=q]", request_id)
    page.press("input[name=q]", "Enter")
    page.wait_for_url(f"**/console/trace/{request_id}/")
    assert page.locator("#trace-request-id").inner_text() == request_id
    assert page.locator("#trace-status").inner_text() == "200"
    assert "browser key" in page.content()
    page.screenshot(path=str(ARTIFACTS / "console-trace.png"), full_page=True)

    _wait_for_text(page, console + "usage/?status=499", "Client disconnected")
    page.locator("table.usage a.mono").first.click()
    assert "The client disconnected." in page.content()
    page.screenshot(path=str(ARTIFACTS / "console-trace-499.png"), full_page=True)

    page.goto(console)
    page.screenshot(path=str(ARTIFACTS / "console-dashboard.png"), full_page=True)

    page.goto(console + "keys/")
    row = page.locator("tr", has_text="browser key")
    row.locator("text=Revoke").click()
    page.click("button:has-text('Revoke key')")
    page.wait_for_url(console + "keys/")
    assert "revoked" in page.locator("tr", has_text="browser key").inner_text()
    with pytest.raises(AuthenticationError) as refused:
        client.responses.create(model="sim-model", input="Say hi")
    assert refused.value.status_code == 401

    page.goto(api_server.url + "/api/v1/docs")
    page.wait_for_selector(".swagger-ui .info")
    page.screenshot(path=str(ARTIFACTS / "api-docs.png"), full_page=True)
    assert violations == []


# --- Layout and colour --------------------------------------------------------

WINDOW = 1400


def _sign_in(page, console: str, email: str = "alice@example.com") -> None:
    page.goto(console)
    page.fill("input[name=username]", email)
    page.fill("input[name=password]", "alice-password-1")
    page.click("button[type=submit]")
    page.wait_for_url(console)


def _page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def _busy_log(tenant) -> None:
    """Rows with everything a usage log cell can hold, at its longest."""
    for status in (200, 429, 499, 500):
        usage_row(
            tenant.organisation,
            status=status,
            model="a-model-with-a-rather-long-public-identifier-v2.5-instruct",
            key_prefix="sy_sk_abcdefgh",
            backend=tenant.backend,
            backend_name="backend-in-the-basement-rack-seventeen",
            session_id="0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b-with-a-suffix",
            note="client disconnected while the answer was being generated",
            stream=True,
            cost=Decimal("0.01234567"),
        )


def test_codex_page_and_usage_log_fit_a_1400_px_window(page, api_server, provision):
    from responses_api.catalogue.services.served_models import model_ensure

    tenant = provision("acme", "http://127.0.0.1:9/v1", model="acme-model")
    for n in range(3):
        model_ensure(
            organisation=tenant.organisation, public_id=f"acme-model-{n}", backend=tenant.backend
        )
    _busy_log(tenant)
    console = api_server.url + "/console/"
    page.set_viewport_size({"width": WINDOW, "height": 900})
    _sign_in(page, console)

    page.goto(console + "keys/")
    page.locator("tr", has_text="acme key").locator("text=Use with Codex").first.click()
    page.wait_for_selector("#codex-model_catalog-json")
    assert _page_width(page) <= WINDOW
    page.screenshot(path=str(ARTIFACTS / "console-codex.png"), full_page=True)

    page.goto(console + "usage/")
    assert page.locator("table.usage tbody tr").count() == 4
    assert _page_width(page) <= WINDOW
    table = page.locator("table.usage").bounding_box()
    assert table is not None and table["x"] + table["width"] <= WINDOW
    page.screenshot(path=str(ARTIFACTS / "console-usage-narrow.png"), full_page=True)


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(float(part) for part in css[css.index("(") + 1 : -1].split(",")[:3])


def _contrast(ink: str, paper: str) -> float:
    """WCAG 2 contrast ratio of two computed colours."""

    def luminance(colour: str) -> float:
        channels = [c / 255 for c in _rgb(colour)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(ink), luminance(paper)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _style(page, selector: str, prop: str) -> str:
    return page.eval_on_selector(selector, f"e => getComputedStyle(e).getPropertyValue({prop!r})")


def _assert_badges_readable(page) -> None:
    for status in ("s2xx", "s4xx", "s5xx"):
        badge = f"table.usage .badge.{status}"
        ratio = _contrast(_style(page, badge, "color"), _style(page, badge, "background-color"))
        assert ratio >= 4.5, (status, ratio)


def test_a_dark_desktop_gets_the_dark_palette(page, api_server, provision):
    tenant = provision("acme", "http://127.0.0.1:9/v1", model="acme-model")
    _busy_log(tenant)
    console = api_server.url + "/console/"
    _sign_in(page, console)

    page.goto(console + "usage/")
    assert _style(page, "body", "background-color") == "rgb(245, 246, 248)"
    _assert_badges_readable(page)

    page.emulate_media(color_scheme="dark")
    page.goto(console + "usage/")
    assert _style(page, "body", "background-color") == "rgb(15, 20, 32)"
    assert _style(page, ".card", "background-color") == "rgb(23, 29, 43)"
    _assert_badges_readable(page)
    page.screenshot(path=str(ARTIFACTS / "console-usage-dark.png"), full_page=True)

    page.goto(console)
    card = _style(page, ".card", "background-color")
    series = [f"svg.chart rect.s{n}" for n in range(1, 5)]
    drawn = [bar for bar in series if page.locator(bar).count()]
    assert drawn
    for bar in drawn:
        assert _contrast(_style(page, bar, "fill"), card) >= 3, bar
    page.screenshot(path=str(ARTIFACTS / "console-dashboard-dark.png"), full_page=True)


# --- Every page at a laptop's width ---------------------------------------------

LAPTOP = 1366


def _every_page(tenant, crew) -> dict[str, list[tuple[str, str]]]:
    """Each console page with the longest values its cells hold, by who may see it."""
    from accounts.audit import CLI
    from accounts.services.api_keys import api_key_create
    from responses_api.catalogue.services.mcp_servers import mcp_server_create
    from responses_api.files.service import file_create
    from responses_api.models import UsageLog
    from responses_api.retrieval.stores import vector_store_create
    from responses_api.usage.deadletters import Refusal, deadletters_add

    _busy_log(tenant)
    organisation = tenant.organisation
    for n in range(3):
        api_key_create(
            organisation=organisation,
            name=f"a key with a long descriptive name for the nightly batch jobs {n}",
            created_by=crew["alice"],
            rpm=600,
            tpm=200_000,
            concurrency=8,
            monthly_budget=Decimal("250"),
            monthly_tokens=50_000_000,
        )
    refused = {
        "request_id": str(uuid.uuid4()),
        "organisation_id": organisation.id,
        "method": "POST",
        "endpoint": "/responses/compact",
        "status": 200,
        "model": "a-model-with-a-rather-long-public-identifier-v2.5-instruct",
    }
    deadletters_add(refused=[Refusal(refused, "IntegrityError", "x" * 400)])
    key = organisation.api_keys.order_by("created_at").first()
    row = UsageLog.objects.filter(organisation=organisation).exclude(session_id="").first()
    assert key is not None and row is not None
    server = mcp_server_create(
        organisation=organisation,
        actor=CLI,
        label="a-registered-server-with-a-long-label",
        server_url="https://tools.example.com/a/rather/long/path/to/the/mcp/endpoint/of/a/team",
    )
    store = vector_store_create(
        organisation_id=organisation.id, name="handbooks of the regional sales teams, 2026 edition"
    )
    file_create(
        organisation_id=organisation.id,
        filename="quarterly-report-of-the-regional-sales-team-with-a-long-name.csv",
        purpose="user_data",
        content=io.BytesIO(b"region,sales\nnorth,1\n"),
        size=21,
    )
    return {
        "alice@example.com": [
            ("dashboard", ""),
            ("keys", "keys/"),
            ("key-create", "keys/new/"),
            ("key-edit", f"keys/{key.id}/edit/"),
            ("key-revoke", f"keys/{key.id}/revoke/"),
            ("key-codex", f"keys/{key.id}/codex/"),
            ("admin-keys", "admin-keys/"),
            ("admin-key-create", "admin-keys/new/"),
            ("backends", "backends/"),
            ("backend-create", "backends/new/"),
            ("backend", f"backends/{tenant.backend.id}/"),
            ("backend-edit", f"backends/{tenant.backend.id}/edit/"),
            ("models", "models/"),
            ("model-create", "models/new/"),
            ("model-edit", f"models/{tenant.model.id}/"),
            ("files", "files/"),
            ("vector-stores", "vector-stores/"),
            ("vector-store", f"vector-stores/{store.id}/"),
            ("mcp-servers", "mcp-servers/"),
            ("mcp-server-create", "mcp-servers/new/"),
            ("mcp-server-edit", f"mcp-servers/{server.id}/edit/"),
            ("web-search", "web-search/"),
            ("usage", "usage/"),
            ("session", f"usage/sessions/{row.session_id}/"),
            ("trace", f"trace/{row.request_id}/"),
            ("members", "members/"),
            ("settings", "settings/"),
            ("audit", "audit/"),
            ("password", "account/password/"),
        ],
        "sam@example.com": [
            ("support", "support/"),
            ("support-trace", f"support/trace/{row.request_id}/"),
            ("dead-letters", "support/dead-letters/"),
        ],
    }


def test_every_console_page_fits_a_1366_px_window(page, api_server, provision, crew):
    tenant = provision("acme", "http://127.0.0.1:9/v1", model="acme-model")
    console = api_server.url + "/console/"
    page.set_viewport_size({"width": LAPTOP, "height": 800})
    too_wide: dict[str, int] = {}
    for person, pages in _every_page(tenant, crew).items():
        page.context.clear_cookies()
        page.goto(console + "login/")
        page.fill("input[name=username]", person)
        page.fill("input[name=password]", person.split("@")[0] + "-password-1")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        for name, path in pages:
            response = page.goto(console + path)
            assert response is not None and response.status == 200, (name, response)
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > page.evaluate("window.innerWidth"):
                too_wide[name] = width
            # A table wider than its card scrolls inside it, its last
            # column (the buttons) cut off at the card's edge.
            clipped = page.evaluate(_CLIPPED_TABLES)
            if clipped:
                too_wide[f"{name} table"] = clipped
            if name in too_wide or f"{name} table" in too_wide:
                # What the failure shows (a full-page capture costs a few
                # hundred milliseconds, times every page).
                page.screenshot(path=str(ARTIFACTS / f"page-{name}.png"), full_page=True)
    assert too_wide == {}


_CLIPPED_TABLES = """
[...document.querySelectorAll('.table-wrap')]
  .filter(wrap => wrap.scrollWidth > wrap.clientWidth)
  .map(wrap => wrap.scrollWidth - wrap.clientWidth)
  .reduce((a, b) => Math.max(a, b), 0)
"""
