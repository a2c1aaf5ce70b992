"""Run-to-run diff (audits.diff) end to end: two real audits of a loopback site edited in between."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db.models import F

from audits import diff, thresholds
from audits.inline import run_audit_inline
from audits.models import Audit, GoneIssue, Issue, PageChange, Site
from audits.services import follow_up_fields
from crawler.checks import CheckSettings
from tests.editable_site import EditableSite
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def html(site: EditableSite, path: str, links: list[str], *, title: str | None = None, canonical: str | None = None,
         noindex: bool = False, description: bool = True, words: str = "") -> tuple[int, str]:
    """A page with no issue of its own unless asked: lang, viewport, title, description, canonical, h1, 200+ words."""
    slug = path.strip("/").replace("/", "-") or "home"
    title = f"The {slug} page of the editable test site" if title is None else title
    head = '<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
    if title:
        head += f"<title>{title}</title>"
    if description:
        head += (f'<meta name="description" content="What the {slug} page is about, written out at a length '
                 'that search engines show in full under the result.">')
    canonical = site.url(path) if canonical is None else canonical
    if canonical:
        head += f'<link rel="canonical" href="{canonical}">'
    if noindex:
        head += '<meta name="robots" content="noindex">'
    text = " ".join(f"{slug}{words}{n}" for n in range(240))
    anchors = "".join(f'<li><a href="{href}">go to {href}</a></li>' for href in links)
    return 200, (f'<!DOCTYPE html><html lang="en"><head>{head}</head><body><h1>The {slug} page</h1>'
                 f"<p>{text}</p><ul>{anchors}</ul></body></html>")


@pytest.fixture(autouse=True)
def never_slow(monkeypatch):
    """slow_response depends on the machine's load, not the site: out of the exact sets below."""
    monkeypatch.setattr(thresholds, "DEFAULTS", CheckSettings(slow_ms=600_000))


@pytest.fixture
def site():
    with EditableSite(sitemap=True) as editable:
        yield editable


def audit_of(owner, site: EditableSite, **fields) -> Audit:
    """A real audit of ``site`` (start, chunks, finalize on this thread); always the owner's one Site."""
    finalize = fields.pop("finalize", None)
    fields = {"max_pages": 100, "max_depth": 5, **fields}
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, **fields)
    if finalize is None:
        run_audit_inline(audit.pk)
    else:
        run_audit_inline(audit.pk, finalize=finalize)
    audit.refresh_from_db()
    return audit


def completed_audit_of(owner, site: EditableSite, **fields) -> Audit:
    audit = audit_of(owner, site, **fields)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


# --- the two versions of the site -------------------------------------------------

HOME_LINKS_1 = ["/title-fix", "/persist", "/retitle", "/recanon", "/hide", "/reword", "/leaving", "/lonely",
                "/broken", "/was-missing"]
HOME_LINKS_2 = ["/title-fix", "/persist", "/retitle", "/recanon", "/hide", "/reword", "/broken", "/was-missing",
                "/fresh"]


def first_version(site: EditableSite) -> None:
    """Issues: a missing title, a missing description on /lonely, two 404s each linked from home."""
    site.set(**{
        "/": html(site, "/", HOME_LINKS_1),
        "/persist": html(site, "/persist", ["/", "/doomed"]),
        "/doomed": html(site, "/doomed", ["/"]),
        "/title-fix": html(site, "/title-fix", ["/"], title=""),
        "/retitle": html(site, "/retitle", ["/"], title="First title of the retitled test page"),
        "/recanon": html(site, "/recanon", ["/"]),
        "/hide": html(site, "/hide", ["/"]),
        "/reword": html(site, "/reword", ["/"]),
        "/leaving": html(site, "/leaving", ["/"]),
        "/lonely": html(site, "/lonely", ["/"], description=False),
    })  # /broken and /was-missing answer 404


def second_version(site: EditableSite) -> None:
    site.set(**{
        "/": html(site, "/", HOME_LINKS_2),  # /leaving and /lonely unlinked, /fresh linked
        "/doomed": None,  # now 404: the link from /persist breaks
        "/title-fix": html(site, "/title-fix", ["/"]),
        "/retitle": html(site, "/retitle", ["/"], title="Second title of the retitled test page"),
        "/recanon": html(site, "/recanon", ["/"], canonical=site.url("/persist")),
        "/hide": html(site, "/hide", ["/"], noindex=True),
        "/reword": html(site, "/reword", ["/"], words="changed"),
        "/leaving": None,
        "/was-missing": html(site, "/was-missing", ["/"]),
        "/fresh": html(site, "/fresh", ["/"]),
    })  # /lonely is still served: nothing links to it any more


