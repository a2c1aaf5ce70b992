"""Hand-made page outcomes for driving ChunkWriter directly, without fetching."""

from crawler.page import PageOutcome
from crawler.types import FetchResult, Link, PageFacts


def parsed_page(url: str, *links: tuple[str, str], depth: int = 0) -> PageOutcome:
    """A 200 HTML page at ``url`` whose outlinks are ``(target, anchor text)`` pairs."""
    outlinks = tuple(Link(target, "a", text) for target, text in links)
    return PageOutcome(url, depth, FetchResult(url, url, status=200, content_type="text/html"),
                       PageFacts(links=outlinks), (), outlinks)
