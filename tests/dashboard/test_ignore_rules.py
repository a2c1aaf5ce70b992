"""Ignore rules per site: made on the site page or from the issues table, applied now and at every later finalize."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audits.finalize import run_finalize
from audits.forms import IgnoreRuleForm
from audits.models import Audit, IgnoreRule, Issue
from tests.factories import SITE, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit(owner):
    return make_finished_audit(owner)


def add_rule(client, site, code, pattern=""):
    return client.post(reverse("site-rule-add", args=[site.pk]), {"code": code, "pattern": pattern})


def pattern_field(response) -> str:
    """The pattern field's markup, shown with its error (audits/_field.html)."""
    body = response.content.decode()
    start = body.index('class="field has-error" id="field-pattern"')
    return body[start:body.index("</p>", start)]


def ignored(audit) -> set[tuple[str, str]]:
    return set(Issue.objects.filter(audit=audit, review="ignored").values_list("code", "url"))


def test_a_rule_added_on_the_site_page_ignores_matching_open_issues_of_the_latest_audit(owner_client, audit, owner):
    older = make_finished_audit(owner)  # created later, so it is the site's latest
    Issue.objects.filter(audit=older, code="broken_link_internal", url=f"{SITE}/").update(review="reviewed")
    response = add_rule(owner_client, audit.site, "broken_link_internal", r"^https://shop\.example/$|/about$")
    assert response.status_code == 302 and response["Location"].endswith("#ignore-rules")
    # The person's "reviewed" stays; the other broken link, on /about, is ignored; the first audit is untouched.
    assert ignored(older) == {("broken_link_internal", f"{SITE}/about")}
    assert not ignored(audit)
    older.refresh_from_db()
    assert older.issues_critical == 2
    rule = IgnoreRule.objects.get()
    assert (rule.site, rule.created_by) == (audit.site, owner)
    page = owner_client.get(response["Location"]).content.decode()
    assert "Rule added: 1 issue ignored in audit" in page
    assert "Broken internal link" in page and r"^https://shop\.example/$|/about$" in page


def test_a_rule_added_while_the_latest_audit_is_a_validation_also_reaches_the_audit_the_site_shows(
        owner_client, audit, owner):
    make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=audit)  # the site's latest
    before = audit.issues_critical
    add_rule(owner_client, audit.site, "broken_link_internal")
    assert {code for code, _ in ignored(audit)} == {"broken_link_internal"}
    audit.refresh_from_db()
    assert audit.issues_critical < before


def test_a_rule_without_a_pattern_ignores_the_type_on_every_url(owner_client, audit):
    add_rule(owner_client, audit.site, "broken_link_internal")
    assert ignored(audit) == {("broken_link_internal", f"{SITE}/"), ("broken_link_internal", f"{SITE}/about")}


@pytest.mark.parametrize("pattern, words", [
    ("(a)\\1", "RE2"),  # a backreference: Python's re would take it, the crawl's engine does not
    ("/blog/(?!draft)", "RE2"),
    ("[unclosed", "missing ]"),
    ("x" * 501, "at most 500 characters"),
])
def test_a_pattern_the_crawl_engine_cannot_run_is_refused_next_to_the_field(owner_client, audit, pattern, words):
    response = add_rule(owner_client, audit.site, "title_length", pattern)
    assert response.status_code == 400
    assert words in pattern_field(response)
    assert not IgnoreRule.objects.exists() and not ignored(audit)


def test_the_same_rule_twice_is_refused(owner_client, audit):
    add_rule(owner_client, audit.site, "title_length", "/about")
    response = add_rule(owner_client, audit.site, "title_length", "/about")
    assert response.status_code == 400 and "The site already has this rule." in response.content.decode()
    assert IgnoreRule.objects.count() == 1


@pytest.mark.parametrize("where", ["site", "issues"])
def test_a_double_click_saving_the_same_rule_twice_at_once_is_refused_not_a_server_error(
        owner_client, audit, monkeypatch, where):
    clean = IgnoreRuleForm.clean

    def clean_while_the_other_click_saves(form):
        data = clean(form)
        IgnoreRule.objects.get_or_create(site=audit.site, code="title_length", pattern="/about")
        return data

    monkeypatch.setattr(IgnoreRuleForm, "clean", clean_while_the_other_click_saves)
    if where == "site":
        response = add_rule(owner_client, audit.site, "title_length", "/about")
    else:
        response = owner_client.post(reverse("issue-ignore-rule", args=[audit.pk]),
                                     {"code": "title_length", "pattern": "/about"})
    assert response.status_code == 400 and "The site already has this rule." in response.content.decode()
    assert IgnoreRule.objects.count() == 1


