"""The usage log's columns as its exports and its writer name them.

Kept apart from ``UsageLog`` because the export order is a promise to
operators' scripts, not a property of the table: a field added to the model
changes no export until it is placed here.
"""

from __future__ import annotations

from responses_api.models import UsageLog

# The columns a usage export lists, in its order: the header of
# ``usage_export``'s CSV and the keys of its JSON lines, from which the
# console's CSV and the management API's usage records are derived. Operators'
# scripts read these by position and by name, so the order is declared here
# rather than taken from the fields (a field inserted among them would shift
# every column after it); a new column goes at the end.
USAGE_EXPORT_COLUMNS = (
    "request_id",
    "created_at",
    "finished_at",
    "key_prefix",
    "model",
    "backend_id",
    "backend_name",
    "endpoint",
    "method",
    "stream",
    "status",
    "error_code",
    "error_message",
    "note",
    "notices",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost",
    "attempts",
    "queue_wait_ms",
    "ttft_ms",
    "duration_ms",
    "tokens_per_second",
    "client_ip",
    "user_agent",
    "session_id",
    "thread_id",
    "client_request_id",
    "originator",
    "input_tokens_estimated",
    "route_reason",
    "prefix_reused_tokens",
    "tool_calls",
    "tool_errors",
    "tool_ms",
    "response_id",
    "background",
)
# The fields of a row the request's log line carries (logger
# ``switchyard.requests``, one line per request).
LOG_FIELDS = (
    "request_id",
    "organisation_id",
    "key_prefix",
    "model",
    "backend_name",
    "method",
    "endpoint",
    "stream",
    "status",
    "error_code",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "queue_wait_ms",
    "ttft_ms",
    "duration_ms",
)
# The columns no export lists, each export naming the organisation and the
# key in its own way; a check row is the platform's, not the tenant's.
# ``tests/usage/test_columns.py`` fails on a column in neither tuple.
USAGE_UNEXPORTED_COLUMNS = ("id", "organisation_id", "api_key_id", "is_check", "tool_log")


def usage_columns() -> tuple[str, ...]:
    """Every column of a usage row but its primary key, in the fields' order:
    the keys of a submitted row and of a bulk copy."""
    return tuple(f.attname for f in UsageLog._meta.concrete_fields if not f.primary_key)
