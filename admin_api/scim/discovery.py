"""SCIM's discovery documents (RFC 7644, 4; RFC 7643, 5-7): what this
service provider supports, its two resource types, and their schemas, the
attributes it keeps (others are accepted and ignored, ``patch``)."""

from __future__ import annotations

from typing import Any

from admin_api.scim.protocol import ENTERPRISE_USER, GROUP, MAX_COUNT, USER

SERVICE_PROVIDER_CONFIG = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"
RESOURCE_TYPE = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Schema"


def service_provider_config(base: str) -> dict[str, Any]:
    return {
        "schemas": [SERVICE_PROVIDER_CONFIG],
        "patch": {"supported": True},
        "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": True, "maxResults": MAX_COUNT},
        "changePassword": {"supported": False},
        "sort": {"supported": False},
        "etag": {"supported": False},
        "authenticationSchemes": [
            {
                "type": "oauthbearertoken",
                "name": "Admin API key",
                "description": "Authorization: Bearer sy_admin_…, a key with the scim scope.",
                "primary": True,
            }
        ],
        "meta": {
            "resourceType": "ServiceProviderConfig",
            "location": f"{base}/ServiceProviderConfig",
        },
    }


def resource_types(base: str) -> list[dict[str, Any]]:
    return [
        {
            "schemas": [RESOURCE_TYPE],
            "id": "User",
            "name": "User",
            "endpoint": "/Users",
            "schema": USER,
            "schemaExtensions": [{"schema": ENTERPRISE_USER, "required": False}],
            "meta": {"resourceType": "ResourceType", "location": f"{base}/ResourceTypes/User"},
        },
        {
            "schemas": [RESOURCE_TYPE],
            "id": "Group",
            "name": "Group",
            "endpoint": "/Groups",
            "schema": GROUP,
            "meta": {"resourceType": "ResourceType", "location": f"{base}/ResourceTypes/Group"},
        },
    ]


def _attribute(name: str, kind: str = "string", **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "multiValued": False,
        "required": False,
        "caseExact": False,
        "mutability": "readWrite",
        "returned": "default",
        "uniqueness": "none",
        **more,
    }


def _sub(*names: str) -> list[dict[str, Any]]:
    return [_attribute(name) for name in names]


def schemas(base: str) -> list[dict[str, Any]]:
    user = [
        _attribute("userName", required=True, uniqueness="server"),
        _attribute("name", "complex", subAttributes=_sub("givenName", "familyName", "formatted")),
        _attribute("displayName"),
        _attribute("externalId", caseExact=True),
        _attribute("active", "boolean"),
        _attribute(
            "emails",
            "complex",
            multiValued=True,
            subAttributes=[*_sub("value", "type"), _attribute("primary", "boolean")],
        ),
        _attribute(
            "groups",
            "complex",
            multiValued=True,
            mutability="readOnly",
            subAttributes=_sub("value", "display", "$ref"),
        ),
    ]
    group = [
        _attribute("displayName", required=True, uniqueness="server"),
        _attribute("externalId", caseExact=True),
        _attribute(
            "members", "complex", multiValued=True, subAttributes=_sub("value", "display", "$ref")
        ),
    ]
    return [
        _schema(USER, "User", user, base),
        _schema(GROUP, "Group", group, base),
    ]


def _schema(urn: str, name: str, attributes: list[dict[str, Any]], base: str) -> dict[str, Any]:
    return {
        "schemas": [SCHEMA],
        "id": urn,
        "name": name,
        "attributes": attributes,
        "meta": {"resourceType": "Schema", "location": f"{base}/Schemas/{urn}"},
    }