# What the second audit reports against the first: (code, path, target path or "").
NEW = {("http_4xx", "/doomed", ""), ("broken_link_internal", "/persist", "/doomed"), ("noindex", "/hide", "")}
PERSISTING = {("http_4xx", "/broken", ""), ("broken_link_internal", "/", "/broken")}
FIXED = {("title_missing", "/title-fix", ""), ("http_4xx", "/was-missing", ""),
         ("broken_link_internal", "/", "/was-missing")}
UNKNOWN = {("meta_description_missing", "/lonely", "")}  # /lonely was not crawled: nothing links to it
PAGES = {
    ("added", "/fresh"): [],
    ("removed", "/leaving"): [],
    ("removed", "/lonely"): [],
    ("changed", "/"): ["content"],  # its links' anchor text
    ("changed", "/doomed"): ["status 200 → 404", "title", "canonical", "now not indexable", "content"],
    ("changed", "/was-missing"): ["status 404 → 200", "title", "canonical", "now indexable", "content"],
    ("changed", "/title-fix"): ["title"],
    ("changed", "/retitle"): ["title"],
    ("changed", "/recanon"): ["canonical"],
    ("changed", "/hide"): ["now not indexable"],
    ("changed", "/reword"): ["content"],
}
COUNTS = {
    "issues": {
        "new": {"critical": 2, "warning": 1, "notice": 0},
        "persisting": {"critical": 2, "warning": 0, "notice": 0},
        "fixed": {"critical": 3, "warning": 0, "notice": 0},
        "unknown": {"critical": 0, "warning": 1, "notice": 0},
    },
    "pages": {"added": 1, "removed": 2, "changed": 8},
}


def path(site: EditableSite, url: str) -> str:
    return url.removeprefix(site.base) if url else ""


def triple(site: EditableSite, row) -> tuple[str, str, str]:
    """(code, path, target path) of an issue row: a model instance or a dict."""
    code, url, target = ((row[name] for name in ("code", "url", "target_url")) if isinstance(row, dict)
                         else (row.code, row.url, row.target_url))
    return code, path(site, url), path(site, target)


def triples(site: EditableSite, rows) -> set[tuple[str, str, str]]:
    return {triple(site, row) for row in rows}


def issues_by_change(site: EditableSite, audit: Audit) -> dict[str, set]:
    return {
        "new": triples(site, audit.issues.filter(change=Issue.Change.NEW)),
        "persisting": triples(site, audit.issues.filter(change=Issue.Change.PERSISTING)),
        "fixed": triples(site, GoneIssue.objects.filter(audit=audit, change=GoneIssue.Change.FIXED)),
        "unknown": triples(site, GoneIssue.objects.filter(audit=audit, change=GoneIssue.Change.UNKNOWN)),
    }


def page_changes_of(site: EditableSite, rows) -> dict[tuple[str, str], list[str]]:
    return {(row.change, path(site, row.url)): row.what_changed() for row in rows}


def two_audits(owner, site: EditableSite) -> tuple[Audit, Audit]:
    first_version(site)
    first = completed_audit_of(owner, site)
    second_version(site)
    return first, completed_audit_of(owner, site)


# --- the diff written at finalize -------------------------------------------------------


