"""What an audit found: pages, issues, and the links between pages."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from crawler.catalogue import CATALOGUE
from crawler.types import FetchError as CrawlFetchError

from .audit import SEVERITY_RANK, Audit, Severity

# The issue vocabulary is the crawler's catalogue, so there is exactly one list.
IssueCode = models.TextChoices("IssueCode", [(code.upper(), (code, t.title)) for code, t in CATALOGUE.items()])
FetchErrorCode = models.TextChoices("FetchErrorCode", [(e.name, (e.value, e.label)) for e in CrawlFetchError])


class Page(models.Model):
    """One URL the audit fetched: a page, an internal resource, or a checked external link."""

    class Kind(models.TextChoices):
        PAGE = "page", "Page"
        RESOURCE = "resource", "Resource"
        EXTERNAL = "external", "External link"

    # db_index=False here and on the other per-audit tables: every index of theirs
    # leads with audit, so the FK's own index only cost a write per row.
    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="pages", db_index=False)
    url_hash = models.CharField(max_length=32)
    url = models.TextField()
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PAGE)
    final_url = models.TextField(blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    redirect_chain = models.JSONField(default=list, blank=True)  # [[url, status, location], …]
    redirect_count = models.PositiveSmallIntegerField(default=0)
    content_type = models.CharField(max_length=100, blank=True)
    size_bytes = models.PositiveIntegerField(default=0)
    ttfb_ms = models.PositiveIntegerField(default=0)
    total_ms = models.PositiveIntegerField(default=0)
    depth = models.PositiveSmallIntegerField(default=0)
    title = models.CharField(max_length=1000, blank=True)
    description = models.TextField(blank=True)
    description_hash = models.CharField(max_length=32, blank=True)  # a key for the description, which may be long
    canonical = models.TextField(blank=True, help_text="Absolute, normalised canonical URL")
    canonical_hash = models.CharField(max_length=32, blank=True)
    h1_count = models.PositiveSmallIntegerField(default=0)
    word_count = models.PositiveIntegerField(default=0)
    robots = models.CharField(max_length=200, blank=True)
    # What the page's HTML says apart from its headers: its meta robots
    # directives and canonical tags (audits.crawl.rows.head_facts). A delta
    # crawl rebuilds a reused page from these and the headers of its new answer.
    # NULL when the page was not parsed or its checks broke: nobody checked its content.
    head_facts = models.JSONField(null=True, blank=True)
    # The ids and <a name>s a fragment may name, one per line (crawler.anchors). NULL (not parsed, or past
    # the cap: no link into the page is judged anchor_missing) differs from "" (a page without anchors).
    anchors = models.TextField(null=True, blank=True)  # noqa: DJ001
    indexable = models.BooleanField(default=False)
    in_sitemap = models.BooleanField(default=False)
    content_hash = models.CharField(max_length=32, blank=True)
    inlinks = models.PositiveIntegerField(default=0)
    outlinks = models.PositiveIntegerField(default=0)
    fetch_error = models.CharField(max_length=32, choices=FetchErrorCode.choices, blank=True)
    fetch_error_detail = models.CharField(max_length=500, blank=True)
    # The validators the URL answered with, as sent: what a later audit's
    # conditional requests (If-None-Match / If-Modified-Since) need.
    etag = models.CharField(max_length=200, blank=True)
    last_modified = models.CharField(max_length=100, blank=True)
    # The decoded HTML body's hash: a delta crawl reuses a page whose server
    # never answers 304 when its body is byte for byte what it was.
    body_hash = models.CharField(max_length=32, blank=True)
    # Set by a delta crawl on a page it reused: the audit whose parse it carries.
    unchanged_since = models.PositiveIntegerField(null=True, blank=True)
    # A rendered page's facts above are the browser's; these are its HTML's
    # (title, canonical, robots, words, internal links), to show what JavaScript changed.
    rendered = models.BooleanField(default=False)
    raw_facts = models.JSONField(null=True, blank=True)
    crawled_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["depth", "id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "url_hash"], name="page_unique_url_per_audit"),
        ]
        indexes = [
            # Page table filters and the status-code chart.
            models.Index(fields=["audit", "kind", "status_code"], name="page_audit_kind_status"),
            # Depth filter, depth chart and the deep_page finalize check.
            models.Index(fields=["audit", "kind", "depth"], name="page_audit_kind_depth"),
            # The pages table in its default order (Meta.ordering, audits.page_views.PAGE_SORTS["depth"]):
            # read in that order, not sorted for every screen.
            models.Index(fields=["audit", "depth", "id"], name="page_audit_depth"),
            # Duplicate title / content finalize checks group by these. HTML pages
            # only: the resource and external rows (most of an audit's rows) have
            # neither, and each would cost two index entries for nothing.
            models.Index(fields=["audit", "title"], name="page_audit_title", condition=Q(kind="page")),
            models.Index(fields=["audit", "content_hash"], name="page_audit_content_hash", condition=Q(kind="page")),
            models.Index(fields=["audit", "description_hash"], name="page_audit_description",
                         condition=Q(kind="page")),
            # Live speed: the rows written in the last 30 seconds (audits.progress_panel).
            # crawled_at grows within an audit, so the crawl appends at its end.
            models.Index(fields=["audit", "crawled_at"], name="page_audit_crawled"),
        ]

    def __str__(self):
        return self.url

    def get_absolute_url(self):
        return reverse("page-detail", args=[self.audit_id, self.pk])

    @property
    def status_class(self) -> str:
        """The URL's own answer: a URL that redirected is 3xx whatever it ended at."""
        if self.redirect_count:
            return "3xx"
        if self.status_code is None:
            return "error"
        return f"{self.status_code // 100}xx"


