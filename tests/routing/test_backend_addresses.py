"""A backend URL cannot turn the gateway into a proxy into its own network.

Saving a backend refuses non-public addresses unless the platform allows
them (``SWITCHYARD_BACKEND_ALLOW_PRIVATE``) or platform staff flagged the
backend (``allow_private``); link-local and cloud metadata addresses need
the flag. The same policy holds when a connection is made, so a refused
backend is never connected to. No test here sends traffic anywhere but
loopback, and refusals are asserted by the absence of any connection.
"""

from __future__ import annotations

import asyncio
import io
import socket

import httpx
import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from accounts.audit import CLI, Actor
from admin_api.provision import ProvisionError, apply_document
from responses_api.backends.client import BackendAddressRefused, Upstream
from responses_api.backends.health import probe
from responses_api.catalogue.addresses import address_kind, backend_policy
from responses_api.catalogue.services.backends import backend_create, backend_update
from responses_api.models import Backend
from tests.admin_api.conftest import ADMIN, admin_keys, api, error_of  # noqa: F401
from tests.conftest import server_env, start_daphne, wait_rows
from tests.console.conftest import as_user, crew  # noqa: F401
from tests.ops.test_settings import production_env, show

# --- what each address is ----------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("169.254.10.1", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.254", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("100.127.255.254", "shared (carrier-grade NAT)"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        # IPv6 forms that carry an IPv4 address are judged by it.
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("2002:7f00:1::", "loopback"),
        ("64:ff9b::a9fe:a9fe", "cloud metadata"),
        ("8.8.8.8", None),
        ("172.32.0.1", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_each_address_is_classified(address, kind):
    assert address_kind(address) == kind


# --- saving a backend --------------------------------------------------------


def _create(organisation, url: str, *, actor: Actor = CLI, **extra) -> Backend:
    return backend_create(organisation=organisation, actor=actor, name="gpu", base_url=url, **extra)


def _refusal(organisation, url: str, **extra) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        _create(organisation, url, **extra)
    return caught.value.message_dict


NON_PUBLIC = [
    "http://127.0.0.1:8000/v1",
    "http://127.1.2.3/v1",
    "http://[::1]:8000/v1",
    "http://localhost:8000/v1",
    "http://LOCALHOST./v1",
    "http://10.0.0.7:8080/v1",
    "http://172.20.1.1/v1",
    "https://192.168.0.10/v1",
    "http://[fd12::1]/v1",
    "http://100.64.1.1/v1",
    "http://0.0.0.0:6379/v1",
    "http://[::]:6379/v1",
    "http://224.0.0.1/v1",
    "http://[::ffff:127.0.0.1]:6379/v1",
    "http://[::ffff:7f00:1]/v1",
]
LINK_LOCAL = [
    "http://169.254.169.254/latest/meta-data",
    "http://169.254.1.1/v1",
    "http://[fe80::1]/v1",
    "http://[fd00:ec2::254]/v1",
    "http://100.100.100.200/v1",
    "http://metadata.google.internal/computeMetadata/v1",
    "http://[::ffff:169.254.169.254]/v1",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", NON_PUBLIC + LINK_LOCAL)
def test_a_non_public_address_is_refused_when_the_platform_refuses_them(people, settings, url):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    errors = _refusal(people["acme"], url)
    assert list(errors) == ["base_url"]
    assert "is not allowed" in errors["base_url"][0]
    assert not Backend.objects.exists()


@pytest.mark.django_db
def test_a_refusal_names_the_address_as_given_not_what_it_resolves_to(people, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    message = _refusal(people["acme"], "http://localhost:6379/v1")["base_url"][0]
    assert message.startswith("The backend's address localhost is not allowed")
    assert "resolves to a loopback address" in message and "127.0.0.1" not in message


@pytest.mark.django_db
@pytest.mark.parametrize("url", NON_PUBLIC)
def test_the_platform_setting_opens_private_addresses(people, settings, url):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = True
    assert _create(people["acme"], url).allow_private is False


@pytest.mark.django_db
@pytest.mark.parametrize("url", LINK_LOCAL)
def test_link_local_and_metadata_addresses_stay_refused_with_the_platform_setting(
    people, settings, url
):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = True
    assert "is not allowed" in _refusal(people["acme"], url)["base_url"][0]


@pytest.mark.django_db
@pytest.mark.parametrize("url", NON_PUBLIC + LINK_LOCAL)
def test_the_backends_own_flag_opens_every_address(people, settings, url):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    assert _create(people["acme"], url, allow_private=True).allow_private is True


@pytest.mark.django_db
@pytest.mark.parametrize("allowed", [False, True])
def test_public_addresses_and_names_that_do_not_resolve_are_accepted(people, settings, allowed):
    """A name unknown now may be a backend not yet deployed; its connection
    is checked when it is made."""
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = allowed
    assert _create(people["acme"], "https://8.8.8.8/v1").base_url == "https://8.8.8.8/v1"
    Backend.objects.all().delete()
    assert _create(people["acme"], "http://gpu1.internal:8000/v1").name == "gpu"


@pytest.mark.django_db
@pytest.mark.parametrize("allowed", [False, True])
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://gpu1:8000/v1?api-version=1", "no query"),
        ("http://gpu1:8000/v1?", "no query"),
        ("http://gpu1:8000/v1#x", "fragment"),
        ("http://user:secret@gpu1:8000/v1", "no user name or password"),
        ("http://user@gpu1:8000/v1", "no user name or password"),
        ("ftp://gpu1/v1", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("gopher://127.0.0.1:6379/_", "http:// or https://"),
        ("http:///v1", "valid URL"),
        ("http://2130706433/v1", "four decimal numbers"),
        ("http://127.1/v1", "four decimal numbers"),
        ("http://0x7f.0.0.1/v1", "four decimal numbers"),
    ],
)
def test_a_malformed_base_url_is_refused_naming_base_url(people, settings, allowed, url, says):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = allowed
    errors = _refusal(people["acme"], url, allow_private=True)
    assert list(errors) == ["base_url"] and says in errors["base_url"][0]


# --- who may set the flag ----------------------------------------------------


@pytest.mark.django_db
def test_an_organisation_admin_cannot_set_the_flag(people, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    alice = Actor.console(people["alice"])
    errors = _refusal(people["acme"], "http://10.0.0.7/v1", actor=alice, allow_private=True)
    assert list(errors) == ["allow_private"]
    backend = _create(people["acme"], "http://10.0.0.7/v1", allow_private=True)
    with pytest.raises(ValidationError) as caught:
        backend_update(backend=backend, actor=alice, data={"allow_private": False})
    assert list(caught.value.message_dict) == ["allow_private"]


@pytest.mark.django_db
def test_a_staff_user_can_set_the_flag(people, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    staff = people["charlie"]
    staff.is_staff = True
    staff.save()
    backend = _create(
        people["acme"], "http://10.0.0.7/v1", actor=Actor.console(staff), allow_private=True
    )
    assert backend.allow_private is True


@pytest.mark.django_db
def test_an_admin_moving_a_flagged_backend_loses_the_flag(people, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    backend = _create(people["acme"], "http://10.0.0.7/v1", allow_private=True)
    alice = Actor.console(people["alice"])
    # Other fields change freely; the address staff allowed stays allowed.
    backend_update(backend=backend, actor=alice, data={"max_concurrency": 4})
    backend.refresh_from_db()
    assert backend.allow_private is True and backend.max_concurrency == 4
    with pytest.raises(ValidationError) as caught:
        backend_update(backend=backend, actor=alice, data={"base_url": "http://10.0.0.8/v1"})
    assert list(caught.value.message_dict) == ["base_url"]
    backend_update(backend=backend, actor=alice, data={"base_url": "http://gpu3.internal/v1"})
    backend.refresh_from_db()
    assert backend.allow_private is False and backend.base_url == "http://gpu3.internal/v1"


@pytest.mark.django_db
def test_the_rest_api_shows_the_flag_but_never_takes_it(api, crew, settings):  # noqa: F811
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    client = api("acme")
    body = {"name": "gpu9", "base_url": "http://10.0.0.9:8000/v1", "allow_private": True}
    refused = client.post(f"{ADMIN}/backends", body, format="json")
    assert refused.status_code == 400 and error_of(refused)["param"] == "allow_private"
    body.pop("allow_private")
    private = client.post(f"{ADMIN}/backends", body, format="json")
    assert private.status_code == 400
    error = error_of(private)
    assert error["param"] == "base_url" and "is not allowed" in error["message"]
    queried = client.post(
        f"{ADMIN}/backends", {**body, "base_url": "http://gpu9:8000/v1?x=1"}, format="json"
    )
    assert queried.status_code == 400 and error_of(queried)["param"] == "base_url"
    made = client.post(f"{ADMIN}/backends", {**body, "base_url": "http://gpu9/v1"}, format="json")
    assert made.status_code == 201 and made.json()["allow_private"] is False
    changed = client.patch(
        f"{ADMIN}/backends/{made.json()['id']}", {"allow_private": True}, format="json"
    )
    assert changed.status_code == 400 and error_of(changed)["param"] == "allow_private"
    assert Backend.objects.get(name="gpu9").allow_private is False


FORM = {"name": "gpu2", "base_url": "http://10.0.0.2:8000/v1", "dialect": "vllm"}
FORM.update({"max_concurrency": "8", "enabled": "on"})


@pytest.mark.django_db
def test_the_console_offers_the_flag_to_platform_staff_only(as_user, crew, settings):  # noqa: F811
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    erin = as_user("erin")  # an admin of Acme
    assert "allow_private" not in erin.get(reverse("console:backend_create")).content.decode()
    page = erin.post(reverse("console:backend_create"), {**FORM, "allow_private": "on"})
    assert page.status_code == 200 and "is not allowed" in page.content.decode()
    assert not Backend.objects.exists()

    crew["alice"].is_staff = True
    crew["alice"].save()
    alice = as_user("alice")
    assert "allow_private" in alice.get(reverse("console:backend_create")).content.decode()
    saved = alice.post(reverse("console:backend_create"), {**FORM, "allow_private": "on"})
    assert saved.status_code == 302
    assert Backend.objects.get(name="gpu2").allow_private is True


@pytest.mark.django_db
def test_the_command_line_and_apply_set_the_flag(people, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    out = io.StringIO()
    call_command(
        "add_backend", "--org", "acme", "--name", "local", "--url", "http://127.0.0.1:8081/v1",
        "--allow-private", stdout=out,
    )  # fmt: skip
    assert Backend.objects.get(name="local").allow_private and "allow_private" in out.getvalue()
    document = {
        "organisations": [
            {
                "slug": "acme",
                "backends": [
                    {"name": "lan", "base_url": "http://192.168.1.20/v1", "allow_private": True}
                ],
            }
        ]
    }
    apply_document(document, environ={})
    assert Backend.objects.get(name="lan", organisation__slug="acme").allow_private is True
    document["organisations"][0]["backends"][0]["allow_private"] = False
    with pytest.raises(ProvisionError, match=r"backends\[0\]\.base_url: .* is not allowed"):
        apply_document(document, environ={})


# --- at connect time ---------------------------------------------------------


class Listener:
    """A loopback socket that counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def connections(self) -> int:
        count = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener():
    made = Listener()
    yield made
    made.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_chat_call_to_a_refused_address_makes_no_connection(listener, settings, host):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False

    async def main() -> None:
        upstream = Upstream(
            f"http://{host}:{listener.port}/v1", "sk", backend_policy(allow_private=False)
        )
        try:
            with pytest.raises(BackendAddressRefused, match="is not allowed"):
                await upstream.send_chat({"model": "m", "messages": []})
        finally:
            await upstream.aclose()

    asyncio.run(main())
    assert listener.connections() == 0


def test_a_health_probe_of_a_refused_address_makes_no_connection(listener, settings):
    settings.SWITCHYARD_BACKEND_ALLOW_PRIVATE = False
    result = probe(f"http://localhost:{listener.port}/v1")
    assert not result.ok and "not allowed" in result.error and "loopback" in result.error
    assert listener.connections() == 0
    # The backend's own flag opens it: the probe connects (and times out,
    # as nothing answers there).
    assert not probe(f"http://127.0.0.1:{listener.port}/v1", timeout=0.5, allow_private=True).ok
    assert listener.connections() == 1


@pytest.mark.django_db(transaction=True)
def test_a_backend_saved_while_allowed_is_refused_once_the_platform_refuses(provision, listener):
    """Saved under the embedded default, served by a process that refuses
    private addresses: a 502 naming the backend, and no connection."""
    tenant = provision("acme", f"http://127.0.0.1:{listener.port}/v1", backend_name="lan-gpu")
    server = start_daphne(server_env(SWITCHYARD_BACKEND_ALLOW_PRIVATE="false"))
    try:
        answer = httpx.post(
            server.url + "/v1/responses",
            headers={"authorization": f"Bearer {tenant.key}"},
            json={"model": "sim-model", "input": "hi"},
            timeout=30,
        )
    finally:
        server.stop()
    assert answer.status_code == 502, answer.text
    error = answer.json()["error"]
    assert error["code"] == "backend_address_not_allowed"
    assert "lan-gpu" in error["message"] and "127.0.0.1 is not allowed" in error["message"]
    assert listener.connections() == 0
    assert wait_rows(organisation=tenant.organisation)[0].status == 502


# --- the settings ------------------------------------------------------------


def test_production_refuses_private_backends_and_the_embedded_default_allows_them():
    name = "SWITCHYARD_BACKEND_ALLOW_PRIVATE"
    assert show(production_env(), name) == {name: False}
    assert show(production_env(**{name: "true"}), name) == {name: True}
    embedded = {k: v for k, v in production_env().items() if k in ("PATH", "HOME", "LANG")}
    embedded.update(DJANGO_SETTINGS_MODULE="config.settings")
    assert show(embedded, name) == {name: True}