def test_second_audit_marks_issues_new_persisting_fixed_unknown_and_pages_added_removed_changed(owner, site,
                                                                                                 fast_settings):
    first, second = two_audits(owner, site)
    assert second.site_id == first.site_id
    assert second.baseline_id == first.pk
    assert issues_by_change(site, second) == {"new": NEW, "persisting": PERSISTING, "fixed": FIXED,
                                              "unknown": UNKNOWN}
    assert not second.issues.filter(change=Issue.Change.NONE).exists()
    # Fixed: its page answered this time; unknown: its page was not fetched at all.
    assert second.pages.filter(url=site.url("/title-fix"), fetch_error="").exists()
    assert not second.pages.filter(url=site.url("/lonely")).exists()
    gone = GoneIssue.objects.get(audit=second, code="title_missing")
    assert (gone.severity, gone.message, gone.key) == ("critical", "Page has no <title>",
                                                       issue(site, first, *TITLE_MISSING).key)
    assert page_changes_of(site, PageChange.objects.filter(audit=second)) == PAGES
    recanon = PageChange.objects.get(audit=second, url=site.url("/recanon"))
    assert (recanon.canonical_before, recanon.canonical_after) == (site.url("/recanon"), site.url("/persist"))
    retitle = PageChange.objects.get(audit=second, url=site.url("/retitle"))
    assert (retitle.title_before, retitle.title_after) == ("First title of the retitled test page",
                                                           "Second title of the retitled test page")
    removed = PageChange.objects.get(audit=second, url=site.url("/lonely"))
    assert (removed.status_before, removed.status_after) == (200, None)
    assert second.change_counts == COUNTS
    # The diff is the second audit's alone: the first keeps what it had.
    first.refresh_from_db()
    assert first.change_counts is None and first.baseline_id is None
    assert set(first.issues.values_list("change", flat=True)) == {Issue.Change.NONE}


def issue(site: EditableSite, audit: Audit, code: str, page: str, target: str = "") -> Issue:
    return Issue.objects.get(audit=audit, code=code, url=site.url(page),
                             target_url=site.url(target) if target else "")


def reviews(site: EditableSite, audit: Audit) -> dict[tuple[str, str, str], str]:
    return {triple(site, row): row.review for row in audit.issues.all()}


def mark(site: EditableSite, audit: Audit, review: str, *which: tuple[str, str, str]) -> None:
    for code, page, target in which:
        Issue.objects.filter(pk=issue(site, audit, code, page, target).pk).update(review=review)


BROKEN_404 = ("http_4xx", "/broken", "")
BROKEN_LINK = ("broken_link_internal", "/", "/broken")
TITLE_MISSING = ("title_missing", "/title-fix", "")


def test_review_carries_forward_ignored_stays_ignored_and_reviewed_persisting_is_marked_reviewed(
        owner, site, fast_settings):
    first_version(site)
    first = completed_audit_of(owner, site)
    mark(site, first, Issue.Review.IGNORED, BROKEN_404)
    mark(site, first, Issue.Review.REVIEWED, BROKEN_LINK, TITLE_MISSING)  # the title one is fixed next time
    second_version(site)
    second = completed_audit_of(owner, site)
    # Matched by key: the same issue, not merely the same code on the same page.
    assert issue(site, second, *BROKEN_404).key == issue(site, first, *BROKEN_404).key
    expected = {triple: Issue.Review.OPEN for triple in NEW | PERSISTING}
    expected.update({BROKEN_404: Issue.Review.IGNORED, BROKEN_LINK: Issue.Review.REVIEWED})
    assert reviews(site, second) == expected
    # The baseline's marks stay as they were.
    assert reviews(site, first)[BROKEN_404] == Issue.Review.IGNORED


def test_an_issue_reopened_in_the_second_audit_is_open_in_the_third(owner, site, fast_settings):
    first_version(site)
    first = completed_audit_of(owner, site)
    mark(site, first, Issue.Review.IGNORED, BROKEN_404)
    mark(site, first, Issue.Review.REVIEWED, BROKEN_LINK)
    second_version(site)
    second = completed_audit_of(owner, site)
    assert (reviews(site, second)[BROKEN_404], reviews(site, second)[BROKEN_LINK]) == ("ignored", "reviewed")
    mark(site, second, Issue.Review.OPEN, BROKEN_404, BROKEN_LINK)
    third = completed_audit_of(owner, site)  # the site as the second audit saw it
    assert third.baseline_id == second.pk
    assert set(reviews(site, third).values()) == {Issue.Review.OPEN}
    # Nothing changed on the site, so everything persists and no page differs.
    assert issues_by_change(site, third) == {"new": set(), "persisting": NEW | PERSISTING, "fixed": set(),
                                             "unknown": set()}
    assert not PageChange.objects.filter(audit=third).exists()