class Issue(models.Model):
    class Review(models.TextChoices):
        OPEN = "open", "Open"
        REVIEWED = "reviewed", "Reviewed"
        IGNORED = "ignored", "Ignored"

    class Change(models.TextChoices):
        NONE = "", "No earlier audit to compare with"
        NEW = "new", "New"
        PERSISTING = "persisting", "Persisting"

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="issues", db_index=False)
    page = models.ForeignKey(Page, on_delete=models.CASCADE, null=True, blank=True, related_name="issues")
    url = models.TextField(help_text="The page the issue is on (the source page for link issues)")
    # Which URL's crawl can say the issue is gone (audits.diff), kept on issues
    # without a page row too (a URL refused by robots.txt).
    url_hash = models.CharField(max_length=32, blank=True)
    code = models.CharField(max_length=40, choices=IssueCode.choices)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    # The issues table's default order by severity (issue_audit_rank), kept by the database from
    # ``severity``: every path that writes or re-grades an issue, SQL of our own included, keeps it right.
    severity_rank = models.GeneratedField(expression=SEVERITY_RANK, output_field=models.SmallIntegerField(),
                                          db_persist=True)
    message = models.TextField()
    target_url = models.TextField(blank=True)
    key = models.CharField(max_length=32, help_text="Stable hash of what makes the issue unique")
    review = models.CharField(max_length=10, choices=Review.choices, default=Review.OPEN)
    # A person reopened it (Audit.set_review): the site's ignore rules leave it open, in this audit and the next.
    # A database default too: the crawl writes issues with SQL of its own (insert_issues, a delta's copies).
    reopened = models.BooleanField(default=False, db_default=False)
    # Set at finalize against the baseline audit (audits.diff).
    change = models.CharField(max_length=10, choices=Change.choices, blank=True, default=Change.NONE)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            # Re-inserting the same issue (a retried chunk, a re-run finalize) is harmless.
            models.UniqueConstraint(fields=["audit", "key"], name="issue_unique_key_per_audit"),
        ]
        indexes = [
            # The summary by severity and code, and its ignored ones: review too, so counting them
            # reads this index alone, not a row of the table for each issue. Not issue_audit_rank:
            # SQLite reads a generated column from the table even where an index holds it.
            models.Index(fields=["audit", "severity", "code", "review"], name="issue_audit_severity_code"),
            # The issues table in its default order (audits.issue_views.ISSUE_SORTS["severity"]), and
            # filtered by severity and type, read in that order: no sort of the whole audit.
            models.Index(fields=["audit", "severity_rank", "code", "id"], name="issue_audit_rank"),
            # ... and a link issue matched across audits by code, page and target (audits.diff.same_issue):
            # with the page's hash in the index that is a few rows, not every issue of the code.
            models.Index(fields=["audit", "code", "url_hash"], name="issue_audit_code_url"),
            # The issues of an audit in the order found (Meta.ordering, exports, the "found" sort).
            models.Index(fields=["audit", "id"], name="issue_audit_id"),
        ]

    def __str__(self):
        return f"{self.code} on {self.url}"

    @property
    def issue_type(self):
        return CATALOGUE.get(self.code)


class LinkEdge(models.Model):
    """A link from a crawled page to a URL; one row per (source, target, tag).

    No unique key: a page's edges are written in the same fenced transaction
    as the page, after deleting whatever an earlier try wrote for that source
    (``audits.crawl.writer``), so a retry replaces them instead of adding.
    """

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="links", db_index=False)
    source_hash = models.CharField(max_length=32)
    source_url = models.TextField()
    target_hash = models.CharField(max_length=32)
    target_url = models.TextField()
    tag = models.CharField(max_length=10, default="a")
    anchor_text = models.CharField(max_length=200, blank=True)
    nofollow = models.BooleanField(default=False)
    internal = models.BooleanField(default=True)
    # The fragments the source's links to the target name, one per line (crawler.anchors): most are "".
    fragments = models.TextField(blank=True, default="")

    class Meta:
        # No index by target: edges arrive with random target hashes, so one would
        # dirty a different index page for nearly every edge the crawl inserts.
        # Lookups by target go through Inlink, built sorted once the audit ends.
        indexes = [
            # Outlinks of a page, and the delete before a page's edges are (re)written.
            models.Index(fields=["audit", "source_hash"], name="link_audit_source"),
            # The hreflang alternates alone, for finalize's two hreflang checks:
            # rare on most sites, so the other edges add no entry.
            models.Index(fields=["audit", "source_hash"], name="link_hreflang", condition=Q(tag="hreflang")),
        ]

    def __str__(self):
        return f"{self.source_url} -> {self.target_url}"


class Inlink(models.Model):
    """The link edges of an audit by target: built once the audit has ended, sorted, in one statement.

    Kept apart from LinkEdge so the crawl never maintains an index by target
    (see LinkEdge.Meta); a sorted build fills the key in order. ``Audit.links_indexed``
    says whether an audit's rows are here and current; until then (a running or
    resumed audit, or one whose build task has not run yet) lookups scan the
    audit's edges instead (``audits.inlinks``).
    """

    # The key is the lookup (inlinks of a URL, a page's "linked from" list), so
    # no surrogate id and its second index are built beside it.
    pk = models.CompositePrimaryKey("audit", "target_hash", "tag", "edge_id")
    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="+", db_index=False)
    target_hash = models.CharField(max_length=32)
    tag = models.CharField(max_length=10)
    edge_id = models.BigIntegerField()  # the LinkEdge row

    def __str__(self):
        return f"{self.tag} edge {self.edge_id} -> {self.target_hash}"
