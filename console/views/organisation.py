"""Members and invitations, organisation settings, the audit log, and the
organisation switcher."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts.access import (
    audit_for_member,
    can,
    get_invitation_for_member,
    get_membership_for_member,
    invitations_for_member,
    members_for_member,
    memberships_of,
    organisation_for_member,
    require,
)
from accounts.audit import Actor
from accounts.models import Membership
from accounts.services.invitations import (
    invitation_accept,
    invitation_account,
    invitation_create,
    invitation_from_token,
    invitation_join,
    invitation_revoke,
)
from accounts.services.members import member_add, member_remove, member_role_set
from accounts.services.organisations import organisation_settings_update
from console.forms.common import errors_onto
from console.forms.organisation import (
    AcceptInvitationForm,
    InviteForm,
    MemberAddForm,
    OrganisationSettingsForm,
    RoleForm,
)
from console.spend import organisation_month
from console.views.base import SESSION_ORG, amounts_initial, page_of
from console.views.signin import invitation_sso_page
from responses_api.store.conversations import conversations_delete_all, conversations_summary
from responses_api.store.responses import responses_delete_all, responses_summary


def _invite_link(request: HttpRequest, token: str) -> str:
    return request.build_absolute_uri(reverse("console:invitation_accept", args=[token]))


def _text(error: ValidationError) -> str:
    return " ".join(error.messages)


def _members_context(membership: Membership, **extra: Any) -> dict[str, Any]:
    members = list(members_for_member(membership=membership))
    manageable = {
        member.pk
        for member in members
        if can(membership, "member_manage")
        and (member.role != "owner" or can(membership, "owner_manage"))
    }
    context = {
        "members": members,
        "manageable": manageable,
        "invitations": invitations_for_member(membership=membership).filter(
            accepted_at__isnull=True, revoked_at__isnull=True
        ),
        "add_form": MemberAddForm(prefix="add"),
        "invite_form": InviteForm(prefix="invite"),
        "role_choices": Membership.Role.choices,
        "may_grant_owner": can(membership, "owner_manage"),
    }
    context.update(extra)
    return context


def members_page(request: HttpRequest, membership) -> HttpResponse:
    return render(request, "console/members.html", _members_context(membership))


@require_POST
def member_add_page(request: HttpRequest, membership) -> HttpResponse:
    form = MemberAddForm(request.POST, prefix="add")
    if form.is_valid():
        try:
            member_add(
                organisation=membership.organisation,
                actor=Actor.console(membership.user),
                **form.cleaned_data,
            )
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            messages.success(request, f"{form.cleaned_data['email']} added.")
            return redirect("console:members")
    return render(
        request, "console/members.html", _members_context(membership, add_form=form), status=400
    )


@require_POST
def member_invite(request: HttpRequest, membership) -> HttpResponse:
    form = InviteForm(request.POST, prefix="invite")
    if form.is_valid():
        try:
            invitation, token = invitation_create(
                organisation=membership.organisation,
                actor=Actor.console(membership.user),
                **form.cleaned_data,
            )
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            link = _invite_link(request, token)
            org = membership.organisation
            send_mail(
                subject=f"You are invited to {org.name} on Switchyard",
                message=f"{request.user.get_username()} invited you to {org.name} as "
                f"{invitation.role}.\n\nOpen this link to join (valid for 7 days, once):\n"
                f"{link}\n\nIf you already have a Switchyard account for this address, "
                "sign in with it there; otherwise choose a password there.\n",
                from_email=None,
                recipient_list=[invitation.email],
                fail_silently=True,
            )
            return render(
                request,
                "console/members.html",
                _members_context(membership, invite_link=link, invited=invitation),
            )
    return render(
        request,
        "console/members.html",
        _members_context(membership, invite_form=form),
        status=400,
    )


@require_POST
def member_role(request: HttpRequest, membership, member_id) -> HttpResponse:
    target = get_membership_for_member(membership=membership, member_id=member_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Pick one of the roles.")
        return redirect("console:members")
    try:
        member_role_set(
            member=target, actor=Actor.console(membership.user), role=form.cleaned_data["role"]
        )
    except ValidationError as exc:
        messages.error(request, _text(exc))
    else:
        messages.success(request, f"{target.user.get_username()} is now {target.role}.")
    return redirect("console:members")


@require_POST
def member_delete(request: HttpRequest, membership, member_id) -> HttpResponse:
    target = get_membership_for_member(membership=membership, member_id=member_id)
    try:
        member_remove(member=target, actor=Actor.console(membership.user))
    except ValidationError as exc:
        messages.error(request, _text(exc))
        return redirect("console:members")
    messages.success(request, f"{target.user.get_username()} removed.")
    if target.pk == membership.pk:
        request.session.pop(SESSION_ORG, None)
        return redirect("console:dashboard")
    return redirect("console:members")


@require_POST
def invitation_cancel(request: HttpRequest, membership, invitation_id) -> HttpResponse:
    invitation = get_invitation_for_member(membership=membership, invitation_id=invitation_id)
    invitation_revoke(invitation=invitation, actor=Actor.console(membership.user))
    messages.success(request, f"The invitation to {invitation.email} is withdrawn.")
    return redirect("console:members")


@require_http_methods(["GET", "POST"])
def invitation_accept_page(request: HttpRequest, token: str) -> HttpResponse:
    invitation = invitation_from_token(token=token)
    if invitation is None:
        return render(request, "console/invitation_invalid.html", status=404)
    account = invitation_account(invitation=invitation)
    if account is not None:
        return _invitation_join_page(request, invitation, account)
    if not settings.SWITCHYARD_PASSWORD_LOGIN:
        return invitation_sso_page(request, invitation)
    form = AcceptInvitationForm(request.POST or None, email=invitation.email)
    if request.method == "POST" and form.is_valid():
        try:
            user = invitation_accept(invitation=invitation, password=form.cleaned_data["password1"])
        except ValidationError as exc:
            form.add_error(None, exc.messages)
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            request.session[SESSION_ORG] = invitation.organisation_id
            messages.success(request, f"Welcome to {invitation.organisation.name}.")
            return redirect("console:dashboard")
    return render(
        request, "console/invitation_accept.html", {"form": form, "invitation": invitation}
    )


def _invitation_join_page(request: HttpRequest, invitation, account) -> HttpResponse:
    """The invited address has an account: its owner signs in, then joins."""
    signed_in = request.user.is_authenticated and request.user.pk == account.pk
    if request.method == "POST" and signed_in:
        try:
            invitation_join(invitation=invitation, user=account)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            request.session[SESSION_ORG] = invitation.organisation_id
            messages.success(request, f"Welcome to {invitation.organisation.name}.")
            return redirect("console:dashboard")
    return render(
        request,
        "console/invitation_join.html",
        {"invitation": invitation, "signed_in": signed_in, "here": request.get_full_path()},
    )


@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest, membership) -> HttpResponse:
    manage = can(membership, "settings_manage")
    organisation = organisation_for_member(membership=membership)
    if request.method == "POST":
        require(membership, "settings_manage")
    form = OrganisationSettingsForm(
        request.POST or None,
        instance=organisation,
        initial=amounts_initial(organisation, ("monthly_budget",)),
    )
    if not manage:
        for field in form.fields.values():
            field.disabled = True
    stored, size = responses_summary(organisation_id=organisation.pk)
    conversations, conversation_items = conversations_summary(organisation_id=organisation.pk)
    context = {
        "form": form,
        "manage": manage,
        "stored": stored,
        "stored_size": size,
        "conversations": conversations,
        "conversation_items": conversation_items,
        "month": organisation_month(organisation),
        "warning": organisation.budget_warning_percent,
    }
    before = organisation.retention_policy
    if request.method == "POST" and form.is_valid():
        data = form.service_data()
        # Turning the policy to "none" deletes what is stored: asked once more.
        if (
            before != "none"
            and data["retention_policy"] == "none"
            and (stored or conversations)
            and request.POST.get("confirm_delete") != "yes"
        ):
            return render(request, "console/settings.html", {**context, "confirm_none": True})
        try:
            organisation_settings_update(
                organisation=organisation, actor=Actor.console(membership.user), data=data
            )
        except ValidationError as exc:
            errors_onto(form, exc)
        else:
            messages.success(request, "Settings saved.")
            return redirect("console:settings")
    return render(request, "console/settings.html", context)


@require_http_methods(["GET", "POST"])
def stored_delete_page(request: HttpRequest, membership) -> HttpResponse:
    """Delete everything the organisation has stored (its responses and its
    conversations, as the settings page lists them), after a confirmation."""
    organisation = organisation_for_member(membership=membership)
    if request.method == "POST":
        actor = Actor.console(membership.user)
        deleted = responses_delete_all(organisation=organisation, actor=actor)
        gone = conversations_delete_all(organisation=organisation, actor=actor)
        messages.success(
            request,
            f"{deleted} stored response{pluralize(deleted)} and "
            f"{gone} conversation{pluralize(gone)} deleted.",
        )
        return redirect("console:settings")
    stored, size = responses_summary(organisation_id=organisation.pk)
    conversations, items = conversations_summary(organisation_id=organisation.pk)
    return render(
        request,
        "console/stored_delete.html",
        {
            "stored": stored,
            "stored_size": size,
            "conversations": conversations,
            "conversation_items": items,
        },
    )


def audit_page(request: HttpRequest, membership) -> HttpResponse:
    entries = audit_for_member(membership=membership).select_related("actor")
    return render(request, "console/audit.html", {"page": page_of(request, entries)})


@require_POST
def organisation_switch(request: HttpRequest) -> HttpResponse:
    chosen = request.POST.get("membership", "")
    membership = next((m for m in memberships_of(request.user) if str(m.public_id) == chosen), None)
    if membership is None:
        raise Http404("Not found.")
    request.session[SESSION_ORG] = membership.organisation_id
    messages.success(request, f"Now working in {membership.organisation.name}.")
    return redirect("console:dashboard")
