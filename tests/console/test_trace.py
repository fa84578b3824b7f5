"""Request traces: the search box, every field, the timing bar, 499s, and
support staff reading across organisations."""

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.console.conftest import usage_row

pytestmark = pytest.mark.django_db


def test_the_search_box_opens_the_trace_of_a_request_id(as_user, estates):
    row = estates["acme"].row
    client = as_user("bob")
    response = client.get(reverse("console:trace_search"), {"q": f"  {row.request_id}  "})
    assert response.status_code == 302
    assert response.url == reverse("console:trace", args=[row.request_id])


def test_the_trace_shows_every_field_and_the_timing_breakdown(as_user, estates, crew):
    row = usage_row(
        crew["acme"],
        api_key=estates["acme"].key,
        key_prefix=estates["acme"].key.prefix,
        backend=estates["acme"].backend,
        backend_name="acme-gpu",
        stream=True,
        status=200,
        input_tokens=1234,
        cached_tokens=1000,
        output_tokens=56,
        reasoning_tokens=7,
        queue_wait_ms=100.0,
        ttft_ms=300.0,
        duration_ms=1000.0,
        tokens_per_second=80.0,
        attempts=2,
        notices=[{"code": "hosted_tools_dropped", "message": "web_search was dropped"}],
        client_ip="10.1.2.3",
        user_agent="codex_exec/0.171",
    )
    response = as_user("dave").get(reverse("console:trace", args=[row.request_id]))
    body = response.content.decode()
    for text in (
        str(row.request_id),
        "acme-gpu",
        "acme key",
        "1234",
        "1000 cached",
        "7 reasoning",
        "hosted_tools_dropped",
        "web_search was dropped",
        "10.1.2.3",
        "codex_exec/0.171",
        "80.0 tokens/s",
    ):
        assert text in body, text
    segments = {s["css"]: s for s in response.context["timing"]["segments"]}
    assert segments["queue"]["ms"] == 100.0
    assert segments["prefill"]["ms"] == 200.0
    assert segments["generation"]["ms"] == 700.0
    assert segments["generation"]["pct"] == 70.0


def test_a_499_says_the_client_disconnected_and_when(as_user, crew):
    finished = timezone.now() - timedelta(minutes=1)
    row = usage_row(
        crew["acme"],
        status=499,
        note="Client disconnected",
        stream=True,
        ttft_ms=150.0,
        duration_ms=2500.0,
        output_tokens=42,
        finished_at=finished,
    )
    body = as_user("bob").get(reverse("console:trace", args=[row.request_id])).content.decode()
    assert "The client disconnected." in body
    assert finished.strftime("%H:%M:%S") in body
    assert "2500 ms after the request arrived" in body
    assert "42 output tokens had been produced" in body


def test_an_error_row_shows_the_error(as_user, crew):
    row = usage_row(
        crew["acme"],
        status=503,
        error_code="no_backend",
        error_message="No backend is online",
        ttft_ms=None,
    )
    body = as_user("bob").get(reverse("console:trace", args=[row.request_id])).content.decode()
    assert "no_backend" in body and "No backend is online" in body
    assert "No token produced" in body


def test_searching_an_unknown_or_malformed_id_explains(as_user, estates):
    client = as_user("bob")
    missing = client.get(reverse("console:trace_search"), {"q": str(uuid.uuid4())})
    assert missing.status_code == 404 and "No request" in missing.content.decode()
    malformed = client.get(reverse("console:trace_search"), {"q": "<script>"})
    assert malformed.status_code == 404 and "is not a request id" in malformed.content.decode()
    assert "<script>" not in malformed.content.decode()


