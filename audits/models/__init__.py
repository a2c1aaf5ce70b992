"""Siteward's data: audits, what they found, and the crawl's lease tables."""

from .audit import Audit, Severity
from .lease import ChunkLease, ChunkLeaseQuerySet, FrontierQuerySet, FrontierURL
from .results import FetchErrorCode, Inlink, Issue, IssueCode, LinkEdge, Page

__all__ = [
    "Audit", "ChunkLease", "ChunkLeaseQuerySet", "FetchErrorCode", "FrontierQuerySet", "FrontierURL",
    "Inlink", "Issue", "IssueCode", "LinkEdge", "Page", "Severity",
]
