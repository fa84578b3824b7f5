"""Single sign-on through a real OpenID Connect provider (a process, see
``oidc_provider``): the console's views in this process, the provider over
HTTP, and the library's whole code flow between them (state, nonce, PKCE,
the RS256-signed ID token, userinfo).

Who gets in and where: the e-mail domain and groups rules, verified e-mail
only, accounts created or not, roles raised but never lowered, an identity
that maps to nothing refused with a page that says so, and password sign-in
turned off."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import AuditEntry, Membership
from config.settings_sso import sign_in_backends, sso_config
from tests.conftest import Proc
from tests.console.oidc_provider import path_of, set_user, sso_env, start_provider

pytestmark = [pytest.mark.live, pytest.mark.django_db]

LOGIN = "/console/login/"


@pytest.fixture(scope="module")
def provider() -> Iterator[Proc]:
    proc = start_provider()
    yield proc
    proc.stop()


@pytest.fixture
def configure(provider, settings, monkeypatch):
    """Single sign-on on, in this process, as ``SWITCHYARD_OIDC_*`` would
    set it."""

    def apply(password_login: bool = True, **variables: str) -> None:
        defaults = {
            "SWITCHYARD_OIDC_DOMAINS": "acme.test=acme:developer",
            "SWITCHYARD_OIDC_GROUPS": "globex-admins=globex:admin",
        }
        for name, value in sso_env(provider, **{**defaults, **variables}).items():
            monkeypatch.setenv(name, value)
        settings.SWITCHYARD_SSO = sso_config()
        settings.SWITCHYARD_PASSWORD_LOGIN = password_login
        settings.AUTHENTICATION_BACKENDS = sign_in_backends(
            sso=settings.SWITCHYARD_SSO, password_login=password_login
        )

    apply()
    return apply


def sso_sign_in(client: Client, provider: Proc, sub: str, next_url: str = ""):
    """The whole flow as a browser runs it: the console's redirect to the
    provider, the provider's form, and the callback. The callback's answer."""
    start = client.get("/console/oidc/start/" + (f"?next={next_url}" if next_url else ""))
    assert start.status_code == 302, start.content
    authorize = start["Location"]
    assert authorize.startswith(provider.url + "/oauth2/authorize?")
    approved = httpx.post(authorize, data={"sub": sub})
    assert approved.status_code == 302, approved.text
    assert approved.headers["location"].startswith("http://testserver/console/oidc/callback/")
    return client.get(path_of(approved.headers["location"]))


def signed_in_as(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


def test_the_sign_in_page_is_unchanged_while_single_sign_on_is_off(db):
    page = Client().get(LOGIN).content.decode()
    assert "Sign in with" not in page
    assert 'name="password"' in page
    assert Client().get("/console/oidc/start/").status_code == 404
    assert Client().get("/console/oidc/callback/?code=x&state=y").status_code == 404


def test_the_sign_in_page_offers_the_provider_beside_the_password(configure):
    page = Client().get(LOGIN + "?next=/console/usage/").content.decode()
    assert "Sign in with Acme ID" in page
    assert 'href="/console/oidc/start/?next=/console/usage/"' in page
    assert 'name="password"' in page


def test_an_email_domain_rule_creates_the_account_and_its_membership(configure, provider, people):
    set_user(provider, "ann-sub", email="Ann@acme.test", email_verified=True, name="Ann")
    client = Client()
    answer = sso_sign_in(client, provider, "ann-sub")
    assert answer.status_code == 302
    assert answer["Location"] == "/console/"
    assert signed_in_as(client) == "ann@acme.test"
    member = Membership.objects.get(user__username="ann@acme.test")
    assert (member.organisation.slug, member.role) == ("acme", "developer")
    assert not member.user.has_usable_password()
    entry = AuditEntry.objects.get(organisation=people["acme"], target="ann@acme.test")
    assert entry.source == AuditEntry.Source.SSO
    assert entry.target == "ann@acme.test"
    assert entry.details == {"role": "developer", "user_created": True}
    dashboard = client.get("/console/")
    assert dashboard.status_code == 200
    assert "Acme" in dashboard.content.decode()


def test_the_person_comes_back_to_the_page_they_asked_for(configure, provider, people):
    set_user(provider, "ann-sub", email="ann@acme.test", email_verified=True)
    answer = sso_sign_in(Client(), provider, "ann-sub", next_url="/console/usage/")
    assert answer["Location"] == "/console/usage/"


def test_a_group_rule_grants_its_organisation_and_role(configure, provider, people):
    set_user(
        provider,
        "gus-sub",
        email="gus@partner.test",
        email_verified=True,
        groups=["globex-admins", "unrelated"],
    )
    client = Client()
    assert sso_sign_in(client, provider, "gus-sub").status_code == 302
    roles = dict(
        Membership.objects.filter(user__username="gus@partner.test").values_list(
            "organisation__slug", "role"
        )
    )
    assert roles == {"globex": "admin"}
    # An admin of Globex, not of Acme: Acme's members are not there for him.
    bob = Membership.objects.get(user=people["bob"])
    changed = client.post(f"/console/members/{bob.public_id}/role/", {"role": "viewer"})
    assert changed.status_code == 404
    bob.refresh_from_db()
    assert bob.role == "developer"


def test_an_identity_that_maps_to_nothing_is_refused_with_a_reason(configure, provider, people):
    set_user(provider, "eve-sub", email="eve@elsewhere.test", email_verified=True)
    client = Client()
    answer = sso_sign_in(client, provider, "eve-sub")
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "Sign-in refused" in page
    assert "eve@elsewhere.test is not allowed into any organisation here." in page
    assert signed_in_as(client) is None
    assert not User.objects.filter(username="eve@elsewhere.test").exists()


def test_an_unverified_email_is_refused(configure, provider, people):
    set_user(provider, "ann-sub", email="ann@acme.test", email_verified=False)
    answer = sso_sign_in(Client(), provider, "ann-sub")
    assert answer.status_code == 403
    assert "has not verified ann@acme.test" in answer.content.decode()
    assert not User.objects.filter(username="ann@acme.test").exists()


def test_unverified_emails_may_be_trusted_when_configured(configure, provider, people):
    configure(SWITCHYARD_OIDC_REQUIRE_VERIFIED_EMAIL="false")
    set_user(provider, "ann-sub", email="ann@acme.test")
    assert sso_sign_in(Client(), provider, "ann-sub").status_code == 302


def test_without_account_creation_only_existing_accounts_sign_in(configure, provider, people):
    configure(
        SWITCHYARD_OIDC_CREATE_USERS="false",
        SWITCHYARD_OIDC_DOMAINS="acme.test=acme:developer,example.com=acme:viewer",
    )
    set_user(provider, "ann-sub", email="ann@acme.test", email_verified=True)
    refused = sso_sign_in(Client(), provider, "ann-sub")
    assert refused.status_code == 403
    assert "No account here uses ann@acme.test" in refused.content.decode()
    # Bob has an account (a password one): the provider's word signs him in.
    set_user(provider, "bob-sub", email="BOB@example.com", email_verified=True)
    client = Client()
    assert sso_sign_in(client, provider, "bob-sub").status_code == 302
    assert signed_in_as(client) == "bob@example.com"


def test_a_rule_raises_a_role_but_never_lowers_one(configure, provider, people):
    configure(
        SWITCHYARD_OIDC_DOMAINS="example.com=acme:admin",
        SWITCHYARD_OIDC_GROUPS="globex-viewers=globex:viewer",
    )
    # Alice owns Acme: the rule's admin would be a demotion.
    set_user(provider, "alice-sub", email="alice@example.com", email_verified=True)
    assert sso_sign_in(Client(), provider, "alice-sub").status_code == 302
    assert Membership.objects.get(user=people["alice"], organisation=people["acme"]).role == "owner"
    # Bob is a developer in Acme: raised to admin, and added to Globex.
    set_user(
        provider, "bob-sub", email="bob@example.com", email_verified=True, groups="globex-viewers"
    )
    assert sso_sign_in(Client(), provider, "bob-sub").status_code == 302
    roles = dict(
        Membership.objects.filter(user=people["bob"]).values_list("organisation__slug", "role")
    )
    assert roles == {"acme": "admin", "globex": "viewer"}
    changes = AuditEntry.objects.filter(source=AuditEntry.Source.SSO).values_list(
        "organisation__slug", "action", "target"
    )
    assert sorted(changes) == [
        ("acme", "member.role", "bob@example.com"),
        ("globex", "member.add", "bob@example.com"),
    ]


def _invite(people, email: str, role: str = "viewer") -> str:
    from accounts.audit import Actor
    from accounts.services.invitations import invitation_create

    actor = Actor.console(people["charlie"])
    _invitation, token = invitation_create(
        organisation=people["globex"], actor=actor, email=email, role=role
    )
    return f"/console/invitation/{token}/"


def test_a_pending_invitation_admits_its_address_and_is_accepted(configure, provider, people):
    configure(SWITCHYARD_OIDC_CREATE_USERS="false")
    _invite(people, "Ivy@elsewhere.test")
    set_user(provider, "ivy-sub", email="ivy@elsewhere.test", email_verified=True)
    client = Client()
    assert sso_sign_in(client, provider, "ivy-sub").status_code == 302
    assert signed_in_as(client) == "ivy@elsewhere.test"
    member = Membership.objects.get(user__username="ivy@elsewhere.test")
    assert (member.organisation, member.role) == (people["globex"], "viewer")
    assert member.organisation.invitations.get().status == "accepted"
    # Spent: the next sign-in is let in by the membership, not the link.
    assert sso_sign_in(Client(), provider, "ivy-sub").status_code == 302
    assert Membership.objects.filter(user__username="ivy@elsewhere.test").count() == 1


def test_with_passwords_off_an_invitation_asks_for_the_provider(configure, provider, people):
    configure(password_login=False)
    link = _invite(people, "ivy@elsewhere.test")
    page = Client().get(link).content.decode()
    assert "Sign in with Acme ID" in page
    assert 'name="password1"' not in page
    assert Client().post(link, {"password1": "x", "password2": "x"}).status_code == 200
    assert not User.objects.filter(username="ivy@elsewhere.test").exists()


def test_a_rule_naming_a_missing_organisation_grants_nothing(configure, provider, people):
    configure(SWITCHYARD_OIDC_DOMAINS="acme.test=nowhere:admin")
    set_user(provider, "ann-sub", email="ann@acme.test", email_verified=True)
    answer = sso_sign_in(Client(), provider, "ann-sub")
    assert answer.status_code == 403
    assert "is not allowed into any organisation" in answer.content.decode()


def test_a_sign_in_refused_at_the_provider_says_so(configure, provider, people):
    client = Client()
    authorize = client.get("/console/oidc/start/")["Location"]
    denied = httpx.post(authorize, data={"action": "deny"})
    answer = client.get(path_of(denied.headers["location"]))
    assert answer.status_code == 403
    assert "Acme ID did not sign you in (access_denied)." in answer.content.decode()


def test_a_callback_without_a_started_sign_in_is_refused(configure, people):
    answer = Client().get("/console/oidc/callback/?code=forged&state=forged")
    assert answer.status_code == 403
    assert "Start again from the sign-in page" in answer.content.decode()


def test_a_callback_with_another_state_is_a_bad_request(configure, provider, people):
    set_user(provider, "ann-sub", email="ann@acme.test", email_verified=True)
    client = Client()
    authorize = client.get("/console/oidc/start/")["Location"]
    approved = httpx.post(authorize, data={"sub": "ann-sub"})
    code = approved.headers["location"].split("code=")[1].split("&")[0]
    forged = client.get(f"/console/oidc/callback/?code={code}&state=not-the-one")
    assert forged.status_code == 400
    assert signed_in_as(client) is None
    assert not User.objects.filter(username="ann@acme.test").exists()


def test_an_unreachable_provider_is_a_page_not_an_error(configure, settings, people):
    from tests.conftest import free_port

    configure(SWITCHYARD_OIDC_ISSUER=f"http://127.0.0.1:{free_port()}", SWITCHYARD_OIDC_TIMEOUT="2")
    answer = Client().get("/console/oidc/start/")
    assert answer.status_code == 502
    assert "Acme ID could not be reached" in answer.content.decode()
    # Password sign-in does not wait on the provider.
    signed_in = Client().post(
        LOGIN, {"username": "alice@example.com", "password": "alice-password-1"}
    )
    assert signed_in.status_code == 302


def test_password_login_turned_off_hides_the_form_and_refuses_passwords(configure, people):
    configure(password_login=False)
    page = Client().get(LOGIN).content.decode()
    assert "Sign in with Acme ID" in page
    assert 'name="password"' not in page
    client = Client()
    refused = client.post(LOGIN, {"username": "alice@example.com", "password": "alice-password-1"})
    assert refused.status_code == 403
    assert "Password sign-in is turned off here" in refused.content.decode()
    assert signed_in_as(client) is None
    # Nor does Django's admin take a password.
    assert not client.login(username="alice@example.com", password="alice-password-1")
