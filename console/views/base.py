"""What every console view shares: the signed-in member and their
organisation, resolved once per request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import wraps
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import redirect, render

from accounts.access import capabilities, is_support, memberships_of, require
from accounts.models import Membership
from responses_api.usage.spend import money

SESSION_ORG = "console_organisation_id"


@dataclass
class Console:
    """Request-scoped: ``request.console`` in views and templates."""

    membership: Membership | None
    memberships: list[Membership]
    support: bool
    can: dict[str, bool] = field(default_factory=dict)

    @property
    def organisation(self):
        return self.membership.organisation if self.membership else None


def console_for(request: HttpRequest) -> Console:
    memberships = list(memberships_of(request.user))
    chosen = request.session.get(SESSION_ORG)
    membership = next((m for m in memberships if m.organisation_id == chosen), None)
    if membership is None and memberships:
        membership = memberships[0]
        request.session[SESSION_ORG] = membership.organisation_id
    return Console(
        membership=membership,
        memberships=memberships,
        support=is_support(request.user),
        can=capabilities(membership) if membership else {},
    )


class ConsoleRequest(HttpRequest):
    """For type checkers: a request the console decorators have seen."""

    console: Console


ViewFn = Callable[..., HttpResponseBase]


def member_view(capability: str = "view") -> Callable[[ViewFn], ViewFn]:
    """Signed in, a member of the current organisation, and allowed ``capability``.

    The view is called as ``view(request, membership, ...)``."""

    def decorator(view: ViewFn) -> ViewFn:
        @login_required
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            console = cast(ConsoleRequest, request).console = console_for(request)
            if console.membership is None:
                if console.support:
                    return redirect("console:support")
                return render(request, "console/no_organisation.html", status=403)
            require(console.membership, capability)
            return view(request, console.membership, *args, **kwargs)

        return wrapper

    return decorator


def signed_in_view(view: ViewFn) -> ViewFn:
    """Signed in; the organisation is optional (support pages, password)."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        cast(ConsoleRequest, request).console = console_for(request)
        return view(request, *args, **kwargs)

    return wrapper


def page_of(request: HttpRequest, queryset, per_page: int = 50) -> Page:
    return Paginator(queryset, per_page).get_page(request.GET.get("page"))


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def query_without_page(request: HttpRequest) -> str:
    params = request.GET.copy()
    for position in ("page", "before", "after"):
        params.pop(position, None)
    return params.urlencode()


def amounts_initial(instance: Any, fields: tuple[str, ...]) -> dict[str, Decimal]:
    """A form's initial amounts as people type them: the columns keep six
    decimal places, and a budget of 50 should read ``50.00``, not
    ``50.000000``."""
    return {
        name: Decimal(money(value))
        for name in fields
        if (value := getattr(instance, name, None)) is not None
    }
