"""What someone who signs in with the identity provider sees of passwords
and of signing out: no password change offered (the page says where the
password is managed, and refuses the form), the admin's sign-in sent to
the console's while passwords are off, and signing out of the console
signing out of the provider too (RP-initiated logout with the ID token),
against a real provider (``oidc_provider``)."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.test import Client

from tests.console.oidc_provider import CLIENT_ID, set_user
from tests.console.test_oidc import configure, provider, signed_in_as, sso_sign_in  # noqa: F401

pytestmark = [pytest.mark.live, pytest.mark.django_db]

PASSWORD = "/console/account/password/"


def _sso_client(provider) -> Client:  # noqa: F811
    set_user(provider, "ann-sub", email="ann@acme.test", email_verified=True, name="Ann")
    client = Client()
    assert sso_sign_in(client, provider, "ann-sub").status_code == 302
    assert signed_in_as(client) == "ann@acme.test"
    return client


def test_a_provider_only_account_is_not_offered_a_password_change(configure, provider, people):  # noqa: F811
    client = _sso_client(provider)
    dashboard = client.get("/console/").content.decode()
    assert PASSWORD not in dashboard and "Change password" not in dashboard
    page = client.get(PASSWORD)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Your password is managed by Acme ID" in text
    assert 'name="new_password1"' not in text
    refused = client.post(
        PASSWORD,
        {
            "old_password": "",
            "new_password1": "N3w-pass-phrase",
            "new_password2": "N3w-pass-phrase",
        },
    )
    assert refused.status_code == 403
    assert "Your password is managed by Acme ID" in refused.content.decode()
    from django.contrib.auth.models import User

    assert not User.objects.get(username="ann@acme.test").has_usable_password()


def test_a_password_account_still_changes_its_password(configure, people):  # noqa: F811
    client = Client()
    assert client.login(username="alice@example.com", password="alice-password-1")
    assert PASSWORD in client.get("/console/").content.decode()
    page = client.get(PASSWORD).content.decode()
    assert 'name="new_password1"' in page
    changed = client.post(
        PASSWORD,
        {
            "old_password": "alice-password-1",
            "new_password1": "Another-pass-phrase-2",
            "new_password2": "Another-pass-phrase-2",
        },
    )
    assert changed.status_code == 302 and changed["Location"] == "/console/account/password/done/"


def test_with_passwords_off_the_admin_sign_in_is_the_consoles(configure, people):  # noqa: F811
    configure(password_login=False)
    answer = Client().get("/admin/login/?next=/admin/accounts/")
    assert answer.status_code == 302
    assert answer["Location"] == "/console/login/?next=%2Fadmin%2Faccounts%2F"
    page = Client().get(answer["Location"]).content.decode()
    assert "Sign in with Acme ID" in page and 'name="password"' not in page
    assert "next=/admin/accounts/" in page
    # Asked for the admin itself: the console's sign-in, back to the admin.
    assert Client().get("/admin/")["Location"].startswith("/admin/login/")
    assert Client().get("/admin/login/")["Location"] == "/console/login/?next=%2Fadmin%2F"
    # An account with a password is offered no change, and told why.
    client = Client()
    client.force_login(people["alice"])
    assert "Change password" not in client.get("/console/").content.decode()
    assert "managed by Acme ID" in client.get(PASSWORD).content.decode()


def test_with_passwords_on_the_admin_sign_in_keeps_its_form(configure, people):  # noqa: F811
    page = Client().get("/admin/login/")
    assert page.status_code == 200
    assert 'name="password"' in page.content.decode()


def test_signing_out_signs_out_of_the_provider_with_the_id_token(configure, provider, people):  # noqa: F811
    client = _sso_client(provider)
    id_token = client.session["oidc_id_token"]
    assert id_token.count(".") == 2
    out = client.post("/console/logout/")
    # A page that goes on to the provider (a redirect of the form's POST to
    # another origin is what the console's form-action 'self' forbids).
    assert out.status_code == 200
    assert signed_in_as(client) is None
    page = out.content.decode()
    href = html.unescape(re.search(r'id="provider-sign-out"[^>]*href="([^"]+)"', page)[1])
    assert f'<meta http-equiv="refresh" content="0; url={html.escape(href)}">' in page
    ending = urlsplit(href)
    assert f"{ending.scheme}://{ending.netloc}" == provider.url
    assert ending.path == "/oauth2/end_session"
    query = parse_qs(ending.query)
    assert query["id_token_hint"] == [id_token]
    assert query["client_id"] == [CLIENT_ID]
    assert query["post_logout_redirect_uri"] == ["http://testserver/console/login/"]
    # The provider's own page: its confirmation brings the browser back here.
    form = httpx.get(href)
    assert form.status_code == 200 and id_token in form.text
    back = httpx.post(
        provider.url + "/oauth2/end_session/confirm",
        data={"redirect_uri": "http://testserver/console/login/"},
    )
    assert (
        back.status_code == 302 and back.headers["location"] == "http://testserver/console/login/"
    )


def test_a_password_sign_out_stays_here(configure, people):  # noqa: F811
    client = Client()
    client.force_login(people["alice"])
    out = client.post("/console/logout/")
    assert out.status_code == 302
    assert not out["Location"].startswith("http")
    assert signed_in_as(client) is None
