"""SCIM's messages (RFC 7643, RFC 7644): the error body, ``ListResponse``,
the filters providers send, and the ``User`` and ``Group`` resources, both
read from a request and written into a response."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from accounts.models import ScimGroup, ScimUser
from accounts.services.scim_users import ScimProfile

MEDIA_TYPE = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
ENTERPRISE_USER = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
LIST_RESPONSE = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"

# RFC 7644, 3.4.2.4: the page size when the client names none, and the most
# one page holds (ServiceProviderConfig says so too).
DEFAULT_COUNT = 100
MAX_COUNT = 200
MAX_START = 2**31 - 1


class ScimError(Exception):
    """An answer in SCIM's error body (RFC 7644, 3.12); ``scim_type`` only
    for the 400s and 409s that have one."""

    def __init__(self, status: int, detail: str, scim_type: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.scim_type = scim_type

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schemas": [ERROR], "status": str(self.status)}
        if self.scim_type:
            body["scimType"] = self.scim_type
        body["detail"] = self.detail
        return body


def invalid(detail: str, scim_type: str = "invalidValue") -> ScimError:
    return ScimError(400, detail, scim_type)


# --- Filters (RFC 7644, 3.4.2.2): the ``attribute eq "value"`` providers use --

_FILTER = re.compile(r'^\s*([A-Za-z][\w.:$-]*)\s+(eq)\s+"((?:[^"\\]|\\.)*)"\s*$', re.IGNORECASE)


def filter_parse(text: str | None, *, attributes: Mapping[str, str]) -> tuple[str, str] | None:
    """``(field, value)`` of a filter on one of ``attributes`` (SCIM name in
    lower case -> the field it filters), None without a filter; anything
    else, other operators and ``and``/``or`` included, is ``invalidFilter``."""
    if text is None or not text.strip():
        return None
    found = _FILTER.match(text)
    if not found:
        raise invalid(
            f'Unsupported filter {text[:200]!r}: use attribute eq "value".', "invalidFilter"
        )
    attribute = found.group(1).lower().removeprefix(USER.lower() + ":")
    attribute = attribute.removeprefix(GROUP.lower() + ":")
    if attribute not in attributes:
        raise invalid(
            f"Cannot filter on {found.group(1)[:100]!r}: only on {', '.join(attributes)}.",
            "invalidFilter",
        )
    try:
        value = json.loads(f'"{found.group(3)}"')
    except ValueError:
        raise invalid("The filter's value is not a valid string.", "invalidFilter") from None
    if "\x00" in value:
        raise invalid("The filter's value must not contain NUL characters.", "invalidFilter")
    return attributes[attribute], value


def page_parse(query: Mapping[str, str]) -> tuple[int, int]:
    """``startIndex`` (1-based; below 1 means 1) and ``count`` (0 to
    :data:`MAX_COUNT`), RFC 7644, 3.4.2.4."""
    values = []
    for name, default in (("startIndex", 1), ("count", DEFAULT_COUNT)):
        raw = query.get(name)
        try:
            values.append(int(raw) if raw not in (None, "") else default)
        except ValueError:
            raise invalid(f"{name} must be an integer.") from None
    start, count = values
    # Past any table's size, and within every database's integers.
    return min(max(start, 1), MAX_START), min(max(count, 0), MAX_COUNT)


def list_response(resources: list[dict[str, Any]], *, total: int, start: int) -> dict[str, Any]:
    return {
        "schemas": [LIST_RESPONSE],
        "totalResults": total,
        "startIndex": start,
        "itemsPerPage": len(resources),
        "Resources": resources,
    }


# --- Reading resources --------------------------------------------------------


def text_of(value: object, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string.")
    if "\x00" in value:
        # No database column takes it (PostgreSQL refuses it outright).
        raise invalid(f"{name} must not contain NUL characters.")
    return value


def bool_of(value: object, name: str) -> bool:
    """A boolean; Entra ID sends ``active`` as the strings "True"/"False"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise invalid(f"{name} must be a boolean.")


def email_of(emails: object) -> str:
    """The primary address of SCIM's ``emails``, else the first; "" if none."""
    if emails is None:
        return ""
    if not isinstance(emails, list) or not all(isinstance(e, dict) for e in emails):
        raise invalid("emails must be a list of objects with a value.")
    chosen = next((e for e in emails if e.get("primary") in (True, "true", "True")), None)
    chosen = chosen or (emails[0] if emails else {})
    return text_of(chosen.get("value"), "emails.value")


