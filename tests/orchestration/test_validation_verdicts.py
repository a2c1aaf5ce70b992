"""A validation calls an issue fixed only when the check that found it ran again and passed."""

from __future__ import annotations

import pytest

import crawler.page
from audits import diff, notices, purge, validation
from audits.models import Audit, IgnoreRule, Issue
from audits.notices import site_notice
from audits.services import follow_up_fields
from tests.conftest import free_port
from tests.factories import SITE, make_audit, make_issue, make_page
from tests.scripted_site import Answer, ScriptedSite, listing

from .test_validation import link_verdicts, page, run, verdicts

pytestmark = pytest.mark.django_db


def first_and_check(owner, web: ScriptedSite, change, *, before_check=None) -> tuple[Audit, Audit]:
    first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False))
    if before_check:
        before_check(first)
    change()
    check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                           **follow_up_fields(first, Audit.Mode.VALIDATE)))
    return first, check


def test_a_page_broken_another_way_is_not_fixed(owner, fast_settings):
    """404 last night, 500 now: the 4xx is gone, the page is no better."""
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a><a href="/q">q</a>')),
                          "/p": Answer(page("Gone"), status=404), "/q": Answer(page("Gone too"), status=404)})

        def change():
            web.pages["/p"] = Answer(page("Down"), status=500)
            web.pages["/q"] = Answer(page("A page of the validation site, back again"))

        _, check = first_and_check(owner, web, change)
    found = verdicts(check)
    assert found[("http_4xx", "p")] == "unknown"
    assert found[("http_4xx", "q")] == "fixed"


def test_a_content_issue_on_a_page_no_longer_served_as_html_is_unknown_not_fixed(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a>')),
                          "/p": Answer(page(None))})

        def change():
            web.pages["/p"] = Answer(page(None), ctype="text/plain")  # never parsed, so never checked

        first, check = first_and_check(owner, web, change)
    assert Issue.objects.filter(audit=first, url=web.url("/p"), code="title_missing").exists()
    assert verdicts(check)[("title_missing", "p")] == "unknown"


def test_a_content_issue_on_a_page_whose_checks_broke_this_time_is_unknown_not_fixed(owner, fast_settings,
                                                                                      monkeypatch):
    """A check that raises (a bug of ours, logged) found nothing on the page: that is no pass."""
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a>')),
                          "/p": Answer(page(None))})

        def checks_break_on_p():
            checks = crawler.page.run_page_checks

            def breaking(result, facts, ctx):
                if result.final_url.endswith("/p"):
                    raise RuntimeError("a check's bug")
                return checks(result, facts, ctx)

            monkeypatch.setattr(crawler.page, "run_page_checks", breaking)

        first, check = first_and_check(owner, web, checks_break_on_p)
    assert Issue.objects.filter(audit=first, url=web.url("/p"), code="title_missing").exists()
    assert verdicts(check)[("title_missing", "p")] == "unknown"


