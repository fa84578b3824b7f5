"""Switchyard in front of a real vLLM: the OpenAI SDK as the client.

stories260K follows no instruction, so these tests check the protocol's
shape, not the text: vLLM's own tool-call parsing (forced by ``tool_choice``),
its prefix cache, its metrics, its model list and version. Every vLLM test is
in this module, so that one vLLM serves them all (``conftest``).
"""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families
from websockets.sync.client import connect as ws_connect

from responses_api.backends.health import backend_check
from responses_api.catalogue import catalog
from responses_api.checks.model_check import run_check, table
from responses_api.models import Backend
from tests.conftest import server_env, start_daphne, usage_rows, wait_for, wait_rows
from tests.support import wait_until
from tests.vllm.conftest import UPSTREAM_MODEL
from tests.vllm.launch import VLLM_VERSION

pytestmark = [pytest.mark.vllm, pytest.mark.live, pytest.mark.django_db(transaction=True)]

PROMPT = "Tell me a story about a cat."
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
FORECAST = {
    "type": "namespace",
    "name": "weather",
    "description": "Weather services.",
    "tools": [{**WEATHER, "name": "get_forecast"}],
}
PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch."}


def long_prompt() -> str:
    """Over two 128-token cache blocks, new to the server's cache: a prompt
    another test (or an earlier run of this one) sent would be cached already."""
    return f"{uuid.uuid4().hex} " + "Once upon a time there was a little dog. " * 40


def test_text_streamed_and_not(vllm_server, vllm_tenant):
    tenant = vllm_tenant()
    response = tenant.client.responses.create(
        model="stories", input=PROMPT, temperature=0, max_output_tokens=8
    )
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text
    assert response.usage.output_tokens == 8 and response.usage.input_tokens > 0
    assert response.switchyard["backend"]["name"] == "vllm"
    events = list(
        tenant.client.responses.create(
            model="stories", input=PROMPT, temperature=0, max_output_tokens=8, stream=True
        )
    )
    final = events[-1].response
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == final.output_text == response.output_text  # greedy
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.incomplete"
    assert final.usage.input_tokens == response.usage.input_tokens
    rows = wait_rows(2, organisation=tenant.organisation)
    assert sorted(r.stream for r in rows) == [False, True]
    assert all(r.status == 200 and r.output_tokens == 8 for r in rows)


def test_organisations_never_share_the_prefix_cache(vllm_server, vllm_tenant):
    prompt = long_prompt()

    def cached(tenant) -> int:
        response = tenant.client.responses.create(
            model="stories", input=prompt, temperature=0, max_output_tokens=2
        )
        assert response.usage.input_tokens > 256
        return response.usage.input_tokens_details.cached_tokens

    acme, globex = vllm_tenant("acme"), vllm_tenant("globex")
    assert cached(acme) == 0
    assert cached(acme) >= 256  # two whole 128-token blocks
    # The same prompt from another organisation starts cold: its salt differs.
    assert cached(globex) == 0
    assert cached(globex) >= 256
    rows = wait_rows(2, organisation=acme.organisation)
    assert sorted(r.cached_tokens > 0 for r in rows) == [False, True]


# Without `strict`, vLLM constrains a forced call to the hermes form and the
# tool's name but not its parameters: this model writes a JSON string as the
# arguments. Switchyard passes a function's arguments on as they came.


def calls(response, kind: str = "function_call") -> list:
    return [item for item in response.output if item.type == kind]


def test_forced_tool_calls_of_every_kind(vllm_server, vllm_tenant):
    tenant = vllm_tenant()
    ask = {"model": "stories", "input": "What is the weather?", "temperature": 0}
    response = tenant.client.responses.create(
        **ask, tools=[WEATHER], tool_choice="required", max_output_tokens=64
    )
    (call,) = calls(response)
    assert call.name == "get_weather" and call.call_id
    json.loads(call.arguments)  # JSON, though not the schema's (above)

    response = tenant.client.responses.create(
        **ask,
        tools=[WEATHER, FORECAST],
        tool_choice={"type": "function", "name": "get_forecast"},
        max_output_tokens=64,
    )
    (call,) = calls(response)
    assert (call.namespace, call.name) == ("weather", "get_forecast")

    response = tenant.client.responses.create(
        **ask,
        tools=[WEATHER, PATCH],
        tool_choice={"type": "custom", "name": "apply_patch"},
        max_output_tokens=64,
    )
    (custom,) = calls(response, "custom_tool_call")
    # The raw input, not the JSON vLLM generated for it.
    assert custom.name == "apply_patch" and custom.input and custom.input[0] != '"'


def test_streamed_tool_call_arguments_arrive_as_deltas(vllm_server, vllm_tenant):
    tenant = vllm_tenant()
    events = list(
        tenant.client.responses.create(
            model="stories",
            input="What is the weather?",
            temperature=0,
            tools=[WEATHER],
            tool_choice={"type": "function", "name": "get_weather"},
            max_output_tokens=64,
            stream=True,
        )
    )
    final = events[-1].response
    (call,) = calls(final)
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert deltas and "".join(deltas) == call.arguments
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [e.arguments for e in done] == [call.arguments]
    json.loads(call.arguments)


