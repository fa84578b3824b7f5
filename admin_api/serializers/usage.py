"""A usage record as the management API lists it. The rows themselves are
built by ``responses_api.usage_rows.usage_record`` (for JSON and JSON lines
alike); this serializer describes them in the schema."""

from __future__ import annotations

from rest_framework import serializers

from admin_api.serializers.base import ObjectTypeField


class UsageRecordSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The request id (X-Request-Id).")
    object = ObjectTypeField("usage_record")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    key_id = serializers.UUIDField(allow_null=True)
    key_prefix = serializers.CharField()
    model = serializers.CharField()
    backend_id = serializers.UUIDField(allow_null=True)
    backend_name = serializers.CharField()
    endpoint = serializers.CharField()
    method = serializers.CharField()
    stream = serializers.BooleanField()
    status = serializers.IntegerField()
    error_code = serializers.CharField()
    error_message = serializers.CharField()
    note = serializers.CharField()
    notices = serializers.ListField(child=serializers.CharField())
    input_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    reasoning_tokens = serializers.IntegerField()
    cost = serializers.FloatField()
    attempts = serializers.IntegerField()
    queue_wait_ms = serializers.FloatField(allow_null=True)
    ttft_ms = serializers.FloatField(allow_null=True)
    duration_ms = serializers.FloatField(allow_null=True)
    tokens_per_second = serializers.FloatField(allow_null=True)
    client_ip = serializers.CharField(allow_null=True)
    user_agent = serializers.CharField()
    session_id = serializers.CharField(help_text="The client's session (session-id).")
    thread_id = serializers.CharField()
    client_request_id = serializers.CharField()
    originator = serializers.CharField()
