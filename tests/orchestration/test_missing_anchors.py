"""anchor_missing: a link's #fragment that names no id or <a name> on the page it points at, found by a real
crawl of a loopback site, in a full audit, a delta that reuses the pages, an audit that stopped early, and
the diff against the audit before."""

from __future__ import annotations

import pytest

from audits import missing_anchors as check
from audits import validation
from audits.finalize import check_stopped_links
from audits.models import Audit, GoneIssue, Issue, LinkEdge, Page
from audits.services import follow_up_fields
from tests.factories import completed_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db

GUIDE = '<h2 id="install">Install</h2><a name="legacy"></a><h2 id="café">Café</h2><a href="/">home</a>'


def html(title: str, body: str) -> Answer:
    return Answer(f"<!doctype html><html lang='en'><head><title>{title}</title></head>"
                  f"<body><h1>{title}</h1>{body}</body></html>")


def site_pages(web: ScriptedSite) -> dict[str, Answer]:
    return {
        # The links sit on a page of their own, not the start page, which a delta always fetches in full.
        "/": html("Home", '<a href="/links">links</a>'),
        "/links": html("Links", (
            '<a href="/guide#install">ok by id</a> <a href="/guide#legacy">ok by a name</a> '
            '<a href="/guide#instal">typo</a> <a href="/guide#caf%C3%A9">ok encoded</a> '
            '<a href="/guide#top">top</a> <a href="/guide#">empty</a> <a href="/guide#:~:text=words">text</a> '
            '<a href="/app#!/route">a route</a> <a href="#here">ok here</a> <a href="#gone">missing here</a> '
            '<a href="/moved#install">ok through a redirect</a> <a href="/moved#nowhere">missing past one</a> '
            '<a href="/file.pdf#page=2">a file</a> <a href="/big#nowhere">past the cap</a> '
            '<map name="m"><area href="/guide#area-gone" alt="area"></map> '
            f'<a href="{web.url("/guide")}#usage">absolute, missing</a> '
            '<a href="http://203.0.113.9/x#y">external</a> <span id="here"></span>')),
        "/guide": html("Guide", GUIDE),
        "/app": html("App", '<div id="root"></div>'),
        "/moved": Answer(status=301, headers={"Location": "/guide"}),
        "/file.pdf": Answer(b"%PDF-1.4", ctype="application/pdf"),
        "/big": html("Big", "".join(f'<p id="p{i}">x</p>' for i in range(5001))),
    }


def missing(audit: Audit) -> set[tuple[str, str]]:
    return set(Issue.objects.filter(audit=audit, code="anchor_missing").values_list("url", "target_url"))


def audit_of(owner, web: ScriptedSite, **fields) -> Audit:
    fields = {"allow_private": True, "check_external": False, "max_pages": 50, **fields}
    return completed_audit(owner, start_url=web.url("/"), **fields)


def expected(web: ScriptedSite) -> set[tuple[str, str]]:
    links = web.url("/links")
    return {(links, web.url("/guide#instal")), (links, web.url("/links#gone")), (links, web.url("/guide#usage")),
            (links, web.url("/guide#area-gone")), (links, web.url("/moved#nowhere"))}