def test_a_notice_about_the_whole_crawl_is_unknown_in_a_validation(owner, fast_settings):
    """A validation follows no links: it cannot meet the trap again, nor say the trap is gone."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(page("Home of the validation site", '<a href="/p">p</a>'))
        web.pages["/p"] = Answer(page(None))

        def trap_found(first: Audit) -> None:
            site_notice(first.pk, "crawl_traps_skipped", "12 linked URLs not crawled: they look like a trap").save()

        _, check = first_and_check(owner, web, lambda: None, before_check=trap_found)
    [verdict] = [v for v in validation.checklist(check) if v.code == "crawl_traps_skipped"]
    assert verdict.result == "unknown" and "whole site" in verdict.why


def test_the_fixed_count_of_the_sites_history_leaves_ignored_issues_out_as_the_checklist_does(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a>')),
                          "/p": Answer(page(None, h1=False))})

        def ignore_h1(first: Audit) -> None:
            Issue.objects.filter(audit=first, code="h1_missing").update(review=Issue.Review.IGNORED)

        def change():
            web.pages["/p"] = Answer(page("A page of the validation site, now titled"))

        _, check = first_and_check(owner, web, change, before_check=ignore_h1)
    assert verdicts(check)[("title_missing", "p")] == "fixed"
    assert diff.totals(diff.stored_counts(check))["fixed"] == validation.counts(check)["fixed"] == 1


def test_what_a_person_ignored_on_a_validation_stays_ignored_in_the_next(owner, fast_settings):
    """A rule made while the validation was the site's latest audit, and one issue ignored on its page."""
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/a">a</a><a href="/b">b</a>')),
                          "/a": Answer(page("A page of the validation site", h1=False)), "/b": Answer(page(None))})
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False))
        fields = follow_up_fields(first, Audit.Mode.VALIDATE)
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False, **fields))
        assert {("h1_missing", "a"), ("title_missing", "b")} <= set(verdicts(check))
        IgnoreRule.objects.create(site=first.site, code="h1_missing").apply_to(check)
        Issue.objects.filter(audit=check, url=web.url("/b"), code="title_missing").update(
            review=Issue.Review.IGNORED)
        again = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
    found = verdicts(again)
    assert ("h1_missing", "a") not in found and ("title_missing", "b") not in found
    assert Issue.objects.get(audit=first, url=web.url("/b"), code="title_missing").review == Issue.Review.IGNORED


# What a full audit stops at, at the front door; a re-check of last night's issues goes on past it.
FRONT_DOOR_CLOSED = {
    "start-page-500": ("/", lambda: Answer(page("Down"), status=500)),
    "robots-disallow-start": ("/robots.txt", lambda: Answer("User-agent: *\nDisallow: /$\n", ctype="text/plain")),
    "start-page-timeout": ("/", lambda: Answer(page("Home, slow now"), delay=3.0)),  # past FETCH_DEADLINE below
}


@pytest.mark.parametrize("closed", list(FRONT_DOOR_CLOSED))
def test_a_validation_judges_its_urls_when_the_start_page_is_down_or_disallowed_now(owner, fast_settings, closed):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "FETCH_DEADLINE": 1.0}
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a><a href="/q">q</a>')),
                          "/p": Answer(page("Gone"), status=404), "/q": Answer(page(None))})
        path, answer = FRONT_DOOR_CLOSED[closed]

        def change():
            web.pages[path] = answer()
            web.pages["/p"] = Answer(page("A page of the validation site, back again"))

        _, check = first_and_check(owner, web, change)
    check.refresh_from_db()
    assert check.status == Audit.Status.COMPLETED, check.error_detail
    found = verdicts(check)
    assert found[("http_4xx", "p")] == "fixed"
    assert found[("title_missing", "q")] == "still"
    if closed == "start-page-timeout":  # one verdict among the URLs, as a 5xx is
        home = check.pages.get(url=web.url("/"))
        assert home.fetch_error and home.status_code is None
        assert found[("sitemap_missing", "sitemap.xml")] == "unknown"
        # Said as it happened: robots.txt let the crawler in, the start page gave no answer.
        (sitemap,) = [v for v in validation.checklist(check) if v.code == "sitemap_missing"]
        assert "robots.txt" not in sitemap.why
        assert "start page gave no answer" in sitemap.why and "were not read" in sitemap.why
    if closed == "robots-disallow-start":
        assert not check.pages.filter(url=web.url("/")).exists()  # never fetched
        assert web.requests["/"] == 1  # the source audit's fetch alone
        # The sitemaps were not read this time: their issue (no /sitemap.xml here) is unknown, not fixed.
        (sitemap,) = [v for v in validation.checklist(check) if v.code == "sitemap_missing"]
        assert sitemap.result == "unknown" and "were not read" in sitemap.why