def test_a_rule_applies_to_every_later_audit_of_the_site_when_it_finalizes(owner_client, audit, owner):
    add_rule(owner_client, audit.site, "title_length", "/about$")
    later = make_finished_audit(owner, status=Audit.Status.FINALIZING)
    blog = make_page(later, f"{SITE}/blog/post", title="Post", depth=2)
    make_issue(later, "title_length", blog.url, page=blog)
    elsewhere = make_finished_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.FINALIZING)

    assert run_finalize(later.pk) and run_finalize(elsewhere.pk)
    later.refresh_from_db()
    assert later.status == Audit.Status.COMPLETED
    assert ignored(later) == {("title_length", f"{SITE}/about")}
    assert later.issues_notice == 1  # the /blog/post one; the ignored one left the counter
    assert not ignored(elsewhere)  # another site's audit: its own rules (none)


def test_a_rule_offered_from_an_older_audits_table_applies_to_it_and_to_the_latest_and_returns_to_the_filters(
        owner_client, audit, owner):
    newer = make_finished_audit(owner)
    issue = Issue.objects.get(audit=audit, code="title_length")
    listing = owner_client.get(reverse("issue-list", args=[audit.pk]), {"severity": "notice"}).content.decode()
    # Each row offers its type and its folder, escaped and anchored, through the list's own URL.
    suggestion = "rule_code=title_length&amp;rule_pattern=%5Ehttps%3A%2F%2Fshop%5C.example%2F"
    assert f"?severity=notice&amp;{suggestion}#ignore-rule" in listing
    filled = owner_client.get(reverse("issue-list", args=[audit.pk]),
                              {"severity": "notice", "rule_code": "title_length", "rule_pattern": r"^https://shop\.example/"})
    body = filled.content.decode()
    assert '<details class="card" id="ignore-rule" open>' in body
    assert 'value="^https://shop\\.example/"' in body and '<option value="title_length" selected>' in body

    url = reverse("issue-ignore-rule", args=[audit.pk]) + "?severity=notice&rule_code=title_length"
    response = owner_client.post(url, {"code": "title_length", "pattern": r"^https://shop\.example/"})
    assert response.status_code == 302
    assert response["Location"] == reverse("issue-list", args=[audit.pk]) + "?severity=notice"
    assert ignored(audit) == ignored(newer) == {("title_length", issue.url)}
    assert IgnoreRule.objects.get().site_id == audit.site_id
    audit.refresh_from_db()
    newer.refresh_from_db()
    assert audit.issues_notice == newer.issues_notice == 0
    page = owner_client.get(response["Location"]).content.decode()
    assert "1 issue of this audit ignored and 1 in the site&#x27;s latest audit" in page


def test_a_rule_made_on_a_validations_table_also_reaches_the_complete_audit_the_site_shows(owner_client, audit, owner):
    check = make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=audit)
    before = audit.issues_critical
    owner_client.post(reverse("issue-ignore-rule", args=[check.pk]), {"code": "broken_link_internal", "pattern": ""})
    assert {code for code, _ in ignored(audit)} == {code for code, _ in ignored(check)} == {"broken_link_internal"}
    audit.refresh_from_db()
    assert audit.issues_critical < before


def test_a_rule_returns_to_the_filters_the_table_shows_now_not_those_the_page_opened_with(owner_client, audit):
    # htmx swaps the table (and its list_query input, tied to the rule form) on
    # every filter change; the rule form's action keeps the first query.
    table = owner_client.get(reverse("issue-list", args=[audit.pk]), {"severity": "critical", "page": "1"},
                             HTTP_HX_REQUEST="true").content.decode()
    assert '<input type="hidden" name="list_query" value="severity=critical&amp;page=1" form="ignore-rule-form">' \
        in table
    url = reverse("issue-ignore-rule", args=[audit.pk]) + "?severity=notice"
    response = owner_client.post(url, {"code": "title_length", "pattern": r"^https://shop\.example/",
                                       "list_query": "severity=critical&page=1&rule_code=title_length"})
    assert response["Location"] == reverse("issue-list", args=[audit.pk]) + "?severity=critical&page=1"
    # A refused rule is shown beside the table as it was filtered.
    refused = owner_client.post(url, {"code": "title_length", "pattern": "(a)\\1", "list_query": "severity=warning"})
    body = refused.content.decode()
    assert refused.status_code == 400 and '<option value="warning" selected>' in body
    assert 'value="severity=warning" form="ignore-rule-form"' in body


