"""Members and invitations: add, invite with a one-time link, change roles,
remove; an organisation always keeps an owner; only owners manage owners."""

import re
from urllib.parse import urlparse

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse

from accounts.models import AuditEntry, Invitation, Membership

pytestmark = pytest.mark.django_db


def _membership(user, org):
    return Membership.objects.get(user=user, organisation=org)


def test_an_admin_adds_an_existing_user(as_user, crew):
    client = as_user("erin")
    response = client.post(
        reverse("console:member_add"), {"add-email": "CHARLIE@example.com", "add-role": "developer"}
    )
    assert response.status_code == 302
    assert _membership(crew["charlie"], crew["acme"]).role == "developer"
    assert AuditEntry.objects.filter(
        action="member.add", target="charlie@example.com", organisation=crew["acme"]
    ).exists()


def test_adding_an_unknown_person_suggests_an_invitation(as_user, crew):
    response = as_user("erin").post(
        reverse("console:member_add"), {"add-email": "nobody@example.com", "add-role": "viewer"}
    )
    assert response.status_code == 400
    assert "Send an invitation instead" in response.content.decode()


def test_an_invitation_link_works_once(as_user, crew):
    response = as_user("alice").post(
        reverse("console:member_invite"),
        {"invite-email": "New@Example.com", "invite-role": "developer"},
    )
    assert response.status_code == 200
    link = response.context["invite_link"]
    assert link in response.content.decode()
    assert len(mail.outbox) == 1 and link in mail.outbox[0].body
    path = re.sub(r"^https?://[^/]+", "", link)

    guest = Client()
    page = guest.get(path)
    assert page.status_code == 200 and "new@example.com" in page.content.decode()
    weak = guest.post(path, {"password1": "short", "password2": "short"})
    assert weak.status_code == 200 and weak.context["form"].errors["password1"]
    joined = guest.post(
        path, {"password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9"}
    )
    assert joined.status_code == 302
    user = User.objects.get(username="new@example.com")
    assert user.check_password("a-long-pass-phrase-9")
    assert _membership(user, crew["acme"]).role == "developer"
    assert guest.get(reverse("console:dashboard")).status_code == 200

    again = Client().post(
        path, {"password1": "another-pass-phrase-9", "password2": "another-pass-phrase-9"}
    )
    assert again.status_code == 404
    user.refresh_from_db()
    assert user.check_password("a-long-pass-phrase-9")


def test_a_tampered_or_withdrawn_invitation_is_refused(as_user, crew):
    client = as_user("alice")
    response = client.post(
        reverse("console:member_invite"), {"invite-email": "x@example.com", "invite-role": "viewer"}
    )
    path = re.sub(r"^https?://[^/]+", "", response.context["invite_link"])
    assert Client().get(path[:-3] + "abc/").status_code == 404
    invitation = Invitation.objects.get(email="x@example.com")
    client.post(reverse("console:invitation_withdraw", args=[invitation.id]))
    assert Client().get(path).status_code == 404


def test_an_invitation_does_not_reveal_whether_the_address_has_an_account(as_user, crew):
    """Charlie has an account (in Globex); nobody@ has none: Alice sees the same page."""
    pages = {}
    for email in ("charlie@example.com", "nobody@example.com"):
        response = as_user("alice").post(
            reverse("console:member_invite"),
            {"invite-email": email, "invite-role": "viewer"},
        )
        assert response.status_code == 200
        text = response.content.decode().replace(email, "EMAIL")
        text = re.sub(r"/console/invitation/[^/\"<]+/", "/console/invitation/LINK/", text)
        text = re.sub(r"csrfmiddlewaretoken\" value=\"[^\"]+|X-CSRFToken\": \"[^\"]+", "CSRF", text)
        text = re.sub(r"\d{2} \w{3} \d{4} \d{2}:\d{2}", "WHEN", text)
        text = re.sub(r"(?s)<tbody>.*?</tbody>", "", text)
        pages[email] = text
    assert pages["charlie@example.com"] == pages["nobody@example.com"]
    bodies = [m.body for m in mail.outbox]
    assert len(bodies) == 2
    assert all("If you already have a Switchyard account" in body for body in bodies)
    assert all("choose a password" in body for body in bodies)