def test_a_validation_whose_typed_start_gives_no_answer_judges_the_urls_where_its_source_crawled(
        owner, fast_settings):
    """Last night the typed address redirected to the site; tonight it times out, the site itself is up."""
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "FETCH_DEADLINE": 1.0}
    with ScriptedSite() as front, ScriptedSite() as web:
        front.pages["/"] = Answer(status=301, headers={"Location": web.url("/")})
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a><a href="/q">q</a>')),
                          "/p": Answer(page("Gone"), status=404), "/q": Answer(page(None))})
        first = run(make_audit(owner, start_url=front.url("/"), allow_private=True, check_external=False))

        front.pages["/"] = Answer(page("Stalled"), delay=3.0)  # past FETCH_DEADLINE
        web.pages["/p"] = Answer(page("A page of the validation site, back again"))
        check = run(make_audit(owner, start_url=front.url("/"), allow_private=True, check_external=False,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
    assert first.origin == web.base
    assert check.origin == web.base
    found = verdicts(check)
    assert found[("http_4xx", "p")] == "fixed"
    assert found[("title_missing", "q")] == "still"


def test_an_issue_of_a_page_rendered_then_but_not_now_is_unknown_not_fixed(owner):
    """The browser failed on /app this time: its raw HTML lacks what its scripts add (a title, a link), so
    nobody checked them. /fine was rendered both times, and its issue is fixed."""
    source = make_audit(owner, start_url=f"{SITE}/", status=Audit.Status.COMPLETED)
    app, fine = f"{SITE}/app", f"{SITE}/fine"
    for url in (app, fine):
        then = make_page(source, url, rendered=True, head_facts={})
        make_issue(source, "title_missing", url, page=then)
    make_issue(source, "broken_link_internal", app, page=source.pages.get(url=app), target_url=f"{SITE}/gone")
    check = make_audit(owner, start_url=f"{SITE}/", **follow_up_fields(source, Audit.Mode.VALIDATE))
    make_page(check, app, rendered=False, head_facts={})  # the raw page, kept when the render failed
    make_page(check, f"{SITE}/gone", status_code=404)  # the link's target, fetched again
    make_page(check, fine, rendered=True, head_facts={})
    diff.record(check)
    found = {(v.code, v.url): v for v in validation.checklist(check)}
    assert found[("title_missing", fine)].result == "fixed"
    for code in ("title_missing", "broken_link_internal"):
        verdict = found[(code, app)]
        assert verdict.result == "unknown", verdict
        assert "rendered last time and could not be this time" in verdict.why


def test_a_pages_own_hreflang_tags_are_rechecked_and_can_be_fixed(owner, fast_settings):
    """An invalid language code is the page's own tag, not a cross-page check: fixed when corrected."""
    def intl(code: str) -> Answer:
        tags = (f'<link rel="alternate" hreflang="{code}" href="/intl">'
                '<link rel="alternate" hreflang="x-default" href="/intl">')
        return Answer(page("An international page of the validation site").replace("</head>", tags + "</head>"))

    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/intl">intl</a>')),
                          "/intl": intl("english")})
        first, check = first_and_check(owner, web, lambda: web.pages.update({"/intl": intl("en")}))
    assert Issue.objects.filter(audit=first, code="hreflang_error", target_url="").exists()
    (verdict,) = [v for v in validation.checklist(check) if v.code == "hreflang_error"]
    assert verdict.result == "fixed", verdict
    assert check.pages.filter(url=web.url("/intl")).exists()  # fetched for it


def test_a_broken_link_on_a_page_no_longer_parsed_is_unknown_not_fixed(owner, fast_settings):
    """The page still answers, but as text/plain: nobody read its links, so nobody saw the link go."""
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a>')),
                          "/p": Answer(page("Links to a missing page", '<a href="/gone">gone</a>'))})

        def change():
            web.pages["/p"] = Answer(page("Links to a missing page", '<a href="/gone">gone</a>'), ctype="text/plain")

        first, check = first_and_check(owner, web, change)
    assert Issue.objects.filter(audit=first, url=web.url("/p"), code="broken_link_internal").exists()
    assert verdicts(check)[("broken_link_internal", "p")] == "unknown"