def snapshot(audit: Audit) -> dict:
    """Every row and column ``diff.record`` writes for ``audit``, ids left out."""
    gone = GoneIssue.objects.filter(audit=audit).order_by("key")
    pages = PageChange.objects.filter(audit=audit).order_by("url_hash")
    return {
        "issues": sorted(audit.issues.values_list("key", "change", "review")),
        "gone": list(gone.values("change", "key", "url", "code", "severity", "message", "target_url")),
        "pages": [{k: v for k, v in row.items() if k not in ("id", "audit")} for row in pages.values()],
        "audit": Audit.objects.filter(pk=audit.pk).values("baseline_id", "change_counts").get(),
    }


def test_recording_the_diff_twice_in_one_finalize_leaves_the_same_rows(owner, site, fast_settings, monkeypatch):
    first_version(site)
    first = completed_audit_of(owner, site)
    mark(site, first, Issue.Review.IGNORED, BROKEN_404)
    mark(site, first, Issue.Review.REVIEWED, BROKEN_LINK)
    second_version(site)
    snapshots = []
    record = diff.record

    def record_twice(audit):
        # Inside finalize, while the frontier (which "removed" reads) is still there.
        for _ in range(2):
            counts = record(audit)
            snapshots.append(snapshot(audit))
        return counts

    monkeypatch.setattr(diff, "record", record_twice)
    second = completed_audit_of(owner, site)
    assert len(snapshots) == 2
    assert snapshots[0] == snapshots[1]
    assert issues_by_change(site, second) == {"new": NEW, "persisting": PERSISTING, "fixed": FIXED,
                                              "unknown": UNKNOWN}
    assert page_changes_of(site, PageChange.objects.filter(audit=second)) == PAGES
    # The 404 ignored in the first audit is carried forward ignored, so it leaves the counts as every total.
    persisting = {**COUNTS["issues"]["persisting"], "critical": COUNTS["issues"]["persisting"]["critical"] - 1}
    assert second.change_counts == {**COUNTS, "issues": {**COUNTS["issues"], "persisting": persisting}}
    assert (reviews(site, second)[BROKEN_404], reviews(site, second)[BROKEN_LINK]) == ("ignored", "reviewed")


def test_the_first_audit_of_a_site_has_no_change_anywhere_and_no_counts(owner, stranger, site, fast_settings):
    first_version(site)
    theirs = completed_audit_of(stranger, site)  # the same URL is another owner's site
    audit = completed_audit_of(owner, site)
    assert audit.site_id != theirs.site_id
    assert audit.baseline_id is None and audit.change_counts is None
    assert audit.issues.count() == 6
    assert set(audit.issues.values_list("change", flat=True)) == {Issue.Change.NONE}
    assert not GoneIssue.objects.filter(audit=audit).exists()
    assert not PageChange.objects.filter(audit=audit).exists()


def fail_in_finalize(audit_id: int) -> None:
    """A finalize that fails: the audit keeps everything its crawl stored."""
    Audit.objects.get(pk=audit_id).fail(Audit.ErrorCode.INTERNAL_ERROR, "failed on purpose",
                                        phase=Audit.Phase.FINALIZING)
    # This was the finalize task, and it has ended: nothing of it writes later (inlinks.ended_unindexed).
    Audit.objects.filter(pk=audit_id).update(
        finished_at=F("finished_at") - timedelta(seconds=settings.Q_CLUSTER["timeout"] + 1))


def test_a_failed_audit_is_not_the_baseline_of_the_next_one(owner, site, fast_settings):
    first_version(site)
    first = completed_audit_of(owner, site)
    second_version(site)
    failed = audit_of(owner, site, finalize=fail_in_finalize)
    assert failed.status == Audit.Status.FAILED
    assert failed.pages.filter(url=site.url("/fresh")).exists()  # it did see the second version
    third = completed_audit_of(owner, site)
    assert third.baseline_id == first.pk
    # Against the failed audit everything would persist and no page would differ.
    assert issues_by_change(site, third) == {"new": NEW, "persisting": PERSISTING, "fixed": FIXED,
                                             "unknown": UNKNOWN}
    assert page_changes_of(site, PageChange.objects.filter(audit=third)) == PAGES
    assert third.change_counts == COUNTS


