"""The new-audit form: clear messages for bad input, nothing created, and a quota that holds under a race."""


import pytest
from django.urls import reverse

from audits.models import Audit, Site
from tests.dashboard.posting import post_at_once

pytestmark = pytest.mark.django_db

GOOD = {
    "start_url": "https://www.example.com/", "max_pages": "500", "max_depth": "10", "concurrency": "8",
    "rate": "", "include_patterns": "", "exclude_patterns": "", "respect_robots": "on",
    "check_external": "on", "user_agent": "",
}


def post(client, follow=False, **changes):
    return client.post(reverse("audit-new"), {**GOOD, **changes}, follow=follow)


def field_error(response, field):
    return " ".join(response.context["form"].errors.get(field, []))


def test_it_shows_the_form_with_defaults(owner_client):
    response = owner_client.get(reverse("audit-new"))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'name="start_url"' in body and 'value="500"' in body and "csrfmiddlewaretoken" in body


def test_it_offers_javascript_rendering_and_keeps_the_choice(owner_client):
    assert 'name="render"' in owner_client.get(reverse("audit-new")).content.decode()
    assert post(owner_client, render="auto").status_code == 302
    audit = Audit.objects.get()
    assert audit.render == "auto" and audit.site.render == "auto"


def test_it_creates_a_queued_audit_and_goes_to_its_page(owner_client, owner):
    response = post(owner_client, include_patterns="^https://www\\.example\\.com/blog/\n\n", rate="2.5")
    audit = Audit.objects.get()
    assert response.status_code == 302 and response["Location"] == audit.get_absolute_url()
    assert audit.owner == owner and audit.status == Audit.Status.QUEUED
    assert audit.start_url == "https://www.example.com/"
    assert audit.include_patterns == "^https://www\\.example\\.com/blog/" and audit.rate == 2.5
    assert audit.respect_robots and audit.check_external and not audit.allow_private


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"start_url": "http://exa mple.com/"}, "start_url", "not a valid web address"),
    ({"start_url": "https://example.com:99999/"}, "start_url", "not a valid web address"),
    ({"start_url": "ftp://www.example.com/"}, "start_url", "Only http:// and https://"),
    ({"start_url": "javascript:alert(1)"}, "start_url", "Only http:// and https://"),
    ({"start_url": "www.example.com"}, "start_url", "including http:// or https://"),
    ({"start_url": "https://ann:s3cret@www.example.com/"}, "start_url", "holds a user name or password"),
    ({"start_url": "https://ann@www.example.com/"}, "start_url", "Access screen"),
    # 1,020 characters typed, 6,020 once percent-encoded: over the column's 2,048.
    ({"start_url": "https://www.example.com/" + "é" * 1000}, "start_url", "6,024 characters long once encoded"),
    ({"start_url": "https://nosuchhost.invalid/"}, "start_url", "does not resolve"),
    ({"start_url": "http://127.0.0.1:8000/admin/"}, "start_url", "SITEWARD_ALLOW_PRIVATE"),
    ({"start_url": "http://localhost/"}, "start_url", "loopback"),
    ({"start_url": "https://intranet.example.com/"}, "start_url", "private"),
    ({"start_url": "http://169.254.169.254/latest/meta-data/"}, "start_url", "SITEWARD_ALLOW_PRIVATE"),
    ({"max_pages": "0"}, "max_pages", "greater than or equal to 1"),
    ({"max_pages": "100000000"}, "max_pages", "less than or equal to 100000"),
    ({"max_depth": "-1"}, "max_depth", "greater than or equal to 0"),
    ({"concurrency": "500"}, "concurrency", "less than or equal to 32"),
    ({"rate": "0"}, "rate", "greater than or equal to 0.1"),
    ({"include_patterns": "blog/(unclosed"}, "include_patterns", "blog/(unclosed"),
    ({"exclude_patterns": "ok\n*bad"}, "exclude_patterns", "*bad"),
    ({"user_agent": "Bot\r\nX-Injected: 1"}, "user_agent", "control characters"),
])
def test_it_refuses_bad_input_with_a_message_next_to_the_field(owner_client, changes, field, words):
    response = post(owner_client, **changes)
    assert response.status_code == 400
    assert words in field_error(response, field)
    # The message is rendered next to its field, and nothing was created.
    assert f'id="id_{field}_error"' in response.content.decode()
    assert Audit.objects.count() == 0


def test_it_accepts_loopback_targets_when_private_targets_are_allowed(owner_client, allow_private):
    response = post(owner_client, start_url="http://127.0.0.1:8123/")
    assert response.status_code == 302
    audit = Audit.objects.get()
    assert audit.allow_private and audit.start_url == "http://127.0.0.1:8123/"


