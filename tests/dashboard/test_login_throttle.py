"""Failed logins are throttled (django-axes): five for one username from one address lock that pair out."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import RequestFactory
from django.urls import reverse

from config.client_ip import client_address

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.7"
PASSWORD = "owner-pass-123"  # the password tests/conftest.py gives the "owner" fixture


def attempt(client, password, *, username="owner", address=ATTACKER, url=None, **extra):
    return client.post(url or reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR=address, **extra)


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_six_failed_logins_lock_the_user_out_even_with_the_right_password(client, owner):
    for _ in range(4):
        response = attempt(client, "wrong")
        assert response.status_code == 200
        assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content
    # The fifth failure reaches the limit: from now on the lockout page answers.
    for _ in range(2):
        response = attempt(client, "wrong")
        assert response.status_code == 429
    response = attempt(client, PASSWORD)
    assert response.status_code == 429
    assert not logged_in(client)
    page = response.content.decode()
    assert "Too many failed logins" in page
    assert "After 5 failed attempts" in page and "<strong>owner</strong>" in page
    assert "for 15 minutes" in page
    assert 'name="password"' not in page  # no form to keep guessing in


def test_the_lock_is_for_that_username_from_that_address_only(client, owner, stranger):
    for _ in range(6):
        attempt(client, "wrong")
    assert attempt(client, PASSWORD).status_code == 429

    # The same person from elsewhere (someone else cannot lock the owner out of their account)...
    response = attempt(client, PASSWORD, address="198.51.100.20")
    assert response.status_code == 302 and logged_in(client)
    client.logout()
    # ...and another account from the attacker's address still log in.
    response = attempt(client, "stranger-pass-123", username="stranger")
    assert response.status_code == 302 and logged_in(client)


def test_guesses_from_fresh_addresses_of_one_ipv6_64_count_as_one_address(client, owner):
    """One IPv6 client holds a whole /64: a new address for every guess must not reset the count."""
    for n in range(6):
        attempt(client, "wrong", address=f"2001:db8:5:7::{n + 1:x}")
    assert attempt(client, PASSWORD, address="2001:db8:5:7:ffff::1").status_code == 429
    # The next /64 is someone else.
    response = attempt(client, PASSWORD, address="2001:db8:5:8::1")
    assert response.status_code == 302 and logged_in(client)


def test_the_lock_lifts_fifteen_minutes_after_the_last_attempt(client, owner):
    start = datetime.now(UTC)
    with time_machine.travel(start, tick=False):
        for _ in range(6):
            attempt(client, "wrong")
    with time_machine.travel(start + timedelta(minutes=14), tick=False):
        assert attempt(client, PASSWORD).status_code == 429  # still locked, and the wait starts again
    with time_machine.travel(start + timedelta(minutes=14 + 14), tick=False):
        assert attempt(client, PASSWORD).status_code == 429
    with time_machine.travel(start + timedelta(minutes=28 + 16), tick=False):
        response = attempt(client, PASSWORD)
        assert response.status_code == 302 and logged_in(client)


def test_a_success_forgives_earlier_failures(client, owner):
    for _ in range(4):
        attempt(client, "wrong")
    assert attempt(client, PASSWORD).status_code == 302
    client.logout()
    for _ in range(4):
        assert attempt(client, "wrong").status_code == 200
    assert attempt(client, PASSWORD).status_code == 302


def test_the_admin_login_is_throttled_too(client, django_user_model):
    django_user_model.objects.create_superuser("boss", password="boss-pass-123")
    url = reverse("admin:login")
    for _ in range(5):
        attempt(client, "wrong", username="boss", url=url)
    response = attempt(client, "boss-pass-123", username="boss", url=url)
    assert response.status_code == 429
    assert not logged_in(client)


def test_behind_a_proxy_the_client_address_comes_from_x_forwarded_for(client, owner, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    proxy = "127.0.0.1"
    # nginx appends the address it saw; whatever the client put before it is ignored.
    for forged in range(6):
        attempt(client, "wrong", address=proxy, HTTP_X_FORWARDED_FOR=f"10.0.0.{forged}, {ATTACKER}")
    assert attempt(client, PASSWORD, address=proxy, HTTP_X_FORWARDED_FOR=ATTACKER).status_code == 429
    # Another client through the same proxy is not locked out with the attacker.
    response = attempt(client, PASSWORD, address=proxy, HTTP_X_FORWARDED_FOR="198.51.100.20")
    assert response.status_code == 302 and logged_in(client)


@pytest.mark.parametrize(("proxies", "forwarded", "expected"), [
    (0, "10.9.9.9", "127.0.0.1"),  # no proxy configured: the header is anyone's to forge
    (1, "10.9.9.9, 203.0.113.7", "203.0.113.7"),
    (2, "10.9.9.9, 203.0.113.7, 192.0.2.1", "203.0.113.7"),
    (1, None, "127.0.0.1"),  # a request that did not come through the proxy
    (2, "203.0.113.7", "127.0.0.1"),  # fewer hops than proxies: not through the chain
    (1, "203.0.113.7:4711", "127.0.0.1"),  # not an address: the proxy's own counts
    (1, "unknown", "127.0.0.1"),
    (1, " 2001:DB8:0:0::1 ", "2001:db8::1"),  # one spelling of each address
    (1, "::ffff:203.0.113.7", "203.0.113.7"),
])
def test_client_address(settings, proxies, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    request = RequestFactory().get("/", REMOTE_ADDR="127.0.0.1", **extra)
    assert client_address(request) == expected
