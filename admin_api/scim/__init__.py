"""SCIM 2.0 provisioning (RFC 7643, RFC 7644) at ``/scim/v2/``: users and
groups for identity providers such as Okta and Entra ID, with an admin key
that has the ``scim`` scope (docs/admin/scim.md).

``protocol`` and ``patch`` parse SCIM's JSON into the arguments of the
services (``accounts.services.scim_users``, ``scim_groups``) and render
their records back, without Django's request machinery; ``views`` only
authenticates, parses, calls one service and renders."""
