"""Validation mode: re-fetch only what carried an earlier audit's issues, and judge each issue."""

from __future__ import annotations

import pytest

from audits import validation
from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from audits.services import follow_up_fields
from tests.editable_site import EditableSite
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db


def page(title: str | None, body: str = "", *, h1: bool = True) -> str:
    head = f"<title>{title}</title>" if title else ""
    heading = f"<h1>{title or 'Untitled'}</h1>" if h1 else ""
    return (f'<!doctype html><html lang="en"><head>{head}<meta name="description" content="A page of the '
            f'validation site with a description long enough to pass every length check."></head>'
            f'<body>{heading}<p>Some words on the page.</p><a href="/">home</a>{body}</body></html>')


SITE = {
    "/": page("Home of the validation site", "".join(f'<a href="{p}">{p}</a>' for p in (
        "/untitled", "/no-heading", "/links-gone", "/links-later", "/twin-1", "/twin-2", "/flaky", "/fine",
        "/ignored"))),
    "/untitled": page(None),                                    # title_missing: to be fixed
    "/no-heading": page("A page without a heading", h1=False),  # h1_missing: left as it is
    "/links-gone": page("Links to a missing page", '<a href="/gone">gone</a>'),  # broken link: link removed
    "/links-later": page("Links to a page not there yet", '<a href="/later">later</a>'),  # target restored
    "/twin-1": page("Twin title of two pages"),                 # title_duplicate: cross-page, unknown
    "/twin-2": page("Twin title of two pages"),
    "/flaky": page("Flaky page without a heading", h1=False),   # h1_missing: the page fails next time
    "/fine": page("A fine page that needs no re-check"),
    "/ignored": page("An ignored page without a heading", h1=False),  # h1_missing, ignored by a person
}


def run(audit: Audit) -> Audit:
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def verdicts(audit: Audit) -> dict[tuple[str, str], str]:
    return {(v.code, v.url.split("/", 3)[3]): v.result for v in validation.checklist(audit)}


def test_a_validation_refetches_only_the_issue_urls_and_judges_every_issue(owner, fast_settings, owner_client):
    with EditableSite() as web:
        web.pages.update(SITE)
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False))
        Issue.objects.filter(audit=first, url=web.url("/ignored")).update(review=Issue.Review.IGNORED)
        web.set(**{
            "/untitled": page("Now the page has a title"),
            "/links-gone": page("No longer links to a missing page", '<a href="/never">a new link</a>'),
            "/later": page("The page that was not there yet"),
            "/flaky": (500, "<html><body>down</body></html>"),
        })
        web.requests.clear()
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
        fetched = set(web.requests)

    found = verdicts(check)
    assert found[("title_missing", "untitled")] == "fixed"
    assert found[("h1_missing", "no-heading")] == "still"
    assert found[("broken_link_internal", "links-gone")] == "fixed"
    assert found[("broken_link_internal", "links-later")] == "fixed"
    assert found[("title_duplicate", "twin-1")] == found[("title_duplicate", "twin-2")] == "unknown"
    assert found[("h1_missing", "flaky")] == "unknown"
    # Ignored stays ignored: not re-checked, not in the checklist.
    assert ("h1_missing", "ignored") not in found
    # Every issue of the source that was not ignored has a verdict.
    assert len(found) == Issue.objects.filter(audit=first).exclude(review=Issue.Review.IGNORED).count()
    unknown = [v for v in validation.checklist(check) if v.code == "title_duplicate"]
    assert all("whole site" in v.why for v in unknown)
    # Only the URLs that carried issues (and the link targets) were fetched; no link was followed.
    # Only the URLs that carried issues (and the link targets) were fetched; no link was followed.
    carried = Issue.objects.filter(audit=first).exclude(review=Issue.Review.IGNORED).exclude(
        code__in=["title_duplicate", "meta_description_duplicate", "sitemap_missing", "robots_txt_missing"])
    expected = {url.removeprefix(web.base) for url in carried.values_list("url", flat=True)}
    expected |= {url.removeprefix(web.base) for url in carried.exclude(target_url="").values_list("target_url", flat=True)}
    assert fetched - {"/", "/robots.txt", "/sitemap.xml"} == expected - {"/"}
    assert "/never" not in fetched and "/ignored" not in fetched
    assert validation.counts(check) == {
        result: sum(1 for r in found.values() if r == result) for result in validation.RESULTS}
    # The audit page shows the checklist: each verdict, and why an unknown is unknown.
    body = owner_client.get(check.get_absolute_url()).content.decode()
    section = body.split('id="validation"')[1]
    assert f"{validation.counts(check)['still']} still there" in section
    assert section.count('class="verdict-') == len(found)
    assert "A check across the whole site" in section and 'id="changes"' not in body



