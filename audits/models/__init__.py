"""Siteward's data: sites, their audits, what they found and what changed, and the crawl's lease tables."""

from .audit import SEVERITY_RANK, SEVERITY_RANKS, Audit, Severity
from .changes import GoneIssue, PageChange, RecheckedIssue
from .ignore_rule import IgnoreRule
from .lease import ChunkLease, ChunkLeaseQuerySet, FrontierQuerySet, FrontierURL
from .notification import Notification
from .results import FetchErrorCode, Inlink, Issue, IssueCode, LinkEdge, Page
from .site import CRAWL_SETTINGS, Site, SkippedRun
from .site_access import AuditSession, SiteAccess

__all__ = [
    "CRAWL_SETTINGS", "SEVERITY_RANK", "SEVERITY_RANKS", "Audit", "AuditSession", "ChunkLease", "ChunkLeaseQuerySet",
    "FetchErrorCode", "FrontierQuerySet", "FrontierURL", "GoneIssue", "IgnoreRule", "Inlink", "Issue", "IssueCode",
    "LinkEdge", "Notification", "Page", "PageChange", "RecheckedIssue", "Severity", "Site", "SiteAccess", "SkippedRun",
]
