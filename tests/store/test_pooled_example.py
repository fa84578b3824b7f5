"""The pooled bridge's documented example, two requests the second of
which continues the first, runs unchanged against a store organisation:
only its base URL, key and model are this server's."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

EXAMPLE = """\
from openai import OpenAI

client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="pooled")
r = client.responses.create(model="pooled", input="What is a KV cache?")
print(r.output_text)

# Continue from the stored response
r2 = client.responses.create(model="pooled", previous_response_id=r.id, input="Shorter.")
print(r2.output_text)
"""


def test_the_pooled_example_continues_its_first_response(api_server, acme, recorder):
    script = (
        EXAMPLE.replace("http://127.0.0.1:8080/v1", api_server.url + "/v1")
        .replace('api_key="pooled"', f'api_key="{acme.key}"')
        .replace('model="pooled"', 'model="sim-model"')
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first and second
    sent = recorder.last_messages()
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "What is a KV cache?"),
        ("assistant", first),
        ("user", "Shorter."),
    ]
