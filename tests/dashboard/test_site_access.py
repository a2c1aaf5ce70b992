"""A private site's access screen: secrets are written, sealed, and never shown again."""

import pytest
from django.urls import reverse

from audits.models import SiteAccess
from crawler.credentials import LOGOUT_DEFAULT
from tests.factories import SITE, make_audit

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery"
TOKEN = "tok-9f8e7d6c5b4a"


@pytest.fixture
def site(owner):
    return make_audit(owner).site


def url(site) -> str:
    return reverse("site-access", args=[site.pk])


def save(client, site, **data):
    fields = {"basic_user": "", "basic_password": "", "headers": "", "login_url": "", "login_user_field": "",
              "login_user": "", "login_password_field": "", "login_password": "", "login_success": "",
              "logout_pattern": LOGOUT_DEFAULT, **data}
    return client.post(url(site), fields)


def test_secrets_are_stored_sealed_and_never_rendered_again(owner_client, site):
    response = save(owner_client, site, basic_user="ann", basic_password=PASSWORD, headers=f"X-Api-Key: {TOKEN}")
    assert response.status_code == 302
    access = SiteAccess.objects.get(site=site)
    assert PASSWORD not in access.basic_password and "tok-9f8e" not in access.headers
    creds = access.credentials(f"{SITE}/")
    assert dict(creds.headers)[b"X-Api-Key"] == TOKEN.encode() and b"Authorization" in dict(creds.headers)
    body = owner_client.get(url(site)).content.decode()
    assert PASSWORD not in body and "tok-9f8e" not in body
    assert "set for ann" in body and "set (X-Api-Key)" in body


def test_basic_auth_and_an_authorization_header_together_are_refused(owner_client, site):
    response = save(owner_client, site, basic_user="ann", basic_password=PASSWORD, headers="Authorization: Bearer x")
    assert response.status_code == 400 and "either basic auth or an Authorization header" in response.content.decode()


def test_basic_auth_added_beside_a_stored_authorization_header_is_refused(owner_client, site):
    """The headers box left empty keeps the stored header, which would go out as a second Authorization."""
    assert save(owner_client, site, headers="Authorization: Bearer x").status_code == 302
    response = save(owner_client, site, basic_user="ann", basic_password=PASSWORD)
    assert response.status_code == 400 and "either basic auth or an Authorization header" in response.content.decode()
    assert not SiteAccess.objects.get(site=site).has_basic


def test_an_empty_secret_field_keeps_the_stored_secret_and_clear_removes_it(owner_client, site):
    save(owner_client, site, basic_user="ann", basic_password=PASSWORD)
    save(owner_client, site, basic_user="ann")  # the form shows no password: saving again keeps it
    access = SiteAccess.objects.get(site=site)
    assert access.credentials(f"{SITE}/") is not None and access.has_basic
    save(owner_client, site, clear_basic="on")
    assert not SiteAccess.objects.get(site=site).has_basic


def test_a_login_page_on_another_origin_is_refused_with_the_reason(owner_client, site):
    response = save(owner_client, site, login_url="https://login.other.example/", login_user_field="u",
                    login_user="ann", login_password_field="p", login_password=PASSWORD, login_success="Welcome")
    assert response.status_code == 400
    assert "credentials never leave the site" in response.content.decode()
    assert not SiteAccess.objects.filter(site=site).exists()


def test_a_login_page_address_holding_a_password_is_refused_and_not_stored(owner_client, site):
    # Stored as typed and shown on the access screen, the address would keep the password in the clear.
    address = SITE.replace("://", "://ann:hunter2@") + "/login/"
    response = save(owner_client, site, login_url=address, login_user_field="u", login_user="ann",
                    login_password_field="p", login_password=PASSWORD, login_success="Welcome")
    assert response.status_code == 400 and "holds a user name or password" in response.content.decode()
    assert not SiteAccess.objects.filter(site=site).exists()


@pytest.mark.parametrize("headers, message", [
    ("Host: evil.example", "set by the crawler"),
    ("Proxy-Authorization: Basic eDp5", "is for a proxy"),
    ("no colon", "Name: value"),
    ("\n".join(f"X-Extra-{n}: v" for n in range(21)), "At most 20 extra headers"),
])
def test_a_bad_header_is_refused_next_to_its_field(owner_client, site, headers, message):
    response = save(owner_client, site, headers=headers)
    assert response.status_code == 400 and message in response.content.decode()


def test_a_login_password_is_kept_when_its_field_is_left_empty(owner_client, site):
    login = {"login_url": f"{SITE}/login/", "login_user_field": "username", "login_user": "ann",
             "login_password_field": "password", "login_success": "Log out"}
    save(owner_client, site, login_password=PASSWORD, **login)
    save(owner_client, site, **login)
    form = SiteAccess.objects.get(site=site).login_form()
    assert dict(form.fields) == {"username": "ann", "password": PASSWORD}
    assert PASSWORD not in owner_client.get(url(site)).content.decode()


def test_strangers_get_404_on_the_access_screen_both_ways(stranger_client, site):
    assert stranger_client.get(url(site)).status_code == 404
    assert save(stranger_client, site, basic_user="x", basic_password="y").status_code == 404
    assert not SiteAccess.objects.exists()


def login_fields(**data):
    return {"login_url": f"{SITE}/login/", "login_user_field": "username", "login_user": "ann",
            "login_password_field": "password", "login_success": "Welcome", **data}