def test_dead_domains_among_the_links_re_checked_are_still_broken_not_a_crawler_offline(owner, fast_settings):
    """A validation re-checks only broken external links, often all on dead hosts: that is no sign
    that the crawler lost the internet, and the ones that answer now are fixed."""
    with ScriptedSite() as web, ScriptedSite() as other:
        other.pages.update({f"/fine-{n}": Answer(page(f"Fine {n}")) for n in range(30)})
        # Each its own path: two calls of free_port can give back the same closed port.
        dead = [f"http://127.0.0.1:{free_port()}/dead-{n}" for n in range(notices.MIN_CHECKS + 2)]
        links = [*dead, other.url("/back"), *(other.url(f"/fine-{n}") for n in range(30))]
        web.pages["/"] = Answer(page("Home of the validation site", "".join(f'<a href="{u}">x</a>' for u in links)))
        first = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=True))
        assert Issue.objects.filter(audit=first, code="broken_link_external").count() == len(dead) + 1
        other.pages["/back"] = Answer(page("Back again"))
        check = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=True,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
    assert not Issue.objects.filter(audit=check, code="external_links_unchecked").exists()
    results = {v.target_url: v.result for v in validation.checklist(check) if v.code == "broken_link_external"}
    assert results == {**dict.fromkeys(dead, "still"), other.url("/back"): "fixed"}


def test_a_robots_txt_issue_is_unknown_when_the_start_page_now_lands_on_another_origin(owner, fast_settings):
    """robots.txt is read where the start page lands: the old origin's file was not looked at again."""
    with ScriptedSite() as web, ScriptedSite() as new_home:
        web.pages["/"] = Answer(page("Home of the validation site", '<a href="/p">p</a>'))
        web.pages["/p"] = Answer(page(None))
        new_home.pages["/"] = Answer(page("The site's new home"))

        def change():
            web.pages["/"] = Answer(status=301, headers={"Location": new_home.url("/")})

        first, check = first_and_check(owner, web, change)
    assert Issue.objects.filter(audit=first, code="robots_txt_missing").exists()
    assert Issue.objects.filter(audit=check, code="robots_txt_missing", url=new_home.url("/robots.txt")).exists()
    assert verdicts(check)[("robots_txt_missing", "robots.txt")] == "unknown"
    (robots,) = [v for v in validation.checklist(check) if v.code == "robots_txt_missing"]
    assert new_home.url("/robots.txt") in robots.why and "lands elsewhere" in robots.why


def test_an_issue_ignored_on_the_validation_leaves_its_checklist_at_once(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/a">a</a>')),
                          "/a": Answer(page(None, h1=False))})
        _, check = first_and_check(owner, web, lambda: None)
    assert {("title_missing", "a"), ("h1_missing", "a")} <= set(verdicts(check))
    Issue.objects.filter(audit=check, url=web.url("/a"), code="h1_missing").update(review=Issue.Review.IGNORED)
    assert ("h1_missing", "a") not in verdicts(check) and verdicts(check)[("title_missing", "a")] == "still"


def test_the_checklist_outlives_the_audit_it_re_checked(owner, fast_settings, owner_client):
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/p">p</a><a href="/q">q</a>')),
                          "/p": Answer(page(None)), "/q": Answer(page(None)), "/r": Answer(page("R"), status=404)})
        web.pages["/"] = Answer(page("Home of the validation site", '<a href="/p">p</a><a href="/q">q</a>'
                                     '<a href="/r">r</a>'))

        def change():
            web.pages["/p"] = Answer(page("A page of the validation site, now titled"))
            web.pages["/r"] = Answer(page("R"), status=500)

        first, check = first_and_check(owner, web, change)
    def judged():  # a still-there issue is then told with this audit's words ("answered 500", not 404)
        return sorted((v.result, v.code, v.url, v.target_url) for v in validation.checklist(check))

    before = judged()
    counted = validation.counts(check)
    assert {v[0] for v in before} == {"still", "fixed", "unknown"}
    purge.delete_soon(first)
    Issue.objects.filter(pk=Issue.objects.filter(audit=first).order_by("pk").values("pk")[:1]).delete()
    assert judged() == before  # while its rows go, batch by batch
    purge.purge_rows(first.pk)
    check.refresh_from_db()
    assert check.source_id is None
    assert judged() == before and validation.counts(check) == counted
    body = owner_client.get(check.get_absolute_url()).content.decode()
    assert "Re-check of audit (deleted)" in body and "Still there" in body


