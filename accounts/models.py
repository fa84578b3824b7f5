"""Tenants, the people in them, and the API keys they call the API with."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import TextChoices
from django.utils import timezone


class Organisation(models.Model):
    class Retention(TextChoices):
        NONE = "none", "Store nothing (zero data retention)"
        STORE = "store", "Store responses for a limited time"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    retention_policy = models.CharField(
        max_length=16, choices=Retention.choices, default=Retention.NONE
    )
    store_ttl_hours = models.PositiveIntegerField(default=24 * 30)
    usage_retention_days = models.PositiveIntegerField(default=90)
    default_rpm = models.PositiveIntegerField(null=True, blank=True)
    default_tpm = models.PositiveIntegerField(null=True, blank=True)
    default_concurrency = models.PositiveIntegerField(null=True, blank=True)
    # The ISO 4217 code of the model prices, hence of every cost and budget:
    # amounts are never converted, only named.
    currency = models.CharField(max_length=3, default="USD")
    # Spend limits of the whole organisation per calendar month (UTC): a
    # budget in the organisation's currency, and a token quota.
    monthly_budget = models.DecimalField(max_digits=16, decimal_places=6, null=True, blank=True)
    monthly_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # Share of a monthly limit, in percent, past which responses carry the
    # notice budget_near_limit (for the organisation's limits and its keys').
    budget_warning_percent = models.PositiveSmallIntegerField(default=80)
    # Whether a request's ``mcp`` tool may name its own ``server_url``; off,
    # only the organisation's registered servers (``McpServer``) are reached.
    allow_client_mcp_servers = models.BooleanField(default=False)
    # Bytes of uploaded files (the Files API) it may keep in all; None:
    # SWITCHYARD_FILES_QUOTA_BYTES.
    file_quota_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(TextChoices):
        OWNER = "owner", "Owner"
        ADMIN = "admin", "Admin"
        DEVELOPER = "developer", "Developer"
        VIEWER = "viewer", "Viewer"

    # Opaque id for console URLs.
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.DEVELOPER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organisation"], name="one_membership_per_org")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organisation} as {self.role}"


class KeyBase(models.Model):
    """What an API key and an admin key share: a name, who made it, and the
    key itself as its SHA-256 (``accounts.keys``) with ``prefix``, its first
    characters, shown so that people can tell keys apart. Each kind keeps a
    table of its own, so that neither can be mistaken for the other."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    prefix = models.CharField(max_length=32)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def status(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= timezone.now():
            return "expired"
        return "active"

    def revoke(self) -> bool:
        """Revoke the key now; False, writing nothing, if it was already."""
        if self.revoked_at is not None:
            return False
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        return True


class ApiKey(KeyBase):
    """An API key, for the inference API, with what it may do."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="api_keys"
    )
    allowed_models = models.JSONField(default=list, blank=True)
    rpm = models.PositiveIntegerField(null=True, blank=True)
    tpm = models.PositiveIntegerField(null=True, blank=True)
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    # This key's own spend limits per calendar month (UTC), besides the
    # organisation's.
    monthly_budget = models.DecimalField(max_digits=16, decimal_places=6, null=True, blank=True)
    monthly_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # The short-lived key of a model check: the platform's, not one of the
    # organisation's keys; its requests count in no figure of the organisation.
    is_check = models.BooleanField(default=False)


class AdminApiKey(KeyBase):
    """A key for the management API (``/api/v1/admin/``), never for inference.

    A kind of its own, not an :class:`ApiKey` with a flag: neither can be
    mistaken for the other on either API."""

    class Role(TextChoices):
        ADMIN = "admin", "Admin (read and write)"
        VIEWER = "viewer", "Viewer (read only)"

    class Scope(TextChoices):
        # The SCIM 2.0 provisioning API (/scim/v2/), besides the management
        # API every admin key has.
        SCIM = "scim", "SCIM provisioning"

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="admin_keys"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    scopes = models.JSONField(default=list, blank=True)

    def has_scope(self, scope: str) -> bool:
        return isinstance(self.scopes, list) and scope in self.scopes


class Invitation(models.Model):
    """A one-time invitation to join an organisation, sent to an email address.

    The link carries a signed token naming the invitation; accepting it sets
    ``accepted_at``, so the same link cannot be used twice."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="invitations"
    )
    email = models.EmailField()
    role = models.CharField(
        max_length=16, choices=Membership.Role.choices, default=Membership.Role.DEVELOPER
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.email} to {self.organisation} as {self.role}"

    @property
    def status(self) -> str:
        if self.accepted_at:
            return "accepted"
        if self.revoked_at:
            return "revoked"
        if self.expires_at <= timezone.now():
            return "expired"
        return "pending"