def test_a_baseline_given_beforehand_is_used_instead_of_the_previous_completed_audit(owner, site, fast_settings):
    first, second = two_audits(owner, site)
    third = completed_audit_of(owner, site, baseline=first)
    assert third.baseline_id == first.pk
    assert issues_by_change(site, third) == issues_by_change(site, second)
    assert page_changes_of(site, PageChange.objects.filter(audit=third)) == PAGES


# --- the compare view's helpers -------------------------------------------------------


def page_change_fields(row: PageChange) -> tuple:
    # bool() since SQLite hands raw SELECTs' booleans back as 0 and 1.
    def flag(value):
        return None if value is None else bool(value)

    return (row.change, row.url_hash, row.url, row.status_before, row.status_after, row.title_before,
            row.title_after, row.canonical_before, row.canonical_after, flag(row.indexable_before),
            flag(row.indexable_after), bool(row.content_changed))


def test_compare_helpers_agree_with_the_rows_finalize_stored(owner, site, fast_settings):
    first, second = two_audits(owner, site)
    stored = second.issues
    assert set(diff.new_issues(second, first)) == set(stored.filter(change=Issue.Change.NEW))
    assert set(diff.persisting_issues(second, first)) == set(stored.filter(change=Issue.Change.PERSISTING))

    columns = ("change", "key", "url", "code", "severity", "message", "target_url")
    gone = diff.gone_issues(second, first)
    assert sorted(gone, key=lambda row: row["key"]) == list(
        GoneIssue.objects.filter(audit=second).order_by("key").values(*columns))
    assert triples(site, diff.gone_issues(second, first, "fixed")) == FIXED
    assert triples(site, diff.gone_issues(second, first, "unknown")) == UNKNOWN
    rank = {"critical": 0, "warning": 1, "notice": 2}
    assert [rank[row["severity"]] for row in gone] == sorted(rank[row["severity"]] for row in gone)
    assert diff.gone_issues(second, first, limit=2, offset=1) == gone[1:3]

    live = diff.page_changes(second, first)
    assert sorted(map(page_change_fields, live)) == sorted(
        map(page_change_fields, PageChange.objects.filter(audit=second)))
    changed = diff.page_changes(second, first, "changed")
    assert [row.url for row in changed] == sorted(site.url(p) for change, p in PAGES if change == "changed")
    page = diff.page_changes(second, first, limit=3, offset=2)
    assert list(map(page_change_fields, page)) == list(map(page_change_fields, live[2:5]))

    assert diff.live_counts(second, first) == second.change_counts == COUNTS
    assert diff.totals(second.change_counts) == {"new": 3, "persisting": 2, "fixed": 3, "unknown": 1}


def test_a_page_found_but_left_uncrawled_by_the_depth_limit_is_not_removed_and_its_issues_are_unknown(
        owner, site, fast_settings):
    site.set(**{"/": html(site, "/", ["/a", "/deep"]), "/a": html(site, "/a", ["/"]),
                "/deep": html(site, "/deep", ["/"], description=False)})
    first = completed_audit_of(owner, site, max_depth=1)
    assert first.pages.filter(url=site.url("/deep")).exists()
    site.set(**{"/": html(site, "/", ["/a"]), "/a": html(site, "/a", ["/", "/deep"])})  # /deep now at depth 2
    second = completed_audit_of(owner, site, max_depth=1)
    assert not second.pages.filter(url=site.url("/deep")).exists()
    assert issues_by_change(site, second) == {
        "new": set(), "persisting": set(), "fixed": set(),
        "unknown": {("meta_description_missing", "/deep", "")},
    }
    assert page_changes_of(site, PageChange.objects.filter(audit=second)) == {
        ("changed", "/"): ["content"], ("changed", "/a"): ["content"],
    }


def test_a_broken_link_whose_anchor_text_alone_changed_persists_and_is_not_fixed(owner, site, fast_settings):
    def linking(anchor: str) -> tuple[int, str]:
        status, body = html(site, "/a", ["/"])
        return status, body.replace("</ul>", f'<li><a href="/gone">{anchor}</a></li></ul>')

    site.set(**{"/": html(site, "/", ["/a"]), "/a": linking("Old words")})
    first = completed_audit_of(owner, site)
    site.set(**{"/a": linking("New words")})
    second = completed_audit_of(owner, site)
    changes = issues_by_change(site, second)
    link = ("broken_link_internal", "/a", "/gone")
    assert link in changes["persisting"]
    assert all(link not in changes[change] for change in ("new", "fixed", "unknown"))
    assert diff.live_counts(second, first) == second.change_counts


