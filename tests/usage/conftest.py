import uuid

import pytest

from responses_api.usage import writer as usage


@pytest.fixture
def redis_stream(monkeypatch):
    """A usage stream of this test's own, so no live web process drains it."""
    client = usage.redis_client()
    name = f"switchyard:usage:test:{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(usage, "STREAM", name)
    yield client
    client.delete(name, name + ":dead")
    client.close()