def test_a_fragment_no_id_or_name_carries_is_reported_and_nothing_else(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update(site_pages(web))
        audit = audit_of(owner, web)
    assert missing(audit) == expected(web)
    messages = set(Issue.objects.filter(audit=audit, code="anchor_missing").values_list("message", flat=True))
    assert "A link to #gone, which no id or <a name> on this page carries" in messages
    assert f"A link to #instal, which no id or <a name> on {web.url('/guide')} carries" in messages
    # What the check read: the guide's anchors, the links page's fragments by target, none kept past the cap.
    assert set(Page.objects.get(audit=audit, url=web.url("/guide")).anchors.split("\n")) == {
        "install", "legacy", "café"}
    assert Page.objects.get(audit=audit, url=web.url("/big")).anchors is None
    edge = LinkEdge.objects.get(audit=audit, source_url=web.url("/links"), target_url=web.url("/guide"), tag="a")
    assert set(edge.fragments.split("\n")) == {"install", "legacy", "instal", "caf%C3%A9", "usage"}


def test_judging_in_small_batches_finds_the_same(owner, fast_settings, monkeypatch):
    # A footer link to one target on every page of a big site: what is held is judged every few edges,
    # in the middle of a target too, so memory stays flat whatever the site.
    with ScriptedSite() as web:
        web.pages.update(site_pages(web))
        audit = audit_of(owner, web)
    whole = missing(audit)
    monkeypatch.setattr(check, "EDGES_HELD", 1)
    monkeypatch.setattr(check, "TARGETS_PER_READ", 1)
    assert {(i.url, i.target_url) for i in check.missing_anchors(audit.pk)} == whole == expected(web)


def test_a_delta_that_reuses_the_pages_reports_the_same_missing_anchors(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update(site_pages(web))
        first = audit_of(owner, web)
        delta = audit_of(owner, web, mode=Audit.Mode.DELTA, source=first)
        # Reused, not parsed again: the links page's fragments (edges) and the guide's anchors (row) are copies.
        for path in ("/links", "/guide"):
            assert Page.objects.get(audit=delta, url=web.url(path)).unchanged_since == first.pk
        assert missing(delta) == expected(web)
        # A fix on the target shows in the next delta: the guide changed, so it is parsed and its new id counts.
        web.pages["/guide"] = html("Guide", GUIDE + '<h2 id="instal">Typo kept</h2>')
        fixed = audit_of(owner, web, mode=Audit.Mode.DELTA, source=delta)
    assert missing(fixed) == expected(web) - {(web.url("/links"), web.url("/guide#instal"))}


def test_an_audit_that_stopped_early_still_reports_missing_anchors_among_what_it_fetched(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages.update(site_pages(web))
        audit = audit_of(owner, web)
    Issue.objects.filter(audit=audit, code="anchor_missing").delete()
    check_stopped_links(audit)
    assert missing(audit) == expected(web)


@pytest.mark.parametrize("guide, verdict", [
    (html("Guide", GUIDE + '<h2 id="instal">Now there</h2>'), GoneIssue.Change.FIXED),
    (Answer("down", status=500), GoneIssue.Change.UNKNOWN),
    (Answer(status=301, headers={"Location": "/file.pdf"}), GoneIssue.Change.UNKNOWN),
    (html("Guide", GUIDE + "".join(f'<p id="p{i}">x</p>' for i in range(5001))), GoneIssue.Change.UNKNOWN),
], ids=["id-added", "target-down", "target-moved-to-a-file", "target-past-the-cap"])
def test_the_next_audit_calls_a_missing_anchor_fixed_only_when_it_judged_the_target(owner, fast_settings, guide,
                                                                                       verdict):
    with ScriptedSite() as web:
        web.pages.update(site_pages(web))
        audit_of(owner, web)
        web.pages["/guide"] = guide
        second = audit_of(owner, web)
    gone = GoneIssue.objects.get(audit=second, code="anchor_missing", target_url=web.url("/guide#instal"))
    assert gone.change == verdict


@pytest.mark.parametrize("guide, verdicts", [
    (html("Guide", GUIDE + '<h2 id="instal">Now there</h2><h2 id="usage">And this</h2>'),
     {"guide#instal": "fixed", "guide#usage": "fixed", "guide#area-gone": "still"}),
    (html("Guide", GUIDE), {"guide#instal": "still", "guide#usage": "still", "guide#area-gone": "still"}),
    (Answer("down", status=500), {"guide#instal": "unknown", "guide#usage": "unknown", "guide#area-gone": "unknown"}),
], ids=["ids-added", "unchanged", "target-down"])
def test_a_validation_fetches_the_page_and_its_target_again_and_judges_the_anchor(owner, fast_settings, guide,
                                                                                   verdicts):
    with ScriptedSite() as web:
        web.pages.update(site_pages(web))
        first = audit_of(owner, web)
        # The guide's own issues ignored: it is fetched again only for the anchors the links page names.
        Issue.objects.filter(audit=first, url=web.url("/guide")).update(review=Issue.Review.IGNORED)
        web.pages["/guide"] = guide
        check = audit_of(owner, web, **follow_up_fields(first, Audit.Mode.VALIDATE))
    found = {v.target_url.split("/", 3)[3]: v.result for v in validation.checklist(check) if v.code == "anchor_missing"}
    assert {target: found[target] for target in verdicts} == verdicts
    assert Page.objects.filter(audit=check, url=web.url("/guide"), anchors__isnull=guide.status != 200).exists()


@pytest.mark.parametrize("moved, added, verdict", [
    ("/new", '<h2 id="usage">Usage</h2>', "fixed"),
    ("/new", "", "still"),
    ("/elsewhere", '<h2 id="usage">Usage</h2>', "unknown"),
], ids=["same-landing-fixed", "same-landing-still", "new-landing"])
def test_a_validation_judges_a_redirecting_target_by_the_page_it_landed_on_before(owner, fast_settings, moved,
                                                                                   added, verdict):
    with ScriptedSite() as web:
        web.pages.update({
            "/": html("Home", '<a href="/links">links</a>'),
            "/links": html("Links", '<a href="/old#install">ok</a> <a href="/old#usage">missing</a>'),
            "/old": Answer(status=301, headers={"Location": "/new"}),
            "/new": html("New", '<h2 id="install">Install</h2>'),
            "/elsewhere": html("Elsewhere", '<h2 id="usage">Usage</h2>'),
        })
        first = audit_of(owner, web)
        assert missing(first) == {(web.url("/links"), web.url("/old#usage"))}
        # Only the anchor's issue is re-checked: the landing page carries none of its own.
        Issue.objects.filter(audit=first).exclude(code="anchor_missing").update(review=Issue.Review.IGNORED)
        web.pages["/new"] = html("New", '<h2 id="install">Install</h2>' + added)
        web.pages["/old"] = Answer(status=301, headers={"Location": moved})
        check = audit_of(owner, web, **follow_up_fields(first, Audit.Mode.VALIDATE))
    assert [(v.code, v.result) for v in validation.checklist(check)] == [("anchor_missing", verdict)]
    assert Page.objects.filter(audit=check, url=web.url("/new")).exists()
    assert not Page.objects.filter(audit=check, url=web.url("/elsewhere")).exists()  # it follows no new link
