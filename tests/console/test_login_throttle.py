"""The sign-in throttle: five failures lock an account, twenty lock an
address, for the rest of a fifteen-minute window, the right password included."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console.throttle import login_throttle_forget
from tests.support import wait_until

pytestmark = pytest.mark.django_db

LOGIN = "/console/login/"
_used: set[tuple[str, str]] = set()


@pytest.fixture(autouse=True)
def _fresh_counts():
    """Only this file's counts are dropped: the cache is shared (Redis in CI)
    with everything else the test run keeps there."""
    _forget()
    yield
    _forget()


def _forget() -> None:
    for username, ip in _used | {("alice@example.com", "203.0.113.7")}:
        login_throttle_forget(username=username, ip=ip)
    login_throttle_forget(username="root@example.com", ip="127.0.0.1")
    _used.clear()


def _sign_in(client: Client, username: str, password: str, ip: str = "203.0.113.7"):
    _used.add((username, ip))
    return client.post(
        LOGIN, {"username": username, "password": password}, REMOTE_ADDR=ip, follow=False
    )


def test_five_failures_lock_the_account_even_with_the_right_password(people):
    client = Client()
    for _ in range(5):
        response = _sign_in(client, "alice@example.com", "wrong")
        assert response.status_code == 200
        assert "Too many failed sign-in attempts" not in response.content.decode()
    response = _sign_in(client, "alice@example.com", "alice-password-1")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Too many failed sign-in attempts. Try again after" in page
    assert "(in 15 min)" in page
    assert "_auth_user_id" not in client.session


def test_the_lock_is_per_account_and_ends_with_the_window(people, settings):
    settings.SWITCHYARD_LOGIN_WINDOW_SECONDS = 1
    client = Client()
    for _ in range(5):
        _sign_in(client, "ALICE@example.com ", "wrong")
    # Another account from the same address still signs in.
    assert _sign_in(Client(), "bob@example.com", "bob-password-1").status_code == 302
    assert "Too many" in _sign_in(client, "alice@example.com", "alice-password-1").content.decode()
    # The counts expire in the cache itself (Redis's TTL, or the local clock).
    wait_until(
        lambda: _sign_in(client, "alice@example.com", "alice-password-1").status_code == 302,
        timeout=5,
        interval=0.2,
        message="the account stayed locked after its window",
    )


def test_twenty_failures_from_one_address_lock_every_account_there(people):
    client = Client()
    for n in range(20):
        _sign_in(client, f"nobody{n}@example.com", "wrong", ip="198.51.100.9")
    locked = _sign_in(client, "bob@example.com", "bob-password-1", ip="198.51.100.9")
    assert "Too many failed sign-in attempts" in locked.content.decode()
    elsewhere = _sign_in(Client(), "bob@example.com", "bob-password-1", ip="198.51.100.10")
    assert elsewhere.status_code == 302


def test_a_successful_sign_in_clears_the_account_failures(people):
    client = Client()
    for _ in range(4):
        _sign_in(client, "alice@example.com", "wrong")
    assert _sign_in(client, "alice@example.com", "alice-password-1").status_code == 302
    other = Client()
    for _ in range(4):
        _sign_in(other, "alice@example.com", "wrong")
    assert _sign_in(other, "alice@example.com", "alice-password-1").status_code == 302


def test_the_admin_sign_in_shares_the_throttle(people, django_user_model):
    django_user_model.objects.create_superuser("root@example.com", "root@example.com", "root-pw-1")
    client = Client()
    for _ in range(5):
        client.post("/admin/login/", {"username": "root@example.com", "password": "x"})
    response = client.post(
        reverse("admin:login"), {"username": "root@example.com", "password": "root-pw-1"}
    )
    assert response.status_code == 200
    assert "Too many failed sign-in attempts" in response.content.decode()


def test_the_retry_time_is_the_end_of_the_window(people):
    from console.throttle import login_lockout

    for _ in range(5):
        _sign_in(Client(), "alice@example.com", "wrong")
    retry_at = login_lockout(username="alice@example.com", ip=None)
    assert retry_at is not None
    assert timedelta(minutes=14) < retry_at - timezone.now() <= timedelta(minutes=15)