@pytest.mark.parametrize("review", [Issue.Review.IGNORED, Issue.Review.REVIEWED])
def test_an_issue_marked_on_a_validation_keeps_its_mark_in_the_next_full_audit(owner, site, fast_settings, review):
    """The validation's rows are where the person marked it; the next audit's baseline is the full one."""
    first_version(site)
    first = completed_audit_of(owner, site)
    check = completed_audit_of(owner, site, **follow_up_fields(first, Audit.Mode.VALIDATE))
    mark(site, check, review, BROKEN_404)
    second_version(site)
    second = completed_audit_of(owner, site)
    assert second.baseline_id == first.pk
    assert reviews(site, second)[BROKEN_404] == review


def test_an_issue_reopened_on_the_audit_after_a_validation_ignored_it_stays_open(owner, site, fast_settings):
    """The latest mark wins: the validation's old ignore does not come back in the next full audit."""
    first_version(site)
    first = completed_audit_of(owner, site)
    check = completed_audit_of(owner, site, **follow_up_fields(first, Audit.Mode.VALIDATE))
    mark(site, check, Issue.Review.IGNORED, BROKEN_404)
    first.adopt_validation_marks()  # as the next validation's start does
    assert reviews(site, first)[BROKEN_404] == Issue.Review.IGNORED
    # The person changed their mind, on the audit's own table (the triage view's set_review).
    first.set_review(Issue.objects.filter(pk=issue(site, first, *BROKEN_404).pk), Issue.Review.OPEN)
    second_version(site)
    second = completed_audit_of(owner, site)
    assert reviews(site, first)[BROKEN_404] == Issue.Review.OPEN
    assert reviews(site, second)[BROKEN_404] == Issue.Review.OPEN


def test_what_changed_since_the_baseline_leaves_out_an_issue_ignored_after_the_audit_ended(owner, site, fast_settings):
    first_version(site)
    completed_audit_of(owner, site)
    second_version(site)
    second = completed_audit_of(owner, site)
    new_before = diff.totals(second.change_counts)["new"]
    assert new_before == len(NEW)
    second.set_review(Issue.objects.filter(audit=second, change=Issue.Change.NEW, code="noindex"),
                      Issue.Review.IGNORED)
    second.refresh_from_db()
    assert diff.totals(second.change_counts)["new"] == new_before - 1


def test_an_audit_being_deleted_is_no_baseline(owner, site, fast_settings):
    first_version(site)
    first = completed_audit_of(owner, site)
    Audit.objects.filter(pk=first.pk).update(deleting=True)  # audits.purge has begun: its issues go first
    Issue.objects.filter(audit=first).delete()
    second = completed_audit_of(owner, site)
    assert second.baseline_id is None and diff.totals(second.change_counts).get("new", 0) == 0


def ignored_first(owner, site: EditableSite, which: tuple[str, str, str] = BROKEN_404) -> Audit:
    """A first audit of the first version, with the issue ``which`` ignored by a person."""
    first_version(site)
    first = completed_audit_of(owner, site)
    mark(site, first, Issue.Review.IGNORED, which)
    return first


def ignored_then_down(owner, site: EditableSite) -> Audit:
    """``ignored_first``; then the broken page answers 503 (each night until set back)."""
    first = ignored_first(owner, site)
    site.set(**{"/broken": (503, "down for the night")})
    return first


def test_an_ignored_issue_missing_from_one_audit_is_still_ignored_when_it_comes_back(owner, site, fast_settings):
    """Its page answered 503 one night: the next night's audit is compared with that one."""
    ignored_then_down(owner, site)
    missed = completed_audit_of(owner, site)
    assert BROKEN_404 not in reviews(site, missed)
    site.set(**{"/broken": None})  # a 404 again
    again = completed_audit_of(owner, site)
    assert again.baseline_id == missed.pk
    assert reviews(site, again)[BROKEN_404] == Issue.Review.IGNORED