def test_someone_with_an_account_joins_by_signing_in(as_user, crew):
    response = as_user("alice").post(
        reverse("console:member_invite"),
        {"invite-email": "charlie@example.com", "invite-role": "viewer"},
    )
    path = urlparse(response.context["invite_link"]).path
    anonymous = Client().get(path).content.decode()
    assert "You already have an account" in anonymous and "password1" not in anonymous
    charlie = as_user("charlie")
    assert "Join" in charlie.get(path).content.decode()
    assert charlie.post(path).status_code == 302
    membership = Membership.objects.get(user=crew["charlie"], organisation=crew["acme"])
    assert membership.role == "viewer"
    assert Client().get(path).status_code == 404


def test_roles_change_and_members_are_removed(as_user, crew):
    client = as_user("erin")
    bob = _membership(crew["bob"], crew["acme"])
    assert (
        client.post(
            reverse("console:member_role", args=[bob.public_id]), {"role": "viewer"}
        ).status_code
        == 302
    )
    bob.refresh_from_db()
    assert bob.role == "viewer"
    client.post(reverse("console:member_remove", args=[bob.public_id]))
    assert not Membership.objects.filter(pk=bob.pk).exists()
    actions = list(AuditEntry.objects.values_list("action", flat=True))
    assert "member.role" in actions and "member.remove" in actions


def test_only_owners_manage_owners(as_user, crew):
    client = as_user("erin")
    alice = _membership(crew["alice"], crew["acme"])
    bob = _membership(crew["bob"], crew["acme"])
    assert (
        client.post(
            reverse("console:member_role", args=[alice.public_id]), {"role": "viewer"}
        ).status_code
        == 403
    )
    assert client.post(reverse("console:member_remove", args=[alice.public_id])).status_code == 403
    assert (
        client.post(
            reverse("console:member_role", args=[bob.public_id]), {"role": "owner"}
        ).status_code
        == 403
    )
    assert (
        client.post(
            reverse("console:member_invite"),
            {"invite-email": "o@example.com", "invite-role": "owner"},
        ).status_code
        == 403
    )
    alice.refresh_from_db()
    bob.refresh_from_db()
    assert (alice.role, bob.role) == ("owner", "developer")


def test_an_organisation_always_keeps_an_owner(as_user, crew):
    client = as_user("alice")
    alice = _membership(crew["alice"], crew["acme"])
    client.post(reverse("console:member_role", args=[alice.public_id]), {"role": "admin"})
    alice.refresh_from_db()
    assert alice.role == "owner"
    response = client.post(reverse("console:member_remove", args=[alice.public_id]), follow=True)
    assert "always keeps an owner" in response.content.decode()
    assert Membership.objects.filter(pk=alice.pk).exists()
    bob = _membership(crew["bob"], crew["acme"])
    client.post(reverse("console:member_role", args=[bob.public_id]), {"role": "owner"})
    client.post(reverse("console:member_role", args=[alice.public_id]), {"role": "admin"})
    alice.refresh_from_db()
    assert alice.role == "admin"


def test_the_organisation_switcher_changes_the_current_organisation(crew, estates):
    from accounts.services.members import member_ensure

    member_ensure(organisation=crew["globex"], email="alice@example.com", role="viewer")
    client = Client()
    client.force_login(crew["alice"])
    page = client.get(reverse("console:keys")).content.decode()
    assert "acme key" in page and "Organisation" in page
    globex = _membership(crew["alice"], crew["globex"])
    client.post(reverse("console:switch"), {"membership": globex.public_id})
    page = client.get(reverse("console:keys")).content.decode()
    assert "globex key" in page and "acme key" not in page
    assert client.get(reverse("console:key_create")).status_code == 403
    assert (
        client.get(reverse("console:trace", args=[estates["globex"].row.request_id])).status_code
        == 200
    )
    assert (
        client.get(reverse("console:trace", args=[estates["acme"].row.request_id])).status_code
        == 404
    )