def test_a_rejected_save_does_not_render_the_posted_headers_again(owner_client, site):
    response = save(owner_client, site, headers=f"Authorization: Bearer {TOKEN}",
                    **login_fields(login_url="https://login.other.example/", login_password=PASSWORD))
    assert response.status_code == 400
    assert TOKEN not in response.content.decode()


def test_the_screen_says_which_secrets_to_set_again_after_the_key_changed(owner_client, site, settings):
    settings.SITEWARD_FIELD_KEY = "key-one"
    access = SiteAccess(site=site)
    access.set_headers([f"X-Api-Key: {TOKEN}"])
    access.set_login(f"{SITE}/login/", {"username": "ann"}, {"password": PASSWORD}, "Welcome")
    access.save()
    settings.SITEWARD_FIELD_KEY = "key-two"
    response = owner_client.get(url(site))
    assert response.status_code == 200
    assert response.content.decode().count("unreadable since the key changed") == 2


def test_an_unreadable_login_password_must_be_typed_again_and_then_saves(owner_client, site, settings):
    settings.SITEWARD_FIELD_KEY = "key-one"
    access = SiteAccess(site=site)
    access.set_login(f"{SITE}/login/", {"username": "ann"}, {"password": PASSWORD}, "Welcome")
    access.save()
    settings.SITEWARD_FIELD_KEY = "key-two"
    assert save(owner_client, site, **login_fields()).status_code == 400
    assert save(owner_client, site, **login_fields(login_password="new-pass")).status_code == 302
    assert dict(SiteAccess.objects.get(site=site).login_form().fields) == {"username": "ann", "password": "new-pass"}


def shown(client, site) -> dict:
    """What the screen sends back when saved as it is shown."""
    form = client.get(url(site)).context["form"]
    return {name: form[name].value() or "" for name in form.fields if not name.startswith("clear_")}


def test_saving_the_screen_as_shown_keeps_the_login(owner_client, site):
    access = SiteAccess(site=site)
    access.set_login(f"{SITE}/login/", {"username": "ann"}, {"password": PASSWORD}, "Welcome")
    access.save()
    data = shown(owner_client, site)
    assert data["login_password_field"] == "password" and data["login_password"] == ""
    response = owner_client.post(url(site), {**data, "basic_user": "ann", "basic_password": "staging-pw"})
    assert response.status_code == 302
    assert dict(SiteAccess.objects.get(site=site).login_form().fields) == {"username": "ann", "password": PASSWORD}


def test_login_fields_the_screen_does_not_show_survive_a_save_from_it(owner_client, site):
    access = SiteAccess(site=site)  # as `audit --login-field ... --login-secret-field ...` saves it
    access.set_login(f"{SITE}/login/", {"username": "ann", "tenant": "acme"},
                     {"password": PASSWORD, "otp_seed": "seed-1"}, "Welcome")
    access.save()
    data = shown(owner_client, site)
    # One of each is shown, the first by name, on every database.
    assert (data["login_user_field"], data["login_password_field"]) == ("tenant", "otp_seed")
    response = owner_client.post(url(site), {**data, "login_user": "globex"})
    assert response.status_code == 302
    fields = dict(SiteAccess.objects.get(site=site).login_form().fields)
    assert fields == {"username": "ann", "tenant": "globex", "password": PASSWORD, "otp_seed": "seed-1"}


def test_a_rejected_save_asks_again_for_every_secret_typed_since_none_is_shown_back(owner_client, site):
    response = save(owner_client, site, basic_user="ann", basic_password=PASSWORD, headers=f"X-Api-Key: {TOKEN}",
                    **login_fields(login_password=PASSWORD, login_success="(unclosed"))
    assert response.status_code == 400
    errors = response.context["form"].errors
    for name in ("basic_password", "headers", "login_password"):
        assert "type it again" in " ".join(errors[name]), name
    assert not SiteAccess.objects.filter(site=site).exists()


def test_login_fields_without_the_login_pages_address_are_refused_not_dropped(owner_client, site):
    response = save(owner_client, site, login_user_field="username", login_user="ann",
                    login_password_field="password", login_password=PASSWORD)
    assert response.status_code == 400
    assert "needs its page's address" in " ".join(response.context["form"].errors["login_url"])
    assert not SiteAccess.objects.filter(site=site).exists()


def test_a_new_basic_auth_user_needs_a_password_and_a_stored_one_is_kept(owner_client, site):
    response = save(owner_client, site, basic_user="ann")
    assert response.status_code == 400 and "Needed for basic auth." in response.context["form"].errors["basic_password"]
    assert save(owner_client, site, basic_user="ann", basic_password=PASSWORD).status_code == 302
    assert save(owner_client, site, basic_user="bob").status_code == 302  # the stored password goes with the new name
    assert SiteAccess.objects.get(site=site).basic_user == "bob"


@pytest.mark.parametrize("address, shown, message", [
    (SITE.replace("://", "://ann:hunter2@") + "/login/", SITE + "/login/", "holds a user name or password"),
    ("ann:hunter2@shop.example/login/", "shop.example/login/", "Enter a valid URL."),
], ids=["userinfo", "no_scheme"])
def test_a_refused_login_page_address_is_shown_back_without_its_password(owner_client, site, address, shown,
                                                                        message):
    response = save(owner_client, site, login_url=address, login_user_field="u", login_user="ann",
                    login_password_field="p", login_password=PASSWORD, login_success="Welcome")
    body = response.content.decode()
    assert response.status_code == 400 and message in " ".join(response.context["form"].errors["login_url"])
    assert "hunter2" not in body and f'value="{shown}"' in body