def test_an_ignored_issue_missing_for_a_week_of_nights_is_still_ignored_when_it_comes_back(owner, site, fast_settings):
    ignored_then_down(owner, site)
    for _ in range(7):  # the README's "up to seven runs in between"
        missed = completed_audit_of(owner, site)
        assert BROKEN_404 not in reviews(site, missed)
    site.set(**{"/broken": None})  # a 404 again
    again = completed_audit_of(owner, site)
    assert reviews(site, again)[BROKEN_404] == Issue.Review.IGNORED


def test_an_issue_whose_page_failed_the_night_before_is_persisting_when_it_comes_back_not_new(
        owner, site, fast_settings):
    """Compared with a baseline that never read its page, an old issue is no news: no alert, no --fail-on-new."""
    first_version(site)
    completed_audit_of(owner, site)
    site.set(**{"/broken": (503, "down for the night")})
    for _ in range(2):
        missed = completed_audit_of(owner, site)
        assert BROKEN_404 not in reviews(site, missed)
    site.set(**{"/broken": None})  # a 404 again
    again = completed_audit_of(owner, site)
    assert issue(site, again, *BROKEN_404).change == Issue.Change.PERSISTING


def test_an_issue_back_on_a_page_the_baseline_read_without_it_is_new(owner, site, fast_settings):
    """A page that answered fine and then broke again: a regression, news."""
    first_version(site)
    completed_audit_of(owner, site)
    site.set(**{"/broken": html(site, "/broken", ["/"])})  # fixed for a night
    fixed = completed_audit_of(owner, site)
    assert BROKEN_404 not in reviews(site, fixed)
    site.set(**{"/broken": None})  # gone again
    again = completed_audit_of(owner, site)
    assert issue(site, again, *BROKEN_404).change == Issue.Change.NEW


def test_a_mark_taken_off_after_the_ignoring_run_is_not_brought_back(owner, site, fast_settings):
    ignored_first(owner, site)
    second = completed_audit_of(owner, site)
    assert reviews(site, second)[BROKEN_404] == Issue.Review.IGNORED
    mark(site, second, Issue.Review.OPEN, BROKEN_404)  # a person changed their mind
    site.set(**{"/broken": (503, "down for the night")})
    completed_audit_of(owner, site)
    site.set(**{"/broken": None})
    again = completed_audit_of(owner, site)
    assert reviews(site, again)[BROKEN_404] == Issue.Review.OPEN


def test_a_broken_link_whose_anchor_text_alone_changed_keeps_its_triage(owner, site, fast_settings):
    ignored_first(owner, site, BROKEN_LINK)
    status, body = html(site, "/", HOME_LINKS_1)
    assert "go to /broken" in body
    site.set(**{"/": (status, body.replace("go to /broken", "the page that is gone"))})
    second = completed_audit_of(owner, site)
    assert reviews(site, second)[BROKEN_LINK] == Issue.Review.IGNORED


def chain(site: EditableSite) -> None:
    """/ links /1, /1 links /2, /2 links /3: each a click deeper."""
    site.set(**{"/": html(site, "/", ["/1"]), "/1": html(site, "/1", ["/2"]), "/2": html(site, "/2", ["/3"]),
                "/3": html(site, "/3", ["/"])})


def test_pages_beyond_a_lowered_depth_limit_are_not_called_removed(owner, site, fast_settings):
    chain(site)
    completed_audit_of(owner, site, max_depth=5)
    shallow = completed_audit_of(owner, site, max_depth=1)
    assert not PageChange.objects.filter(audit=shallow, change=PageChange.Change.REMOVED).exists()
    deep_again = completed_audit_of(owner, site, max_depth=5)
    site.set(**{"/2": html(site, "/2", ["/"])})  # /3 unlinked: removed, at the same limits
    completed = completed_audit_of(owner, site, max_depth=5)
    assert deep_again.baseline_id == shallow.pk
    assert set(PageChange.objects.filter(audit=completed, change=PageChange.Change.REMOVED)
               .values_list("url", flat=True)) == {site.url("/3")}


def _with_head(page: tuple[int, str], tag: str) -> tuple[int, str]:
    status, body = page
    return status, body.replace("</head>", f"{tag}</head>")