def test_a_bad_pattern_from_the_issues_table_is_shown_in_the_open_form(owner_client, audit):
    response = owner_client.post(reverse("issue-ignore-rule", args=[audit.pk]), {"code": "title_length",
                                                                                 "pattern": "(a)\\1"})
    body = response.content.decode()
    assert response.status_code == 400 and '<details class="card" id="ignore-rule" open>' in body
    assert "RE2" in pattern_field(response) and not IgnoreRule.objects.exists()


def test_deleting_a_rule_keeps_what_it_ignored_and_only_the_owner_can(owner_client, audit, stranger, client):
    add_rule(owner_client, audit.site, "title_length")
    rule = IgnoreRule.objects.get()
    other_site_rule = IgnoreRule.objects.create(site=make_finished_audit(stranger, start_url="https://x.example/").site,
                                                code="title_length")
    # Another site's rule through this site's URL finds nothing.
    owner_client.post(reverse("site-rule-delete", args=[audit.site_id, other_site_rule.pk]))
    assert IgnoreRule.objects.filter(pk=other_site_rule.pk).exists()

    client.force_login(stranger)
    assert client.post(reverse("site-rule-delete", args=[audit.site_id, rule.pk])).status_code == 404
    assert client.post(reverse("site-rule-add", args=[audit.site_id]), {"code": "http_4xx"}).status_code == 404
    assert client.post(reverse("issue-ignore-rule", args=[audit.pk]), {"code": "http_4xx"}).status_code == 404
    assert IgnoreRule.objects.filter(site=audit.site).count() == 1

    owner_client.force_login(audit.owner)
    response = owner_client.post(reverse("site-rule-delete", args=[audit.site_id, rule.pk]), follow=True)
    assert not IgnoreRule.objects.filter(pk=rule.pk).exists()
    assert "stay ignored" in response.content.decode() and ignored(audit) == {("title_length", f"{SITE}/about")}


def test_the_site_page_reads_its_rules_and_their_authors_in_a_fixed_number_of_queries(owner_client, audit, owner):
    def queries_with(rules: int) -> int:
        for n in range(IgnoreRule.objects.filter(site=audit.site).count(), rules):
            IgnoreRule.objects.create(site=audit.site, code="title_length", pattern=f"/rule-{n}/", created_by=owner)
        owner_client.get(audit.site.get_absolute_url())  # warm: only the page's own queries are compared
        with CaptureQueriesContext(connection) as queries:
            body = owner_client.get(audit.site.get_absolute_url()).content.decode()
        assert body.count(f'<small class="muted">by {owner.get_username()}</small>') == rules
        return len(queries)

    assert queries_with(1) == queries_with(5)


def test_the_site_pages_rule_form_offers_the_latest_audits_issue_types_first(owner_client, audit):
    body = owner_client.get(audit.site.get_absolute_url()).content.decode()
    start = body.index('id="rule-form"')
    form = body[start:body.index("</form>", start)]
    latest = form[form.index('<optgroup label="In the latest audit">'):form.index("</optgroup>")]
    found = set(Issue.objects.filter(audit=audit).values_list("code", flat=True))
    assert found == {"http_4xx", "broken_link_internal", "meta_description_missing", "title_length"}
    assert all(f'value="{code}"' in latest for code in found)
    assert form.index("In the latest audit") < form.index('<optgroup label="Every other type">')
    assert all(form.count(f'value="{code}"') == 1 for code in found)  # each offered once
    assert 'value="h1_missing"' in form  # a type not found yet can still be ruled out ahead
    refused = add_rule(owner_client, audit.site, "title_length", "(a")  # the form comes back as it was
    assert refused.status_code == 400 and '<optgroup label="In the latest audit">' in refused.content.decode()
    # A type from the other group is as good as one from the first.
    assert add_rule(owner_client, audit.site, "h1_missing").status_code == 302


def test_a_url_whose_folder_makes_too_long_a_pattern_offers_no_rule_rather_than_a_broken_one(owner_client, audit):
    deep = f"{SITE}/" + "a.b/" * 130 + "page"
    make_issue(audit, "title_length", deep, page=make_page(audit, deep, title="T"))
    listing = owner_client.get(reverse("issue-list", args=[audit.pk]), {"code": "title_length"}).content.decode()
    assert "a.b" in listing
    assert "rule_pattern=%5Ehttps%3A%2F%2Fshop%5C.example%2Fa" not in listing