def test_it_refuses_past_the_running_audit_quota_with_429(owner_client, owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_RUNNING_AUDITS_PER_USER": 2}
    assert post(owner_client, start_url="https://www.example.com/one").status_code == 302
    assert post(owner_client, start_url="https://www.example.com/two").status_code == 302
    response = post(owner_client, start_url="https://www.example.com/three")
    assert response.status_code == 429
    assert "already have 2 audits queued or running" in response.content.decode()
    assert Audit.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_it_accepts_exactly_the_quota_from_twenty_concurrent_submissions(owner, allow_private, settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_RUNNING_AUDITS_PER_USER": 3}
    forms = [{**GOOD, "start_url": f"http://127.0.0.1:9/{n}"} for n in range(20)]  # twenty sites
    assert post_at_once(owner, forms, reverse("audit-new")) == [302] * 3 + [429] * 17
    assert Audit.objects.filter(owner=owner).count() == 3


def test_the_form_opened_from_a_site_holds_its_saved_settings(owner_client, owner, client, django_user_model):
    post(owner_client, max_pages="2000", exclude_patterns="/private/", check_external="", title_max="70")
    site = Site.objects.get()
    page = owner_client.get(reverse("site-detail", args=[site.pk])).content.decode()
    assert f'href="{reverse("audit-new")}?site={site.pk}"' in page
    form = owner_client.get(reverse("audit-new"), {"site": site.pk}).context["form"]
    assert (form["start_url"].value(), form["max_pages"].value(), form["exclude_patterns"].value(),
            form["check_external"].value(), form["title_max"].value()) == (site.start_url, 2000, "/private/", False, 70)
    # Another person's site, or no number, opens the empty form.
    client.force_login(django_user_model.objects.create_user("mallory", password="x"))
    assert client.get(reverse("audit-new"), {"site": site.pk}).context["form"]["start_url"].value() is None
    assert owner_client.get(reverse("audit-new"), {"site": "²"}).context["form"]["max_pages"].value() == 500


def test_an_audit_that_changes_a_sites_saved_settings_says_which(owner_client):
    """A quick look with the form's defaults would silently reset what the nightly runs crawl by."""
    post(owner_client, max_pages="2000", exclude_patterns="/private/", title_max="70")
    Audit.objects.update(status=Audit.Status.COMPLETED)
    response = post(owner_client, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    assert any("max pages 2,000 → 500" in m and "exclude patterns changed" in m
               and "longest title 70 → 60" in m.lower() for m in shown), shown
    Audit.objects.update(status=Audit.Status.COMPLETED)
    again = [str(m) for m in post(owner_client, follow=True).context["messages"]]
    assert not any("saved settings" in m for m in again)


@pytest.mark.parametrize(("start_url", "shown", "words"), [
    ("https://ann:hunter2@www.example.com/login", "https://www.example.com/login", "holds a user name or password"),
    ("ann:hunter2@www.example.com/", "www.example.com/", "including http:// or https://"),
    ("ftp://ann:hunter2@www.example.com/", "ftp://www.example.com/", "Only http:// and https://"),
    ("https://ann@x:hunter2@www.example.com/", "https://www.example.com/", "ambiguous '@'"),
], ids=["userinfo", "no_scheme", "other_scheme", "two_at_signs"])
def test_a_refused_start_url_is_shown_back_without_its_user_name_and_password(owner_client, start_url, shown, words):
    response = post(owner_client, start_url=start_url)
    assert response.status_code == 400 and words in field_error(response, "start_url")
    body = response.content.decode()
    assert "hunter2" not in body and "ann" not in field_error(response, "start_url")
    assert f'value="{shown}"' in body
    assert not Audit.objects.exists()


@pytest.mark.parametrize("start_url", [
    "https://ann:hunt/er2@www.example.com/",
    "https://ann:hunt?er2@www.example.com/",
    "https://ann:hunt#er2@www.example.com/",
])
def test_a_password_with_a_raw_slash_question_mark_or_hash_is_not_shown_back_and_the_error_says_to_encode_it(
        owner_client, start_url):
    # Cut short there, the password reads as a port: the error names the fix and quotes none of it.
    response = post(owner_client, start_url=start_url)
    error = field_error(response, "start_url")
    assert response.status_code == 400 and "percent-encoded (%2F, %3F, %23)" in error
    body = response.content.decode()
    assert "hunt" not in body and "er2" not in body
    assert 'value="https://www.example.com/"' in body
    assert not Audit.objects.exists()


def test_a_password_cut_short_is_taken_out_up_to_its_own_at_sign_not_one_further_on(owner_client):
    # An e-mail address in the query is part of the address, not of the login.
    response = post(owner_client, start_url="https://ann:hunt/er2@www.example.com/?to=me@other.example/")
    assert response.status_code == 400
    body = response.content.decode()
    assert "hunt" not in body and "er2" not in body
    assert 'value="https://www.example.com/?to=me@other.example/"' in body


def test_a_cut_short_password_holding_an_at_sign_and_a_slash_is_not_shown_back_at_all(owner_client):
    # Which "@" ended the login cannot be told: nothing of the field is shown rather than part of the password.
    response = post(owner_client, start_url="https://ann:p/w@x/yz@www.example.com/")
    assert response.status_code == 400
    body = response.content.decode()
    assert "x/yz" not in body and "p/w" not in body


def test_a_cut_short_password_whose_digits_make_no_port_is_not_shown_back(owner_client):
    # 271828 is past the last port: the text after "ann:" is a password cut at its "/", not a port.
    response = post(owner_client, start_url="https://ann:271828/18@www.example.com/")
    assert response.status_code == 400
    body = response.content.decode()
    assert "271828" not in body and 'value="https://www.example.com/"' in body
