"""Backends, the models they serve, the usage log; MCP servers in ``models.mcp``,
web search providers in ``models.web_search``, uploaded files in
``models.files``, vector stores in ``models.retrieval``."""

import uuid

from django.db import models
from django.utils import timezone

from accounts.models import ApiKey, Organisation
from responses_api.models.files import FileRecord as FileRecord
from responses_api.models.mcp import McpServer as McpServer
from responses_api.models.retrieval import Chunk as Chunk
from responses_api.models.retrieval import VectorStore as VectorStore
from responses_api.models.retrieval import VectorStoreFile as VectorStoreFile
from responses_api.models.retrieval import VectorStoreFileBatch as VectorStoreFileBatch
from responses_api.models.stored import Conversation as Conversation
from responses_api.models.stored import ConversationItem as ConversationItem
from responses_api.models.stored import StoredItem as StoredItem
from responses_api.models.stored import StoredResponse as StoredResponse
from responses_api.models.web_search import WebSearchProvider as WebSearchProvider
from responses_api.runtime import histogram


class Backend(models.Model):
    class Dialect(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible"
        VLLM = "vllm", "vLLM"
        SGLANG = "sglang", "SGLang"
        LLAMACPP = "llamacpp", "llama.cpp server"
        OLLAMA = "ollama", "Ollama"

    class Health(models.TextChoices):
        UNKNOWN = "unknown", "Unknown"
        ONLINE = "online", "Online"
        OFFLINE = "offline", "Offline"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Null organisation: a shared backend defined by platform staff.
    organisation = models.ForeignKey(
        Organisation, null=True, blank=True, on_delete=models.CASCADE, related_name="backends"
    )
    name = models.CharField(max_length=100)
    base_url = models.URLField(max_length=500)
    api_key_encrypted = models.TextField(blank=True, default="")
    dialect = models.CharField(max_length=16, choices=Dialect.choices, default=Dialect.OPENAI)
    enabled = models.BooleanField(default=True)
    max_concurrency = models.PositiveIntegerField(default=16)
    # Extra fields merged into every chat request body (e.g. logit_bias for
    # a server that needs it); request fields take precedence.
    extra_body = models.JSONField(default=dict, blank=True)
    health = models.CharField(max_length=16, choices=Health.choices, default=Health.UNKNOWN)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    version = models.CharField(max_length=200, blank=True, default="")
    reported_models = models.JSONField(default=list, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    # Set by platform staff only: this backend may sit on a loopback, link-local
    # or private address where the platform refuses them (BACKEND_ALLOW_PRIVATE).
    allow_private = models.BooleanField(default=False)
    # Precise prefix scoring (docs/operations/routing.md), set by platform
    # staff only: the ZMQ address vLLM publishes its KV-cache events on, and
    # the local folder of the model's tokenizer and chat template.
    kv_events_endpoint = models.CharField(max_length=300, blank=True, default="")
    tokenizer_path = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "name"], name="backend_name_per_org")
        ]

    def __str__(self) -> str:
        return self.name


# What a model does, as ``ServedModel.kind`` takes it.
MODEL_KINDS = [("generate", "Generates text"), ("embed", "Embeds text")]