def test_a_validation_reads_the_sitemaps_only_to_re_check_an_issue_of_theirs(owner, fast_settings):
    """Last night's 40 issues in seconds: a site's big sitemap is not walked again for nothing."""
    with ScriptedSite() as web, ScriptedSite() as bare:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/q">q</a>')),
                          "/q": Answer(page(None)), **listing(web, ["/", "/q"])})
        bare.pages.update({"/": Answer(page("Home of the validation site", '<a href="/q">q</a>')),
                           "/q": Answer(page(None))})  # no sitemap anywhere: sitemap_missing
        for site in (web, bare):
            first, check = first_and_check(owner, site, lambda: None)
            assert verdicts(check)[("title_missing", "q")] == "still"
        assert web.requests["/sitemap.xml"] == 1  # the full audit's read alone
        assert bare.requests["/sitemap.xml"] == 2
    assert verdicts(check)[("sitemap_missing", "sitemap.xml")] == "still"


def test_a_re_anchored_broken_link_ignored_on_the_validation_is_ignored_as_the_issue_it_re_checked(owner, fast_settings):
    """Still there by page and target (its anchor text, so its key, changed): ignored, it is so by the same match."""
    with ScriptedSite() as web:
        web.pages.update({"/": Answer(page("Home of the validation site", '<a href="/a">a</a>')),
                          "/a": Answer(page("A page with a broken link", '<a href="/gone">Old words</a>'))})

        def re_anchor():
            web.pages["/a"] = Answer(page("A page with a broken link", '<a href="/gone">New words</a>'))

        first, check = first_and_check(owner, web, re_anchor)
        link = ("broken_link_internal", "a", "gone")
        assert link_verdicts(check)[link] == "still"
        check.set_review(Issue.objects.filter(audit=check, code="broken_link_internal"), Issue.Review.IGNORED)
        assert link not in link_verdicts(check)  # off the checklist at once, as one ignored by key
        assert Issue.objects.get(audit=first, code="broken_link_internal").review == Issue.Review.IGNORED
        first.refresh_from_db()  # its totals follow
        assert first.issues_critical == Issue.objects.filter(audit=first, severity="critical").exclude(
            review=Issue.Review.IGNORED).count()
        again = run(make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                               **follow_up_fields(first, Audit.Mode.VALIDATE)))
        assert link not in link_verdicts(again)  # not re-checked: ignored stays ignored
        # Opened again on the audit it re-checked, it is back on the checklist, as one matched by key is.
        first.set_review(Issue.objects.filter(audit=first, code="broken_link_internal"), Issue.Review.OPEN)
        assert link_verdicts(check)[link] == "still"


def test_a_re_anchored_link_ignored_on_a_validation_by_its_rows_alone_is_ignored_on_the_audit_it_re_checked(owner):
    """However the mark got there (an older release's, an admin's update): carried back by page and target."""
    source = make_audit(owner, start_url=f"{SITE}/", status=Audit.Status.COMPLETED)
    make_issue(source, "broken_link_internal", f"{SITE}/a", target_url=f"{SITE}/gone", key="old-anchor")
    check = make_audit(owner, start_url=f"{SITE}/", **follow_up_fields(source, Audit.Mode.VALIDATE))
    make_issue(check, "broken_link_internal", f"{SITE}/a", target_url=f"{SITE}/gone", key="new-anchor",
               review=Issue.Review.IGNORED)
    assert validation.settle_ignores(source) == 1
    assert Issue.objects.get(audit=source).review == Issue.Review.IGNORED


