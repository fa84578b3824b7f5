"""SCIM PATCH (RFC 7644, 3.5.2) as Okta and Entra ID send it, turned into
the changes the services take.

Both send ``{"schemas": [PatchOp], "Operations": [...]}``; they differ in
the details, all accepted here:

- ``op`` in any case ("replace", Entra's "Replace");
- a ``path`` (``active``, ``name.givenName``, ``emails[type eq "work"].value``,
  ``members[value eq "…"]``), or none, the ``value`` then an object whose
  keys are paths (Okta's ``{"active": false}``, Entra's path-less form);
- Entra's booleans as strings, ``"False"``.

Attributes of the SCIM schemas that Switchyard does not keep (titles, phone
numbers, the enterprise extension) are accepted and ignored, so that a
provider's default attribute mapping works; any other path is refused with
``invalidPath``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from admin_api.scim.protocol import (
    ENTERPRISE_USER,
    GROUP,
    USER,
    bool_of,
    email_of,
    invalid,
    member_ids,
    name_of,
    text_of,
)

OPS = ("add", "replace", "remove")

# The core User attributes (RFC 7643, 4.1) not kept here: accepted, ignored.
IGNORED_USER_ATTRIBUTES = frozenset(
    {
        "nickname",
        "profileurl",
        "title",
        "usertype",
        "preferredlanguage",
        "locale",
        "timezone",
        "password",
        "phonenumbers",
        "ims",
        "photos",
        "addresses",
        "entitlements",
        "roles",
        "x509certificates",
        "name.formatted",
        "name.middlename",
        "name.honorificprefix",
        "name.honorificsuffix",
    }
)

# ``emails[type eq "work"].value`` and the like: one address of the list.
_EMAIL_VALUE = re.compile(r'^emails(\[type eq "[^"]*"\])?\.value$', re.IGNORECASE)
_MEMBER_VALUE = re.compile(r'^members\[value eq "([^"]*)"\]$', re.IGNORECASE)


def operations(body: object) -> Iterator[tuple[str, str | None, Any]]:
    """Each ``(op, path, value)`` of a PatchOp body, op in lower case."""
    if not isinstance(body, dict):
        raise invalid("The body must be a SCIM PatchOp object.", "invalidSyntax")
    ops = {str(k).lower(): v for k, v in body.items()}.get("operations")
    if not isinstance(ops, list) or not ops:
        raise invalid("A PatchOp needs a non-empty Operations list.", "invalidSyntax")
    for operation in ops:
        if not isinstance(operation, dict):
            raise invalid("Each operation must be an object.", "invalidSyntax")
        lowered = {str(k).lower(): v for k, v in operation.items()}
        op = lowered.get("op")
        if not isinstance(op, str) or op.lower() not in OPS:
            raise invalid(f"op must be one of {', '.join(OPS)}.", "invalidSyntax")
        path = lowered.get("path")
        if path is not None and (not isinstance(path, str) or not path.strip()):
            raise invalid("path must be a non-empty string.", "invalidPath")
        yield op.lower(), path.strip() if path else None, lowered.get("value")


def _spread(op: str, path: str | None, value: Any) -> Iterator[tuple[str, Any]]:
    """A path-less operation as one ``(path, value)`` per key of its value."""
    if path is not None:
        yield path, value
        return
    if op == "remove" or not isinstance(value, dict):
        raise invalid(f"A path-less {op} needs an object as its value.", "noTarget")
    yield from value.items()


def _bare(path: str, schema: str) -> str:
    """The path without its schema's URN, in lower case."""
    lowered = path.lower()
    prefix = schema.lower() + ":"
    return lowered[len(prefix) :] if lowered.startswith(prefix) else lowered


def user_changes(body: object) -> dict[str, Any]:
    """The ``scim_user_update`` changes a PATCH of a ``User`` asks for."""
    changes: dict[str, Any] = {}
    for op, path, value in operations(body):
        for target, item in _spread(op, path, value):
            _user_change(changes, op, str(target), item)
    return changes


def _user_change(changes: dict[str, Any], op: str, path: str, value: Any) -> None:
    if path.lower().startswith(ENTERPRISE_USER.lower()):
        return
    name = _bare(path, USER)
    removing = op == "remove"
    # ``phoneNumbers[type eq "work"].value``: ignored with phoneNumbers.
    if name in IGNORED_USER_ATTRIBUTES or re.split(r"[\[.]", name)[0] in IGNORED_USER_ATTRIBUTES:
        return
    if name == "active":
        if removing:
            raise invalid("active cannot be removed.", "mutability")
        changes["active"] = bool_of(value, "active")
    elif name == "username":
        if removing:
            raise invalid("userName cannot be removed.", "mutability")
        changes["user_name"] = text_of(value, "userName")
    elif name in ("externalid", "displayname"):
        key = "external_id" if name == "externalid" else "display_name"
        changes[key] = "" if removing else text_of(value, path)
    elif name in ("name.givenname", "name.familyname"):
        key = "given_name" if name == "name.givenname" else "family_name"
        changes[key] = "" if removing else text_of(value, path)
    elif name == "name":
        given, family = ("", "") if removing else name_of(value)
        changes["given_name"], changes["family_name"] = given, family
    elif name == "emails" or _EMAIL_VALUE.match(name):
        if removing:
            raise invalid("The e-mail address cannot be removed.", "mutability")
        email = email_of(value) if name == "emails" else text_of(value, path)
        if email:
            changes["email"] = email
    else:
        raise invalid(f"Unknown attribute path {path[:200]!r}.", "invalidPath")


@dataclass
class GroupChanges:
    """What a PATCH of a ``Group`` asks: ``scim_group_update``'s arguments."""

    display_name: str | None = None
    external_id: str | None = None
    add: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    replace: list[str] | None = None


def group_changes(body: object) -> GroupChanges:
    changes = GroupChanges()
    for op, path, value in operations(body):
        if op == "remove" and path is not None:
            _group_remove(changes, path, value)
            continue
        for target, item in _spread(op, path, value):
            _group_set(changes, op, str(target), item)
    return changes


def _group_remove(changes: GroupChanges, path: str, value: Any) -> None:
    one = _MEMBER_VALUE.match(path)
    name = _bare(path, GROUP)
    if one:
        _members_remove(changes, [one.group(1)])
    elif name == "members" and value is None:
        changes.replace, changes.add = [], []
    elif name == "members":
        _members_remove(changes, member_ids(value))
    elif name == "externalid":
        changes.external_id = ""
    else:
        raise invalid(f"Cannot remove {path[:200]!r}.", "invalidPath")


def _members_remove(changes: GroupChanges, ids: list[str]) -> None:
    """Operations apply in order: a later remove undoes an earlier add."""
    changes.remove.extend(ids)
    changes.add = [a for a in changes.add if a not in ids]


def _group_set(changes: GroupChanges, op: str, path: str, value: Any) -> None:
    name = _bare(path, GROUP)
    if name == "members":
        if op == "replace":
            changes.replace, changes.add = member_ids(value), []
        else:
            added = member_ids(value)
            changes.add.extend(added)
            changes.remove = [r for r in changes.remove if r not in added]
    elif name == "displayname":
        changes.display_name = text_of(value, "displayName")
    elif name == "externalid":
        changes.external_id = text_of(value, "externalId")
    elif name in ("id", "schemas", "meta"):
        # Okta's path-less replace repeats the group's id: nothing to change.
        return
    else:
        raise invalid(f"Unknown attribute path {path[:200]!r}.", "invalidPath")