class ServedModel(models.Model):
    """A model as clients name it (``model`` in a request)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="models")
    public_id = models.CharField(max_length=200)
    aliases = models.JSONField(default=list, blank=True)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    default_max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    top_p = models.FloatField(null=True, blank=True)
    supports_reasoning = models.BooleanField(default=True)
    # The reasoning.effort levels it takes (empty: low, medium, high) and the default.
    reasoning_levels = models.JSONField(default=list, blank=True)
    default_reasoning_effort = models.CharField(max_length=10, blank=True)
    supports_vision = models.BooleanField(default=False)
    # What it does: generate text (``/v1/responses``) or embed it
    # (``/v1/embeddings``); each endpoint refuses the other kind.
    kind = models.CharField(max_length=10, choices=MODEL_KINDS, default="generate")
    # Seconds a non-streamed request waits for the backend's first token
    # before it is answered 504 (None: SWITCHYARD_FIRST_TOKEN_TIMEOUT). A
    # stream needs none: it shows it is alive with response.in_progress.
    first_token_timeout = models.PositiveIntegerField(null=True, blank=True)
    price_input = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    price_cached_input = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    price_output = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    backends = models.ManyToManyField(Backend, through="Deployment", related_name="served_models")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["public_id"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "public_id"], name="model_id_per_org")
        ]

    def __str__(self) -> str:
        return self.public_id

    def effort_levels(self) -> list[str]:
        """The reasoning efforts a client may choose, none without reasoning."""
        if not self.supports_reasoning:
            return []
        return list(self.reasoning_levels or DEFAULT_REASONING_LEVELS)

    def effort_default(self) -> str | None:
        levels = self.effort_levels()
        if not levels:
            return None
        if self.default_reasoning_effort in levels:
            return self.default_reasoning_effort
        return "medium" if "medium" in levels else levels[0]


# What ``reasoning.effort`` takes that turns thinking on, in order.
REASONING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
DEFAULT_REASONING_LEVELS = ("low", "medium", "high")


class Deployment(models.Model):
    """Which backend serves a model, and under which upstream name."""

    model = models.ForeignKey(ServedModel, on_delete=models.CASCADE, related_name="deployments")
    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="deployments")
    upstream_name = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model", "backend"], name="one_deployment_per_backend")
        ]


class UsageLog(models.Model):
    """One row per authenticated API request. Never the prompt or the answer."""

    request_id = models.UUIDField(unique=True)
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="usage")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    key_prefix = models.CharField(max_length=32, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    backend = models.ForeignKey(Backend, null=True, blank=True, on_delete=models.SET_NULL)
    backend_name = models.CharField(max_length=100, blank=True, default="")
    endpoint = models.CharField(max_length=100)
    method = models.CharField(max_length=8, default="POST")
    stream = models.BooleanField(default=False)
    # The response a create made (or was about), and whether it ran in the
    # background: the trace page names it and links its polls.
    response_id = models.CharField(max_length=64, blank=True, default="")
    background = models.BooleanField(default=False)
    status = models.PositiveSmallIntegerField()
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    note = models.CharField(max_length=200, blank=True, default="")
    notices = models.JSONField(default=list, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    # input_tokens counted from the request: the client left before any usage came.
    input_tokens_estimated = models.BooleanField(default=False)
    cached_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    # Why the backend was chosen (backends.scoring), and its expected cached prefix.
    route_reason = models.CharField(max_length=16, blank=True, default="")
    prefix_reused_tokens = models.PositiveIntegerField(default=0)
    # The hosted tools it ran (MCP calls): how many, how many failed, and the
    # time spent in them (pipeline.tool_loop).
    tool_calls = models.PositiveIntegerField(default=0)
    tool_errors = models.PositiveIntegerField(default=0)
    tool_ms = models.FloatField(default=0.0)
    # The calls one by one (pipeline.facts.ToolUse): kind, server, tool, status, time.
    tool_log = models.JSONField(default=list, blank=True)
    queue_wait_ms = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    tokens_per_second = models.FloatField(null=True, blank=True)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True, default="")
    # What the client says of the conversation a request belongs to (Codex
    # sends these headers on every turn), so turns group into sessions.
    session_id = models.CharField(max_length=128, blank=True, default="")
    thread_id = models.CharField(max_length=128, blank=True, default="")
    client_request_id = models.CharField(max_length=128, blank=True, default="")
    originator = models.CharField(max_length=128, blank=True, default="")
    # A request of ``manage.py model_check``, not of the organisation's traffic.
    is_check = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # One per filter of the console's usage log, each giving the rows
        # newest first so that a page reads only the rows it shows. The two
        # partial ones serve the 4xx (499 excluded) and 5xx status classes.
        indexes = [
            models.Index(fields=["organisation", "-created_at"], name="usage_org_time"),
            models.Index(fields=["organisation", "status", "-created_at"], name="usage_org_status"),
            models.Index(
                fields=["organisation", "session_id", "created_at"], name="usage_org_session"
            ),
            models.Index(fields=["organisation", "api_key", "-created_at"], name="usage_org_key"),
            models.Index(fields=["organisation", "model", "-created_at"], name="usage_org_model"),
            models.Index(
                fields=["organisation", "backend", "-created_at"], name="usage_org_backend"
            ),
            models.Index(fields=["organisation", "stream", "-created_at"], name="usage_org_stream"),
            models.Index(
                fields=["organisation", "-created_at"],
                name="usage_org_4xx",
                condition=models.Q(status__gte=400, status__lt=500) & ~models.Q(status=499),
            ),
            models.Index(
                fields=["organisation", "-created_at"],
                name="usage_org_5xx",
                condition=models.Q(status__gte=500),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} {self.status}"


# A roll-up cell's "no key" / "no backend": the dimensions are NOT NULL so
# that ``ON CONFLICT`` finds the cell (NULLs never conflict).
NO_ID = uuid.UUID(int=0)


class UsageRollup(models.Model):
    """Sums of usage rows per organisation × bucket × model × key × backend ×
    status class, kept by the usage writer in the transaction that inserts
    the rows (``responses_api/usage/rollups.py``). Key and backend are plain ids,
    not foreign keys: a deleted key's history stays where it was counted."""

    # The cell constraint, led by the organisation, is its index.
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    bucket_start = models.DateTimeField()
    model = models.CharField(max_length=200, default="")
    api_key_id = models.UUIDField(default=NO_ID)
    backend_id = models.UUIDField(default=NO_ID)
    # "2xx" (anything below 400), "4xx" (not 429 or 499), "429", "499", "5xx".
    status_class = models.CharField(max_length=3)
    requests = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    # Billionths of the price currency: integers add exactly on every database.
    cost_nanos = models.BigIntegerField(default=0)
    # ttft_00 … ttft_34, the counts of ``histogram.EDGES_MS``, added below.

    class Meta:
        abstract = True


