"""The hourly creation limit per network address (RELIABILITY row 49): many people behind one
address are held to it together, under a race too, on every path a person starts an audit by;
other addresses, schedules and the command are not."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from audits.models import Audit
from audits.services import create_audit
from tests.factories import make_audit, make_finished_audit

from .posting import post_at_once
from .test_new_audit import GOOD

pytestmark = pytest.mark.django_db

ADDRESS_FULL = ("3 audits have been started from your network address in the last hour, "
                "the most allowed for one address; try again in")


@pytest.fixture
def three_an_address(settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_RUNNING_AUDITS_PER_USER": 100, "MAX_AUDITS_PER_HOUR": 100,
                         "MAX_AUDITS_PER_HOUR_PER_ADDRESS": 3}


def people(count: int) -> list:
    User = get_user_model()
    return [User.objects.create_user(f"person-{n}", password="pass-123456789") for n in range(count)]


def client_of(person, address: str = "127.0.0.1", **extra) -> Client:
    client = Client(REMOTE_ADDR=address, **extra)
    client.force_login(person)
    return client


def new_audit_from(client, n: int):
    return client.post(reverse("audit-new"), {**GOOD, "start_url": f"https://www.example.com/{n}"})


def test_people_sharing_an_address_are_refused_together_past_its_limit_with_429(three_an_address):
    first, second, third, fourth = people(4)
    assert new_audit_from(client_of(first), 1).status_code == 302
    assert new_audit_from(client_of(second), 2).status_code == 302
    assert new_audit_from(client_of(third), 3).status_code == 302
    response = new_audit_from(client_of(fourth), 4)
    assert response.status_code == 429 and ADDRESS_FULL in response.content.decode()
    assert 0 < int(response["Retry-After"]) <= 3600
    assert not Audit.objects.filter(owner=fourth).exists()
    # Another address is another count, and each audit says where it came from.
    assert new_audit_from(client_of(fourth, "192.0.2.7"), 4).status_code == 302
    assert sorted(Audit.objects.values_list("created_from", flat=True)) == ["127.0.0.1"] * 3 + ["192.0.2.7"]


@pytest.mark.django_db(transaction=True)
def test_twenty_people_posting_at_once_from_one_address_get_exactly_its_limit(three_an_address):
    crowd = people(20)
    forms = [{**GOOD, "start_url": f"https://www.example.com/{n}"} for n in range(20)]
    assert post_at_once(crowd, forms, reverse("audit-new")) == [302] * 3 + [429] * 17
    assert Audit.objects.filter(created_from="127.0.0.1").count() == 3


def test_behind_a_trusted_proxy_the_address_it_saw_is_the_one_counted(three_an_address, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    crowd = people(4)
    for n, person in enumerate(crowd[:3]):
        assert new_audit_from(client_of(person, HTTP_X_FORWARDED_FOR="203.0.113.9"), n).status_code == 302
    refused = new_audit_from(client_of(crowd[3], HTTP_X_FORWARDED_FOR="203.0.113.9"), 3)
    assert refused.status_code == 429
    # What the client itself put before the proxy's entry is not trusted to make a new address.
    spoofed = new_audit_from(client_of(crowd[3], HTTP_X_FORWARDED_FOR="198.51.100.1, 203.0.113.9"), 3)
    assert spoofed.status_code == 429
    assert new_audit_from(client_of(crowd[3], HTTP_X_FORWARDED_FOR="203.0.113.10"), 3).status_code == 302


def test_rerun_follow_ups_and_run_now_count_against_the_address_too(three_an_address):
    owner, other = people(2)
    done = make_finished_audit(owner)
    rerun = client_of(owner).post(reverse("audit-rerun", args=[done.pk]))
    assert rerun.status_code == 302
    Audit.objects.filter(status=Audit.Status.QUEUED).update(status=Audit.Status.COMPLETED)  # one active a site
    assert client_of(owner).post(reverse("audit-delta", args=[done.pk])).status_code == 302
    Audit.objects.filter(status=Audit.Status.QUEUED).update(status=Audit.Status.COMPLETED)
    assert client_of(owner).post(reverse("site-run", args=[done.site_id])).status_code == 302
    Audit.objects.filter(status=Audit.Status.QUEUED).update(status=Audit.Status.COMPLETED)
    assert Audit.objects.filter(created_from="127.0.0.1").count() == 3
    # The fourth, by someone else from the same address, on yet another path.
    theirs = make_finished_audit(other)
    response = client_of(other).post(reverse("audit-validate", args=[theirs.pk]), follow=True)
    assert ADDRESS_FULL in response.content.decode()
    assert not Audit.objects.filter(owner=other, mode=Audit.Mode.VALIDATE).exists()


def test_ipv6_clients_count_by_their_64_so_a_new_address_in_it_is_no_new_allowance(three_an_address):
    crowd = people(5)
    for n, address in enumerate(["2001:db8:aa:bb::1", "2001:db8:aa:bb::2", "2001:db8:aa:bb:abcd:ef01:2345:6789"]):
        assert new_audit_from(client_of(crowd[n], address), n).status_code == 302
    refused = new_audit_from(client_of(crowd[3], "2001:db8:aa:bb:ffff::9"), 3)
    assert refused.status_code == 429 and ADDRESS_FULL in refused.content.decode()
    assert new_audit_from(client_of(crowd[4], "2001:db8:aa:cc::1"), 4).status_code == 302  # another /64
    assert set(Audit.objects.values_list("created_from", flat=True)) == {"2001:db8:aa:bb::", "2001:db8:aa:cc::"}


def test_the_admins_rerun_counts_against_the_address_of_whoever_ran_it(three_an_address, superuser_client):
    (owner,) = people(1)
    done = [make_finished_audit(owner, start_url=f"https://www.example.com/{n}") for n in range(4)]
    url = reverse("admin:audits_audit_changelist")
    superuser_client.post(url, {"action": "rerun_audits", "_selected_action": [a.pk for a in done]}, follow=True)
    assert Audit.objects.filter(created_from="127.0.0.1").count() == 3  # the fourth was refused


def test_schedules_the_command_and_audits_made_before_count_for_no_address(three_an_address):
    (owner,) = people(1)
    for _ in range(3):
        make_audit(owner, status=Audit.Status.COMPLETED)  # no address: not a person's request
    create_audit(owner, trigger=Audit.Trigger.SCHEDULE, start_url="https://scheduled.example/")
    create_audit(owner, enforce_quota=False, trigger=Audit.Trigger.COMMAND, start_url="https://cli.example/")
    assert new_audit_from(client_of(owner), 1).status_code == 302
    assert list(Audit.objects.exclude(created_from=None).values_list("created_from", flat=True)) == ["127.0.0.1"]