# /a and /b sharing a title, or a description (html() gives each page its own unless it has none).
TWINS = {
    "title_duplicate": lambda site: {
        path: html(site, path, ["/"], title="The same title on two pages of the editable site")
        for path in ("/a", "/b")},
    "meta_description_duplicate": lambda site: {
        path: _with_head(html(site, path, ["/"], description=False),
                         '<meta name="description" content="One description on two pages, long enough to be shown.">')
        for path in ("/a", "/b")},
}


@pytest.mark.parametrize("code", list(TWINS))
@pytest.mark.parametrize(("twin_now", "verdict"), [((503, "down for the night"), "unknown"), (None, "fixed")],
                         ids=["twin-failed", "twin-gone"])
def test_a_duplicate_is_unknown_while_the_page_sharing_it_did_not_answer(owner, site, fast_settings, code,
                                                                         twin_now, verdict):
    site.set(**{"/": html(site, "/", ["/a", "/b"]), **TWINS[code](site)})
    first = completed_audit_of(owner, site)
    assert Issue.objects.filter(audit=first, code=code, url=site.url("/a")).exists()
    site.set(**{"/b": twin_now})
    second = completed_audit_of(owner, site)
    assert GoneIssue.objects.get(audit=second, code=code, url=site.url("/a")).change == verdict


def test_pages_beyond_a_lowered_page_limit_are_not_called_removed(owner, site, fast_settings):
    chain(site)
    completed_audit_of(owner, site, max_pages=100)
    small = completed_audit_of(owner, site, max_pages=2)
    assert not PageChange.objects.filter(audit=small, change=PageChange.Change.REMOVED).exists()


def test_a_scheduled_runs_baseline_is_not_a_run_of_an_earlier_schedule(owner):
    """Scheduled in February, audited by hand until June, scheduled again in July: July is compared with June."""
    url = "https://nightly.example/"

    def audit_on(month: int, day: int, **fields) -> Audit:
        audit = make_audit(owner, start_url=url, status=Audit.Status.COMPLETED, **fields)
        Audit.objects.filter(pk=audit.pk).update(created_at=datetime(2026, month, day, 3, tzinfo=UTC))
        return audit

    audit_on(2, 1, trigger=Audit.Trigger.SCHEDULE)
    june = audit_on(6, 1)
    Site.objects.filter(pk=june.site_id).update(scheduled_since=datetime(2026, 7, 1, 12, tzinfo=UTC))
    july = audit_on(7, 2, trigger=Audit.Trigger.SCHEDULE)
    assert diff.baseline_for(july) == june
    # From then on the schedule's own runs follow each other, whatever a person runs in between.
    audit_on(7, 10)
    august = audit_on(8, 2, trigger=Audit.Trigger.SCHEDULE)
    assert diff.baseline_for(august) == july


def test_a_new_run_time_keeps_the_series_but_a_schedule_set_again_starts_one(owner):
    """Moving the nightly run from 3:00 to 4:00 is the same series: a CI audit in between stays no baseline."""
    from audits import schedules

    url = "https://nightly.example/"
    first = make_audit(owner, start_url=url, trigger=Audit.Trigger.SCHEDULE, status=Audit.Status.COMPLETED)
    site = first.site
    Site.objects.filter(pk=site.pk).update(cadence=Site.Cadence.DAILY, hour=3)
    site.refresh_from_db()
    schedules.sync(site)  # the schedule goes live
    ci = make_audit(owner, start_url=url, status=Audit.Status.COMPLETED)
    site.hour = 4
    site.save(update_fields=["hour"])
    schedules.saved(site, ["hour"])
    tonight = make_audit(owner, start_url=url, trigger=Audit.Trigger.SCHEDULE)
    assert diff.baseline_for(tonight) == first
    # Unscheduled, audited by hand, scheduled again: the first run of the new series follows the hand audit.
    Audit.objects.filter(pk=tonight.pk).update(status=Audit.Status.COMPLETED)
    site.cadence = Site.Cadence.NONE
    site.save(update_fields=["cadence"])
    schedules.saved(site, ["cadence"])
    by_hand = make_audit(owner, start_url=url, status=Audit.Status.COMPLETED)
    site.cadence = Site.Cadence.DAILY
    site.save(update_fields=["cadence"])
    schedules.saved(site, ["cadence"])
    again = make_audit(owner, start_url=url, trigger=Audit.Trigger.SCHEDULE)
    assert diff.baseline_for(again) == by_hand
    assert ci.pk < tonight.pk
