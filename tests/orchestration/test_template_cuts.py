"""A URL its template's budget cut at one depth is recorded (trap_suspected), and crawled after all
if a shorter path offers it where the template has room (chunks side by side write out of click order)."""

import pytest

from audits.crawl import admission
from audits.crawl.setup import crawl_setup
from audits.models import Audit, FrontierURL
from crawler.page import PageOutcome
from crawler.types import FetchResult, Link, PageFacts
from crawler.urls import TRAP_DEPTH_SPREAD, TRAP_VARIANTS
from tests.factories import SITE, make_audit

pytestmark = pytest.mark.django_db


def page_at(depth: int, path: str, *links: str) -> PageOutcome:
    url = f"{SITE}{path}"
    result = FetchResult(url=url, final_url=url, status=200, content_type="text/html")
    return PageOutcome(url, depth, result, PageFacts(base_url=url), (),
                       tuple(Link(f"{SITE}{link}") for link in links))


def test_a_cut_url_is_recorded_and_queued_again_when_a_shorter_path_has_room(owner):
    audit = make_audit(owner, max_depth=50)
    Audit.objects.filter(pk=audit.pk).update(origin=SITE)
    audit.refresh_from_db()
    setup = crawl_setup(audit)

    def admit(*outcomes):
        return admission.admit(audit, setup, outcomes, lambda url: True)

    siblings = [f"/day/{n}" for n in range(TRAP_VARIANTS)]
    assert admit(page_at(0, "/", *siblings)) == TRAP_VARIANTS  # all at depth 1
    deep = 1 + TRAP_DEPTH_SPREAD + 1
    assert admit(page_at(deep, "/far/away", "/day/999")) == 0
    cut = FrontierURL.objects.get(audit=audit, url=f"{SITE}/day/999")
    assert (cut.state, cut.skip_reason, cut.template_key) == ("done", "trap_suspected", "")
    # Offered again deeper still: still cut, still one row.
    assert admit(page_at(deep + 3, "/further", "/day/999")) == 0
    # Offered from the home page, at depth 1 beside its siblings: the template has room there.
    assert admit(page_at(0, "/", "/day/999")) == 1
    cut.refresh_from_db()
    assert (cut.state, cut.skip_reason, cut.depth, cut.linked) == ("pending", "", 1, True)
    assert cut.template_key == FrontierURL.objects.get(audit=audit, url=f"{SITE}/day/0").template_key
    assert FrontierURL.objects.filter(audit=audit, url=f"{SITE}/day/999").count() == 1


def test_a_trap_shaped_url_stays_cut_whatever_path_offers_it(owner):
    audit = make_audit(owner, max_depth=50)
    Audit.objects.filter(pk=audit.pk).update(origin=SITE)
    audit.refresh_from_db()
    setup = crawl_setup(audit)
    looping = "/a/b/a/b/a/b/a/b/a/b"
    assert admission.admit(audit, setup, [page_at(5, "/x", looping)], lambda url: True) == 0
    assert admission.admit(audit, setup, [page_at(0, "/", looping)], lambda url: True) == 0
    row = FrontierURL.objects.get(audit=audit, url=f"{SITE}{looping}")
    assert (row.state, row.skip_reason) == ("done", "trap_suspected")


def test_a_cut_url_robots_txt_now_refuses_is_not_queued_again(owner):
    audit = make_audit(owner, max_depth=50)
    Audit.objects.filter(pk=audit.pk).update(origin=SITE)
    audit.refresh_from_db()
    setup = crawl_setup(audit)
    siblings = [f"/day/{n}" for n in range(TRAP_VARIANTS)]
    admission.admit(audit, setup, [page_at(0, "/", *siblings)], lambda url: True)
    admission.admit(audit, setup, [page_at(2 + TRAP_DEPTH_SPREAD, "/far", "/day/999")], lambda url: True)
    # robots.txt read again during the crawl now refuses it.
    audit.record_robots("ok", 200, "User-agent: *\nDisallow: /day/999\n", None)
    assert admission.admit(audit, crawl_setup(audit), [page_at(0, "/", "/day/999")], lambda url: True) == 0
    row = FrontierURL.objects.get(audit=audit, url=f"{SITE}/day/999")
    assert row.state == "done" and row.skip_reason == "trap_suspected"