# The model's own template, rendering an assistant message's earlier
# reasoning where the model saw it, as thinking models' templates do.
THINKING_TEMPLATE = (
    "{{- bos_token -}}{%- for message in messages -%}"
    "{%- if message.get('reasoning_content') %}{{ message['reasoning_content'] }} {% endif -%}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}{{ part.get('text', '') }}"
    "{%- endfor -%}{%- endif -%}{%- if not loop.last %} {% endif -%}{%- endfor -%}"
)


def test_earlier_reasoning_reaches_the_template(vllm_server, vllm_tenant):
    tenant = vllm_tenant(
        "initech", backend_name="vllm-think", extra_body={"chat_template": THINKING_TEMPLATE}
    )
    thought = "Lily thought about the sun, the moon and the big red ball for a long time."
    reasoning = {
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": thought}],
    }
    turns = [
        {"role": "user", "content": "Tell me a story."},
        reasoning,
        {"role": "assistant", "content": "Once upon a time."},
        {"role": "user", "content": "More."},
    ]

    def input_tokens(items) -> int:
        response = tenant.client.responses.create(
            model="stories", input=items, temperature=0, max_output_tokens=1
        )
        return response.usage.input_tokens

    without = input_tokens([t for t in turns if t is not reasoning])
    assert input_tokens(turns) > without + 10


# The story model ends a story after a few hundred tokens; without its end
# of sequence, a request runs until its token limit (vLLM's own parameter,
# through the backend's extra_body).
LONG = {"ignore_eos": True}


def _leave_a_socket(tenant) -> None:
    """A response over a WebSocket, closed as soon as the response has
    started: the server reads a socket's frames all along, so its close is
    seen at once, whatever the relay is doing."""
    url = str(tenant.client.base_url).replace("http", "ws", 1) + "responses"
    create = {
        "type": "response.create",
        "model": "stories",
        "input": PROMPT,
        "temperature": 0,
        "max_output_tokens": 1900,
    }
    with ws_connect(url, additional_headers={"Authorization": f"Bearer {tenant.key}"}) as socket:
        socket.send(json.dumps(create))
        while json.loads(socket.recv(timeout=30))["type"] != "response.in_progress":
            pass


def _leave_a_stream(tenant) -> None:
    """A streamed request whose client closes it at its first event."""
    stream = tenant.client.responses.create(
        model="stories", input=PROMPT, temperature=0, max_output_tokens=1900, stream=True
    )
    for _ in stream:
        break
    stream.close()


def test_a_client_leaving_aborts_the_request_in_vllm(vllm_server, vllm_tenant):
    tenant = vllm_tenant(extra_body=LONG)
    # Left alone, a request runs to its 1,900 tokens (its end of sequence is
    # ignored), a few seconds of this tiny model; its client leaves as soon as
    # the response started. vLLM counts a request in
    # vllm:request_success_total only when it ran to its end: one that leaves
    # "running" without being counted there was aborted. The gateway relays
    # behind vLLM, so on a loaded two-core machine vLLM can finish before the
    # close reaches it; such a try shows nothing either way.
    shown = []
    for leave in (_leave_a_socket, _leave_a_stream, _leave_a_socket):
        wait_until(lambda: vllm_server.running() == 0, timeout=30, message="vLLM is busy")
        generated = vllm_server.metric("vllm:generation_tokens_total")
        finished = vllm_server.metric("vllm:request_success_total")
        rows_before = len(usage_rows(organisation=tenant.organisation))
        leave(tenant)
        wait_until(lambda: vllm_server.running() == 0, timeout=30, message="vLLM kept generating")
        row = wait_rows(rows_before + 1, organisation=tenant.organisation)[-1]
        if row.status != 499:
            continue  # the whole response was relayed before its client left
        assert row.note == "Client disconnected"
        time.sleep(0.5)  # the engine's last step reaches /metrics with the next one
        if vllm_server.metric("vllm:request_success_total") == finished:
            count = vllm_server.metric("vllm:generation_tokens_total") - generated
            shown.append((count, row.output_tokens))
            assert count < 1900, f"aborted after {count} tokens"
            break
    if not shown:
        pytest.skip("vLLM finished every request before the client's close reached it")


def test_health_and_model_check_read_the_servers_models_and_version(vllm_server, vllm_tenant):
    version = httpx.get(vllm_server.root + "/version", timeout=5).json()["version"]
    assert version == VLLM_VERSION
    tenant = vllm_tenant()
    backend = tenant.backend
    assert backend_check(backend=backend).ok
    backend.refresh_from_db()
    assert backend.health == Backend.Health.ONLINE
    assert backend.version == f"vLLM {VLLM_VERSION}"
    assert backend.reported_models == [UPSTREAM_MODEL]
    # The version the check recorded is the one responses report.
    wait_for(
        lambda: (
            tenant.client.responses.create(
                model="stories", input="Hi", max_output_tokens=2
            ).switchyard["backend"]["version"]
            == f"vLLM {VLLM_VERSION}"
        )
    )
    catalog.forget()
    # The capability this model can pass: it follows no instruction, and
    # answers the check's cancellation faster than the check hangs up
    # (the test above cancels for real).
    check = run_check("acme", "stories", "vllm", timeout=60, only=("context_window",))
    assert {r["name"] for r in check.results} == {"context_window"}
    assert check.passed, table(check)
    catalog.forget()


