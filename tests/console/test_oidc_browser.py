"""Single sign-on in a real headless Chromium: a live daphne configured by
``SWITCHYARD_OIDC_*`` (password sign-in off) and the OpenID Connect provider
of ``oidc_provider`` as its own process. A person of a mapped e-mail domain
lands on the dashboard of their organisation with the mapped role; one of
an unmapped domain is shown why not.

Skipped like ``test_browser`` without Chromium and playwright (failed under
CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounts.models import Membership
from tests.conftest import server_env, start_daphne
from tests.console.oidc_provider import sso_env, start_provider
from tests.console.test_browser import ARGS, ARTIFACTS, CHROMIUM, _unavailable

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]

ANN = {"sub": "ann@acme.test", "email": "ann@acme.test", "email_verified": True, "name": "Ann"}
EVE = {"sub": "eve@elsewhere.test", "email": "eve@elsewhere.test", "email_verified": True}


@pytest.fixture
def console(django_db_setup, people):
    provider = start_provider(ANN, EVE)
    env = sso_env(
        provider,
        SWITCHYARD_OIDC_DOMAINS="acme.test=acme:developer",
        SWITCHYARD_PASSWORD_LOGIN="false",
    )
    server = start_daphne(env=server_env(**env))
    yield server.url + "/console/"
    server.stop()
    provider.stop()


@pytest.fixture
def page(monkeypatch):
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is missing")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        # The provider's pages link a stylesheet on a CDN; no test reaches
        # the Internet.
        context.route("https://cdn.jsdelivr.net/**", lambda route: route.abort())
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
        context.close()
        browser.close()


def test_sign_in_with_the_identity_provider_in_a_browser(page, console):
    page.goto(console)
    page.wait_for_url("**/console/login/?next=/console/")
    assert page.locator("input[name=password]").count() == 0
    page.screenshot(path=str(ARTIFACTS / "console-sso-login.png"))
    page.click("text=Sign in with Acme ID")
    # The provider's own page: choose who signs in.
    page.click("button[name=sub][value='ann@acme.test']")
    page.wait_for_url(console)
    assert page.locator("h1").inner_text() == "Dashboard"
    assert "Acme" in page.locator(".org-name").inner_text()
    assert "Developer" in page.locator(".whoami").inner_text()
    page.screenshot(path=str(ARTIFACTS / "console-sso-dashboard.png"))
    member = Membership.objects.get(user__username="ann@acme.test")
    assert (member.organisation.slug, member.role) == ("acme", "developer")

    # No password to change for an account made by single sign-on.
    assert page.locator("text=Change password").count() == 0

    # Signing out goes on to the provider's end of session, and back.
    page.click("text=Log out")
    page.wait_for_url(lambda url: "/oauth2/end_session" in url)
    assert "id_token_hint" in page.content()
    page.click("button:has-text('End session')")
    page.wait_for_url("**/console/login/")
    page.click("text=Sign in with Acme ID")
    page.click("button[name=sub][value='eve@elsewhere.test']")
    page.wait_for_url("**/console/oidc/callback/**")
    assert page.locator("h1").inner_text() == "Sign-in refused"
    reason = page.locator("#sso-reason").inner_text()
    assert reason == "eve@elsewhere.test is not allowed into any organisation here."
    page.screenshot(path=str(ARTIFACTS / "console-sso-refused.png"))
    page.goto(console)
    page.wait_for_url("**/console/login/?next=/console/")