for _column in histogram.COLUMNS:
    UsageRollup.add_to_class(_column, models.PositiveIntegerField(default=0))


class UsageHourly(UsageRollup):
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "organisation",
                    "bucket_start",
                    "model",
                    "api_key_id",
                    "backend_id",
                    "status_class",
                ],
                name="usage_hourly_cell",
            )
        ]


class UsageDaily(UsageRollup):
    """The same sums per UTC day: a 30-day view reads 30 days of cells, not 720 hours."""

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "organisation",
                    "bucket_start",
                    "model",
                    "api_key_id",
                    "backend_id",
                    "status_class",
                ],
                name="usage_daily_cell",
            )
        ]


class ModelCheck(models.Model):
    """One run of ``manage.py model_check``: which capabilities passed."""

    model = models.ForeignKey(ServedModel, on_delete=models.CASCADE, related_name="checks")
    backend = models.ForeignKey(Backend, null=True, blank=True, on_delete=models.SET_NULL)
    started_at = models.DateTimeField(default=timezone.now)
    # [{"name", "passed", "skipped", "detail", "raw"}] in the order run.
    results = models.JSONField(default=list, blank=True)
    passed = models.BooleanField(default=False)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.model} {self.started_at:%Y-%m-%d %H:%M} {'pass' if self.passed else 'fail'}"


class UsageDeadLetter(models.Model):
    """A usage row that the database refused and that retrying cannot fix.

    Kept as the row's JSON (with any NUL escaped, so the text itself always
    fits the column) until ``manage.py usage_deadletters --replay`` writes
    it, repaired, into the usage log, or an operator deletes it."""

    request_id = models.CharField(max_length=64, db_index=True)
    organisation_id = models.IntegerField(null=True, blank=True)
    row = models.TextField()
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]
