"""Which organisations, with which role, a single sign-on identity joins.

Rules come from the environment (``SWITCHYARD_OIDC_DOMAINS`` and
``SWITCHYARD_OIDC_GROUPS``, docs/admin/sso.md): comma-separated entries
``KEY=ORGANISATION:ROLE``, the key being an e-mail domain or a value of the
groups claim. ``config/settings.py`` parses them when it loads, so a typo
stops the process at start-up instead of refusing people at sign-in; hence
this module uses no model and no setting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from django.core.exceptions import ImproperlyConfigured

# The roles of accounts.models.Membership, lowest first; a test keeps the two
# in step (settings load before the models may be imported).
ROLES = ("viewer", "developer", "admin", "owner")


class Rule(NamedTuple):
    key: str
    organisation: str
    role: str


def rules_parse(text: str, *, variable: str, lowercase_keys: bool = False) -> tuple[Rule, ...]:
    """The rules of ``text``, or ImproperlyConfigured naming ``variable`` and
    the entry at fault. E-mail domains compare without case, group names
    exactly as the provider sends them."""
    rules = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        key, equals, grant = entry.rpartition("=")
        organisation, colon, role = grant.partition(":")
        key, organisation, role = key.strip(), organisation.strip(), role.strip().lower()
        if not (equals and colon and key and organisation) or role not in ROLES:
            raise ImproperlyConfigured(
                f"{variable}: {entry!r} is not KEY=ORGANISATION:ROLE with a role among "
                f"{', '.join(ROLES)}."
            )
        rules.append(Rule(key.lower() if lowercase_keys else key, organisation, role))
    return tuple(rules)


def email_domain(email: str) -> str:
    return email.rpartition("@")[2].strip().lower()


def claim_values(value: object) -> set[str]:
    """A claim holding names: a list of them, or one name (some providers
    send a lone group as a string)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, list | tuple):
        return {item for item in value if isinstance(item, str)}
    return set()


def grants_for(
    *,
    email: str,
    groups: Iterable[str],
    domain_rules: Iterable[Rule],
    group_rules: Iterable[Rule],
) -> dict[str, str]:
    """Organisation slug -> role for one identity: every rule its e-mail
    domain or one of its groups matches; where several name the same
    organisation, the highest role."""
    domain = email_domain(email)
    names = set(groups)
    matched = [r for r in domain_rules if r.key == domain]
    matched += [r for r in group_rules if r.key in names]
    grants: dict[str, str] = {}
    for rule in matched:
        held = grants.get(rule.organisation)
        if held is None or ROLES.index(rule.role) > ROLES.index(held):
            grants[rule.organisation] = rule.role
    return grants


@dataclass(frozen=True, slots=True)
class SsoConfig:
    """Single sign-on as configured (``settings.SWITCHYARD_SSO``; None when
    it is off). An endpoint left empty is read from the issuer's discovery
    document when first needed."""

    issuer: str
    client_id: str
    # Out of the repr: settings are listed on DEBUG error pages.
    client_secret: str = field(repr=False)
    scopes: str
    sign_algo: str
    provider_name: str
    endpoints: dict[str, str]
    domain_rules: tuple[Rule, ...]
    group_rules: tuple[Rule, ...]
    groups_claim: str
    create_users: bool
    require_verified_email: bool
    timeout: float