class AuditEntry(models.Model):
    """Who changed what in an organisation, and when. Written by every
    service that changes state, whoever calls it; never holds a secret."""

    class Source(TextChoices):
        CONSOLE = "console", "Console"
        API = "api", "REST API"
        # A management command: whoever runs it has shell access, not a login.
        CLI = "cli", "Command line"
        # Single sign-on: memberships granted by the identity provider's
        # mapping, as the person signs in.
        SSO = "oidc", "Single sign-on"
        # SCIM provisioning by an identity provider, with an admin key.
        SCIM = "scim", "SCIM provisioning"

    # Null: a platform-wide change, such as a shared backend.
    organisation = models.ForeignKey(
        Organisation,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="audit_entries",
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Set when the change came through the management API.
    admin_key = models.ForeignKey(
        AdminApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The actor's name at the time, kept when the user is deleted.
    actor_name = models.CharField(max_length=200, blank=True, default="")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.CONSOLE)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=300, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["organisation", "-created_at"], name="audit_org_time")]

    def __str__(self) -> str:
        who = self.actor_name or self.get_source_display()
        return f"{self.created_at:%Y-%m-%d %H:%M} {who} {self.action} {self.target}"


class ScimUser(models.Model):
    """A person an identity provider provisions into one organisation over
    SCIM (``admin_api.scim``): the SCIM ``User`` resource.

    The account is the platform's :class:`User`, shared by every
    organisation it belongs to; what the provider says about the person
    (``userName``, names, ``externalId``) is kept here, per organisation, so
    that one organisation's provider never renames an account another
    organisation sees. ``active`` is the provider's word: while it is true
    the person holds a :class:`Membership`; deactivation ends it but keeps
    this row (and the groups), so that reactivation restores the person."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="scim_users"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scim_identities"
    )
    user_name = models.CharField(max_length=254)
    external_id = models.CharField(max_length=254, blank=True, default="")
    given_name = models.CharField(max_length=150, blank=True, default="")
    family_name = models.CharField(max_length=150, blank=True, default="")
    display_name = models.CharField(max_length=200, blank=True, default="")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "user"], name="one_scim_user_per_org"),
            models.UniqueConstraint(
                fields=["organisation", "user_name"], name="one_scim_user_name_per_org"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_name} in {self.organisation}"


class ScimGroup(models.Model):
    """A SCIM ``Group`` of one organisation: a name and its members.

    Not a role by itself: its ``display_name`` is what sign-in reads from
    the ``groups`` claim, so the rules of ``SWITCHYARD_OIDC_GROUPS`` (and
    ``SWITCHYARD_OIDC_DOMAINS``) turn the groups of a person into their role
    exactly as they do at sign-in (``accounts.services.scim``). Kept as a
    record of its own, not a Django auth group: those are platform-wide (the
    ``support`` group is one), these belong to an organisation."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="scim_groups"
    )
    display_name = models.CharField(max_length=200)
    external_id = models.CharField(max_length=254, blank=True, default="")
    members = models.ManyToManyField(ScimUser, related_name="groups", blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "display_name"], name="one_scim_group_name_per_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.display_name} in {self.organisation}"