def test_support_staff_find_any_organisations_request_read_only(as_user, estates):
    client = as_user("sam")
    globex = estates["globex"].row
    found = client.get(reverse("console:trace_search"), {"q": str(globex.request_id)})
    assert found.status_code == 302 and found.url == reverse(
        "console:support_trace", args=[globex.request_id]
    )
    page = client.get(found.url)
    assert page.status_code == 200
    body = page.content.decode()
    assert "read-only support view" in body and "Globex" in body
    assert '<form method="post" action="/console/keys' not in body
    listing = client.get(reverse("console:support"), {"organisation": "globex"})
    assert {r.request_id for r in listing.context["page"]} == {globex.request_id}
    everything = client.get(reverse("console:support"))
    assert {r.request_id for r in everything.context["page"]} >= {
        globex.request_id,
        estates["acme"].row.request_id,
    }


def test_support_staff_without_membership_cannot_change_anything(as_user, estates):
    client = as_user("sam")
    assert client.get(reverse("console:dashboard")).url == reverse("console:support")
    assert (
        client.post(reverse("console:key_revoke", args=[estates["acme"].key.id])).status_code == 302
    )
    estates["acme"].key.refresh_from_db()
    assert estates["acme"].key.revoked_at is None


@pytest.mark.parametrize("who", ["alice", "erin", "bob", "dave"])
def test_members_are_not_support_staff(as_user, estates, who):
    client = as_user(who)
    globex = estates["globex"].row
    assert client.get(reverse("console:support")).status_code == 404
    assert client.get(reverse("console:support_trace", args=[globex.request_id])).status_code == 404


def test_a_superuser_is_support_staff(client, estates):
    from django.contrib.auth.models import User

    root = User.objects.create_superuser("root@example.com", "root@example.com", "root-password-1")
    client.force_login(root)
    assert (
        client.get(
            reverse("console:support_trace", args=[estates["globex"].row.request_id])
        ).status_code
        == 200
    )


def test_the_trace_says_what_kind_of_request_it_was(as_user, crew):
    acme = crew["acme"]
    poll = usage_row(acme, method="GET", endpoint="/responses/resp_0a1b2c3d", model="")
    cancel = usage_row(acme, endpoint="/responses/resp_0a1b2c3d/cancel", model="")
    other = usage_row(acme, method="GET", endpoint="/responses/resp_ffff0000", model="")
    compaction = usage_row(acme, endpoint="/responses/compact")
    client = as_user("alice")

    def page(row) -> str:
        return client.get(reverse("console:trace", args=[row.request_id])).content.decode()

    body = page(poll)
    assert "Poll of a response <code>resp_0a1b2c3d</code>" in body
    link = "/console/usage/?endpoint=/responses/resp_0a1b2c3d"
    assert link in body
    listed = client.get(link).context["page"]
    assert {row.request_id for row in listed} == {poll.request_id, cancel.request_id}
    assert other.request_id not in {row.request_id for row in listed}
    assert "Cancel of a background response" in page(cancel)
    assert '<dd id="trace-kind">Compaction</dd>' in page(compaction)
    prefixed = usage_row(acme, endpoint="/v1/responses")
    assert '<dd id="trace-kind">Response</dd>' in page(prefixed)
    made = usage_row(acme, endpoint="/responses", response_id="resp_0a1b2c3d")
    assert "Response <code>resp_0a1b2c3d</code>" in page(made)
    queued = usage_row(acme, endpoint="/responses", response_id="resp_0a1b2c3d", background=True)
    body = page(queued)
    assert "Background response <code>resp_0a1b2c3d</code>" in body
    assert link in body  # its polls and its cancel


def test_no_rate_for_an_answer_that_came_in_one_piece(as_user, crew):
    row = usage_row(
        crew["acme"],
        endpoint="/responses/compact",
        ttft_ms=400.0,
        duration_ms=400.08,
        output_tokens=7,
        tokens_per_second=87732.0,
    )
    body = as_user("alice").get(reverse("console:trace", args=[row.request_id])).content.decode()
    assert "tokens/s" not in body and "87732" not in body
    streamed = usage_row(crew["acme"], ttft_ms=100.0, duration_ms=1100.0, tokens_per_second=20.0)
    body = as_user("alice").get(reverse("console:trace", args=[streamed.request_id])).content
    assert "20.0 tokens/s" in body.decode()
