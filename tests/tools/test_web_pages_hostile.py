"""A page the model opens is untrusted, and so is where it points: a page
too big, too slow, compressed, binary, missing, redirecting without end or
to an address the gateway may not reach fails that call alone; the model is
told, the response goes on, and its one row counts the tool error."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx
import pytest
from openai import OpenAI

from accounts.audit import CLI
from responses_api.catalogue.addresses import AddressPolicy
from responses_api.catalogue.services.web_search import web_search_bind
from responses_api.tools.web_page import fetch_page
from tests.conftest import usage_rows, wait_for
from tests.tools.conftest import run_alone

pytestmark = pytest.mark.django_db(transaction=True)


def open_page(url: str) -> str:
    return f"[[call:open_page {json.dumps({'url': url})}]]"


@pytest.fixture
def searxng(search_api, acme, people, settings):
    settings.SWITCHYARD_WEB_SEARCH_TIMEOUT_SECONDS = 1.5
    settings.SWITCHYARD_WEB_PAGE_BYTES = 1024 * 1024
    return web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url, "allow_private": True},
    )


@pytest.mark.parametrize(
    ("path", "told"),
    [
        ("/huge", "larger than 1048576 bytes"),
        ("/slow", "did not load within 1.5 seconds"),
        ("/bomb", "sent compressed, which is refused"),
        ("/image", "image/png, not text or HTML"),
        ("/missing", "HTTP status 404"),
        ("/loop", "redirects more than 3 times"),
        ("/redirect?to=http://169.254.169.254/latest/meta-data/", "address is refused"),
        ("/redirect?to=http://metadata.google.internal/", "address is refused"),
        ("/redirect?to=file:///etc/passwd", "Only an http:// or https:// URL"),
    ],
)
def test_a_hostile_page_fails_the_call_not_the_response(
    client: OpenAI, searxng, page_server, path, told
):
    started = time.monotonic()
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input=open_page(page_server.url + path),
        tools=[{"type": "web_search"}],
    )
    response = raw.parse()
    assert time.monotonic() - started < 10
    assert response.status == "completed"
    opened, message = response.output
    assert (opened.type, opened.status, opened.action.type) == (
        "web_search_call",
        "failed",
        "open_page",
    )
    assert message.content[0].annotations == []
    assert response.output_text.startswith(f"Tool result: Reading {page_server.url}{path} failed")
    assert told in response.output_text
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert row.status == 200
    assert (row.tool_calls, row.tool_errors) == (1, 1)


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data/", "file:///etc/passwd", "ftp://127.0.0.1/x"],
)
def test_a_url_the_gateway_may_not_open_is_refused(client: OpenAI, searxng, url):
    response = client.responses.create(
        model="sim-model",
        input=f"[[call:find_in_page {json.dumps({'url': url, 'pattern': 'key'})}]]",
        tools=[{"type": "web_search"}],
    )
    assert response.output[0].status == "failed"
    assert response.output[0].action.type == "find_in_page"
    assert "refused" in response.output_text or "Only an http://" in response.output_text


def test_private_pages_need_the_binding_s_staff_flag(
    client: OpenAI, search_api, page_server, acme, people, recorder
):
    # The platform lets backends use loopback (the tests' default); a page
    # the model opens is held to the binding's own flag, which is off.
    web_search_bind(
        organisation=people["acme"],
        actor=CLI,
        data={"kind": "searxng", "base_url": search_api.url},
    )
    before = httpx.get(page_server.url + "/stats").json()
    raw = client.responses.with_raw_response.create(
        model="sim-model",
        input=open_page(page_server.url + "/article") + open_page("http://localhost:1/x"),
        tools=[{"type": "web_search"}],
    )
    response = raw.parse()
    assert [item.status for item in response.output[:2]] == ["failed", "failed"]
    told = [m["content"] for m in recorder.last_messages() if m["role"] == "tool"]
    assert len(told) == 2 and all("address is refused" in t for t in told)
    assert httpx.get(page_server.url + "/stats").json() == before
    [row] = wait_for(lambda: usage_rows(request_id=raw.headers["x-request-id"]), timeout=10)
    assert (row.tool_calls, row.tool_errors) == (2, 2)


@dataclass(frozen=True, slots=True)
class LoopbackOnly(AddressPolicy):
    """Private addresses refused but the test server's own loopback, so a
    redirect from a reachable page to a private one can be seen refused."""

    def refusal(self, address: str) -> str | None:
        return None if address == "127.0.0.1" else AddressPolicy.refusal(self, address)


@pytest.mark.parametrize("to", ["http://10.20.30.40/", "http://192.168.1.1:8080/admin"])
def test_a_redirect_to_a_private_address_is_refused_at_its_connect(page_server, to):
    policy = LoopbackOnly(private=False, link_local=False)
    direct, _ = run_alone(
        fetch_page(page_server.url + "/article", policy=policy, timeout=5, max_bytes=65536)
    )
    assert direct.error is None and "Gustave Eiffel" in direct.text
    redirected, _ = run_alone(
        fetch_page(f"{page_server.url}/redirect?to={to}", policy=policy, timeout=5, max_bytes=65536)
    )
    assert redirected.error == "The page's address is refused: it is not on the public internet."


def test_a_redirect_off_the_allowed_domains_is_refused(
    client: OpenAI, searxng, page_server, recorder
):
    response = client.responses.create(
        model="sim-model",
        input=open_page("http://127.0.0.1:1/x")
        + open_page(f"{page_server.url}/redirect?to=http://localhost:{page_server.port}/article"),
        tools=[{"type": "web_search", "filters": {"allowed_domains": ["127.0.0.1"]}}],
    )
    first, second = response.output[:2]
    assert (first.status, second.status) == ("failed", "failed")
    told = [m["content"] for m in recorder.last_messages() if m["role"] == "tool"]
    assert "could not be reached" in told[0]
    assert "not on the domains this search is limited to" in told[1]


def test_another_organisation_has_no_pages_to_open(gateway, searxng, globex, page_server):
    before = httpx.get(page_server.url + "/stats").json()
    response = gateway.openai(globex.key).responses.create(
        model="sim-model",
        input=open_page(page_server.url + "/article") + " [[text:no pages here]]",
        tools=[{"type": "web_search"}],
    )
    assert all(item.type != "web_search_call" for item in response.output)
    assert "hosted_tools_dropped" in [n["code"] for n in response.switchyard["notices"]]
    assert httpx.get(page_server.url + "/stats").json() == before