def name_of(name: object) -> tuple[str, str]:
    if name is None:
        return "", ""
    if not isinstance(name, dict):
        raise invalid("name must be an object.")
    return text_of(name.get("givenName"), "name.givenName"), text_of(
        name.get("familyName"), "name.familyName"
    )


def _lowered(body: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute names compare without case (RFC 7643, 2.1)."""
    return {str(key).lower(): value for key, value in body.items()}


def user_parse(body: object) -> ScimProfile:
    """A ``User`` of POST or PUT. Attributes Switchyard does not keep
    (``password``, ``locale``, the enterprise extension…) are ignored; the
    account's e-mail address is the primary one, else (on creation)
    ``userName``: some providers send no ``emails``."""
    if not isinstance(body, dict):
        raise invalid("The body must be a SCIM User object.", "invalidSyntax")
    data = _lowered(body)
    user_name = text_of(data.get("username"), "userName")
    if not user_name.strip():
        raise invalid("userName is required.")
    given, family = name_of(data.get("name"))
    return ScimProfile(
        user_name=user_name,
        email=email_of(data.get("emails")),
        external_id=text_of(data.get("externalid"), "externalId"),
        given_name=given,
        family_name=family,
        display_name=text_of(data.get("displayname"), "displayName"),
        active=bool_of(data.get("active", True), "active"),
    )


def member_ids(value: object) -> list[str]:
    """The ids of SCIM's ``members``: ``[{"value": id, "display": …}]``."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(m, dict) and isinstance(m.get("value"), str) for m in value
    ):
        raise invalid('members must be a list of {"value": user id} objects.')
    return [m["value"] for m in value]


def group_parse(body: object) -> tuple[str, str, list[str]]:
    """``displayName``, ``externalId`` and member ids of a ``Group``."""
    if not isinstance(body, dict):
        raise invalid("The body must be a SCIM Group object.", "invalidSyntax")
    data = _lowered(body)
    return (
        text_of(data.get("displayname"), "displayName"),
        text_of(data.get("externalid"), "externalId"),
        member_ids(data.get("members")),
    )


# --- Writing resources --------------------------------------------------------


def _meta(kind: str, record: ScimUser | ScimGroup, base: str) -> dict[str, Any]:
    return {
        "resourceType": kind,
        "created": record.created_at.isoformat(),
        "lastModified": record.updated_at.isoformat(),
        "location": f"{base}/{kind}s/{record.id}",
    }


def user_resource(scim_user: ScimUser, *, base: str) -> dict[str, Any]:
    user = scim_user.user
    given, family = scim_user.given_name, scim_user.family_name
    resource: dict[str, Any] = {
        "schemas": [USER],
        "id": str(scim_user.id),
        "userName": scim_user.user_name,
        "name": {
            "givenName": given,
            "familyName": family,
            "formatted": " ".join(part for part in (given, family) if part),
        },
        "displayName": scim_user.display_name or " ".join(p for p in (given, family) if p),
        "emails": [{"value": user.email or user.get_username(), "type": "work", "primary": True}],
        "active": scim_user.active,
        "groups": [
            {
                "value": str(group.id),
                "display": group.display_name,
                "$ref": f"{base}/Groups/{group.id}",
            }
            for group in scim_user.groups.all()
        ],
        "meta": _meta("User", scim_user, base),
    }
    if scim_user.external_id:
        resource["externalId"] = scim_user.external_id
    return resource


def group_resource(group: ScimGroup, *, base: str, members: bool = True) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "schemas": [GROUP],
        "id": str(group.id),
        "displayName": group.display_name,
    }
    if group.external_id:
        resource["externalId"] = group.external_id
    if members:
        resource["members"] = [
            {"value": str(user.id), "display": user.user_name, "$ref": f"{base}/Users/{user.id}"}
            for user in group.members.all()
        ]
    resource["meta"] = _meta("Group", group, base)
    return resource


def user_replacement(profile: ScimProfile) -> dict[str, Any]:
    """A PUT's changes: everything, but the address only if one was sent."""
    changes = asdict(profile)
    if not profile.email:
        del changes["email"]
    return changes
