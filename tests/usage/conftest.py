import uuid

import pytest

from responses_api.usage import writer as usage


@pytest.fixture
def redis_stream(settings):
    """A usage stream of this test's own, so no live web process drains it."""
    client = usage.redis_client()
    name = f"switchyard:usage:test:{uuid.uuid4().hex[:8]}"
    settings.SWITCHYARD_USAGE_STREAM = name
    yield client
    client.delete(name, name + ":dead")
    client.close()
