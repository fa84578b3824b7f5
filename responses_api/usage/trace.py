"""A usage row as support staff read it (``manage.py trace``, the console)."""

from __future__ import annotations

from typing import Any

from responses_api.models import UsageLog


def usage_row_dict(row: UsageLog) -> dict[str, Any]:
    generation = None
    if row.duration_ms is not None and row.ttft_ms is not None:
        generation = max(row.duration_ms - row.ttft_ms, 0.0)
    return {
        "request_id": str(row.request_id),
        "created_at": row.created_at.isoformat(),
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
        "organisation": {"id": row.organisation_id, "slug": row.organisation.slug},
        "api_key": {
            "id": str(row.api_key_id) if row.api_key_id else None,
            "prefix": row.key_prefix,
            "name": row.api_key.name if row.api_key else None,
        },
        "endpoint": row.endpoint,
        "method": row.method,
        "model": row.model,
        "backend": {
            "id": str(row.backend_id) if row.backend_id else None,
            "name": row.backend_name,
        },
        "stream": row.stream,
        "response": {"id": row.response_id or None, "background": row.background},
        "status": row.status,
        "error": {"code": row.error_code, "message": row.error_message}
        if row.error_code or row.error_message
        else None,
        "note": row.note,
        "notices": row.notices,
        "tokens": {
            "input": row.input_tokens,
            "input_estimated": row.input_tokens_estimated,
            "cached": row.cached_tokens,
            "output": row.output_tokens,
            "reasoning": row.reasoning_tokens,
        },
        "cost": str(row.cost),
        "attempts": row.attempts,
        "route": {"reason": row.route_reason, "prefix_reused_tokens": row.prefix_reused_tokens},
        "tools": {
            "calls": row.tool_calls,
            "errors": row.tool_errors,
            "ms": row.tool_ms,
            "log": row.tool_log,
        },
        "timing": {
            "queue_wait_ms": row.queue_wait_ms,
            "ttft_ms": row.ttft_ms,
            "generation_ms": generation,
            "duration_ms": row.duration_ms,
            "tokens_per_second": row.tokens_per_second,
        },
        "client": {
            "ip": row.client_ip,
            "user_agent": row.user_agent,
            "session_id": row.session_id,
            "thread_id": row.thread_id,
            "request_id": row.client_request_id,
            "originator": row.originator,
        },
    }