def link_verdicts(audit: Audit) -> dict[tuple[str, str, str], str]:
    """{(code, page path, target path): result} of the checklist."""
    def path(url: str) -> str:
        return url.split("/", 3)[3] if url else ""

    return {(v.code, path(v.url), path(v.target_url)): v.result for v in validation.checklist(audit)}


def test_a_link_as_broken_as_before_is_still_there_when_only_its_anchor_text_changed(owner, fast_settings):
    with EditableSite() as web:
        web.pages.update({"/": page("Home of the validation site", '<a href="/a">a</a>'),
                          "/a": page("A page with a broken link", '<a href="/gone">Old words</a>')})
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False))
        web.set(**{"/a": page("A page with a broken link", '<a href="/gone">New words</a>')})
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
    assert link_verdicts(check)[("broken_link_internal", "a", "gone")] == "still"


def test_a_broken_external_link_whose_host_now_refuses_crawlers_is_unknown_not_fixed(owner, fast_settings):
    with EditableSite() as web, EditableSite() as other:
        other.pages["/moved"] = (404, "<html><body>Not here</body></html>")
        web.pages["/"] = page("Home of the validation site", f'<a href="{other.url("/moved")}">elsewhere</a>')
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=True))
        # 403 is one of the answers a crawler is refused with: it says nothing of the link.
        other.set(**{"/moved": (403, "<html><body>No robots</body></html>")})
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=True,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
        assert other.requests["/moved"] == 2
    assert link_verdicts(check)[("broken_link_external", "", "moved")] == "unknown"
    (verdict,) = [v for v in validation.checklist(check) if v.code == "broken_link_external"]
    assert verdict.why.startswith("The link's target answered 403 this time, as servers answer crawlers they refuse")


def test_every_issue_url_is_fetched_when_the_start_url_redirects(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages["/"] = Answer(status=301, headers={"Location": web.url("/home")})
        web.pages["/home"] = Answer(page("Home of the validation site", "".join(
            f'<a href="/p{n}">p{n}</a>' for n in range(4))))
        # Each links where the start lands, not the start URL: no link issue makes "/" a URL to re-check.
        for n in range(4):
            web.pages[f"/p{n}"] = Answer(page(None).replace('href="/"', 'href="/home"'))  # title_missing
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False))
        # The start's own issues are ignored: only the four pages are re-checked, beside the start step.
        Issue.objects.filter(audit=first, url__in=[web.url("/"), web.url("/home")]).update(
            review=Issue.Review.IGNORED)
        for n in range(4):
            web.pages[f"/p{n}"] = Answer(page(f"Page {n} now has a proper title").replace('href="/"', 'href="/home"'))
        web.requests.clear()
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
        assert {f"/p{n}" for n in range(4)} <= set(web.requests)
    found = link_verdicts(check)
    assert {found[("title_missing", f"p{n}", "")] for n in range(4)} == {"fixed"}


def test_an_issue_on_a_page_that_now_redirects_is_unknown_not_fixed(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/old">old</a>')),
                          "/old": Answer(page(None))})
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False))
        assert Issue.objects.filter(audit=first, code="title_missing", url=web.url("/old")).exists()
        # The page moved, its title still missing: the validation fetches /old, not where it now lands.
        web.pages.update({"/old": Answer(b"", status=301, headers={"Location": "/new"}), "/new": Answer(page(None))})
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))

    [verdict] = [v for v in validation.checklist(check) if v.code == "title_missing"]
    assert verdict.result == "unknown" and "now redirects" in verdict.why


def test_a_validation_fetches_no_issue_url_its_scope_now_excludes(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/secret">s</a><a href="/open">o</a>')),
                          "/secret": Answer(page(None)), "/open": Answer(page(None))})
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False))
        web.requests.clear()
        # Excluded since (a pattern, or a private site's logout link): never fetched again.
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                               **{**follow_up_fields(first, Audit.Mode.VALIDATE), "exclude_patterns": "/secret"}))
        fetched = set(web.requests)

    found = verdicts(check)
    assert "/secret" not in fetched and "/open" in fetched
    assert (found[("title_missing", "secret")], found[("title_missing", "open")]) == ("unknown", "still")


def test_a_validation_re_checks_a_broken_resource_its_include_patterns_do_not_name(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages["/blog/"] = Answer(page("The blog of the validation site", '<img src="/static/x.png" alt="x">'))
        first = run(make_audit(owner, start_url=web.url("/blog/"), allow_private=True, check_external=False,
                               include_patterns="/blog/"))
        assert Issue.objects.filter(audit=first, code="broken_resource").exists()
        web.pages["/static/x.png"] = Answer(b"\x89PNG", ctype="image/png")  # restored
        check = run(make_audit(owner, start_url=web.url("/blog/"), allow_private=True, check_external=False,
                               include_patterns="/blog/", **follow_up_fields(first, Audit.Mode.VALIDATE)))

    assert verdicts(check)[("broken_resource", "blog/")] == "fixed"