def test_the_checklist_is_what_the_validation_judged_whatever_becomes_of_the_audit_it_re_checked(owner):
    """Two links from /a to /gone then, one (its anchor text changed) now: both still there, in their words."""
    source = make_audit(owner, start_url=f"{SITE}/", status=Audit.Status.COMPLETED)
    a, gone = f"{SITE}/a", f"{SITE}/gone"
    then = make_page(source, a)
    for anchor in ("x", "y"):
        make_issue(source, "broken_link_internal", a, page=then, target_url=gone, key=f"anchor-{anchor}",
                   message=f"Link '{anchor}' to {gone} answers 404")
    make_issue(source, "title_missing", a, page=then)
    check = make_audit(owner, start_url=f"{SITE}/", **follow_up_fields(source, Audit.Mode.VALIDATE))
    now = make_page(check, a, head_facts={})
    make_issue(check, "broken_link_internal", a, page=now, target_url=gone, key="anchor-z",
               message=f"Link 'z' to {gone} answers 404")
    Audit.objects.filter(pk=check.pk).update(status=Audit.Status.COMPLETED)
    check.refresh_from_db()
    diff.record(check)

    def judged():
        return [(v.result, v.code, v.message) for v in validation.checklist(check)]

    before = judged()
    assert before == [("still", "broken_link_internal", f"Link '{anchor}' to {gone} answers 404") for anchor in "xy"
                      ] + [("fixed", "title_missing", "Title missing")]
    counted = validation.counts(check)
    assert counted == {"still": 2, "unknown": 0, "fixed": 1}
    purge.delete_soon(source)
    assert judged() == before
    purge.purge_rows(source.pk)
    check.refresh_from_db()
    assert check.source_id is None
    assert judged() == before and validation.counts(check) == counted


def test_an_unknown_says_what_happened_to_its_url_this_time(owner, fast_settings):
    """Not the list of what may have happened: what the validation's own fetch of the URL says."""
    with ScriptedSite() as web:
        paths = ("/private", "/down", "/moved", "/plain")
        web.pages.update({"/": Answer(page("Home of the validation site", "".join(f'<a href="{p}">x</a>' for p in paths))),
                          "/private": Answer(page(None)), "/down": Answer(page("Gone"), status=404),
                          "/moved": Answer(page(None)), "/plain": Answer(page(None))})

        def change():
            web.pages["/robots.txt"] = Answer("User-agent: *\nDisallow: /private\n", ctype="text/plain")
            web.pages["/down"] = Answer(page("Down"), status=503)
            web.pages["/moved"] = Answer(status=301, headers={"Location": "/elsewhere"})
            web.pages["/elsewhere"] = Answer(page(None))
            web.pages["/plain"] = Answer(page(None), ctype="text/plain")

        _, check = first_and_check(owner, web, change)
    why = {(v.code, v.url.split("/", 3)[3]): v.why for v in validation.checklist(check) if v.result == "unknown"}
    assert why[("title_missing", "private")] == "robots.txt now disallows this URL: it was not fetched this time."
    assert why[("http_4xx", "down")] == "It answered 503 this time."
    assert why[("title_missing", "moved")] == f"It now redirects to {web.url('/elsewhere')}: the URL itself was not checked as a page."
    assert why[("title_missing", "plain")] == "It was not read as an HTML page this time (served as another type, or cut at the size cap)."


def test_a_second_record_of_a_validation_replaces_its_verdicts_in_one_delete(owner):
    """record clears the copies an earlier finalize wrote with the rest of the diff; keep_rechecked only writes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    source = make_audit(owner, start_url=f"{SITE}/", status=Audit.Status.COMPLETED)
    make_issue(source, "title_missing", f"{SITE}/a")
    make_issue(source, "http_4xx", f"{SITE}/gone")
    check = make_audit(owner, start_url=f"{SITE}/", **follow_up_fields(source, Audit.Mode.VALIDATE))
    make_issue(check, "http_4xx", f"{SITE}/gone")
    Audit.objects.filter(pk=check.pk).update(status=Audit.Status.COMPLETED)
    check.refresh_from_db()
    diff.record(check)
    first = sorted(check.rechecked_issues.values_list("code", "result"))
    with CaptureQueriesContext(connection) as ctx:
        diff.record(check)
    deletes = [q["sql"] for q in ctx.captured_queries
               if q["sql"].startswith("DELETE") and "audits_recheckedissue" in q["sql"]]
    assert len(deletes) == 1, deletes
    assert sorted(check.rechecked_issues.values_list("code", "result")) == first == [
        ("http_4xx", "still"), ("title_missing", "unknown")]
