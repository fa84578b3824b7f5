"""The console in a real headless Chromium against a live daphne and the
simulator: sign in, create a key, call the API with it, find the request in
the usage log, trace it by its X-Request-Id, revoke the key, and see the API
refuse it.

Needs Debian's ``chromium`` and the ``playwright`` package (which drives the
installed browser; it downloads nothing). Without them the test is skipped,
except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from openai import AuthenticationError, OpenAI

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
            refused.append(message.text) if "Content Security Policy" in message.text else None
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