# --- precise prefix scoring: the blocks vLLM's KV-cache events report -------

METRICS_TOKEN = "kv-events-metrics"
BLOCK = 128


def held_blocks(web, endpoint: str) -> float:
    """The blocks the web process's index of ``endpoint`` holds (/metrics)."""
    text = httpx.get(
        web.url + "/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"}, timeout=5
    ).text
    for family in text_string_to_metric_families(text):
        if family.name == "switchyard_kv_event_blocks":
            for sample in family.samples:
                if sample.labels.get("endpoint") == endpoint:
                    return sample.value
    return -1.0


def precise_tenant(slug: str, vllm_server, web):
    """An organisation whose ``stories`` runs on two backends of the same
    vLLM: ``precise`` (scored by its events) and ``plain`` (approximate)."""
    from accounts.services.api_keys import api_key_create
    from accounts.services.organisations import organisation_ensure
    from responses_api.catalogue.services.backends import backend_ensure
    from responses_api.catalogue.services.served_models import model_ensure

    organisation, _ = organisation_ensure(slug=slug, name=slug.title())
    backends = {}
    for name, events, folder in (
        ("precise", vllm_server.events, vllm_server.model),
        ("plain", None, None),
    ):
        backends[name], _ = backend_ensure(
            organisation=organisation,
            name=name,
            base_url=vllm_server.url,
            dialect="vllm",
            kv_events_endpoint=events,
            tokenizer_path=folder,
        )
        model_ensure(
            organisation=organisation,
            public_id="stories",
            backend=backends[name],
            upstream_name=UPSTREAM_MODEL,
            context_window=2048,
        )
    _, key = api_key_create(organisation=organisation, name="precise key")
    client = OpenAI(base_url=web.url + "/v1", api_key=key, max_retries=0)
    return organisation, backends, client


def test_precise_mode_scores_by_the_blocks_vllm_reports(vllm_server):
    from responses_api.backends.prompt_tokens import prompt_token_ids

    web = start_daphne(env=server_env(METRICS_TOKEN=METRICS_TOKEN))
    try:
        acme, acme_backends, acme_client = precise_tenant("acme", vllm_server, web)
        globex, _, globex_client = precise_tenant("globex", vllm_server, web)

        def ask(client, prompt: str, **headers: str):
            return client.responses.create(
                model="stories",
                input=prompt,
                temperature=0,
                max_output_tokens=1,
                extra_headers=headers or None,
            )

        # The web process subscribes when it first scores a precise backend;
        # a SUB socket misses what was published before it joined, so
        # prompts go until the index shows blocks.
        def subscribed() -> bool:
            ask(acme_client, long_prompt())
            return held_blocks(web, vllm_server.events) > 0

        wait_until(subscribed, timeout=60, interval=0.5, message="no KV-cache events arrived")

        prompt = long_prompt()
        body = {"messages": [{"role": "user", "content": prompt}]}
        ids = prompt_token_ids(vllm_server.model, body)
        # Rendered and tokenized as vLLM does it.
        tokenized = httpx.post(
            vllm_server.root + "/tokenize",
            json={"model": UPSTREAM_MODEL, **body, "add_generation_prompt": True},
            timeout=30,
        ).json()
        assert ids == tokenized["tokens"]
        whole = len(ids) // BLOCK
        assert whole >= 2

        before = held_blocks(web, vllm_server.events)
        precise_id = str(acme_backends["precise"].id)
        first = ask(acme_client, prompt, **{"X-Backend-Id": precise_id})
        assert first.usage.input_tokens == len(ids)
        # The events arrived: the index holds at least the prompt's blocks more.
        wait_until(
            lambda: held_blocks(web, vllm_server.events) >= before + whole,
            timeout=20,
            message="the prompt's blocks never reached the index",
        )

        second = ask(acme_client, prompt)
        assert second.switchyard["backend"]["name"] == "precise"
        assert second.usage.input_tokens_details.cached_tokens >= whole * BLOCK
        (scored,) = wait_rows(1, organisation=acme, response_id=second.id)
        # reuse = 1: every whole block of the prompt, as the events reported.
        assert scored.route_reason == "prefix"
        assert scored.prefix_reused_tokens == whole * BLOCK

        # Globex's same prompt carries another salt: nothing of Acme's counts.
        third = ask(globex_client, prompt)
        (row,) = wait_rows(1, organisation=globex, response_id=third.id)
        assert row.prefix_reused_tokens == 0 and row.route_reason != "prefix"
        assert row.cached_tokens == 0
    finally:
        web.stop()
