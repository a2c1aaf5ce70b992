"""The issue catalogue: every code an audit can report, with why it matters and how to fix it.

This is the single source of the issue vocabulary. ``audits.models.IssueCode`` is
built from it, so adding a code here (and a check that emits it) is all it takes.
Codes and severities follow ``CHECKS.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import Finding, Severity

C, W, N = Severity.CRITICAL, Severity.WARNING, Severity.NOTICE


@dataclass(frozen=True, slots=True)
class IssueType:
    code: str
    severity: Severity
    title: str
    why: str
    fix: str
    group: str


# (code, severity, title, why it matters, how to fix)
_ROWS: dict[str, list[tuple[str, Severity, str, str, str]]] = {
    "Status and availability": [
        ("http_4xx", C, "Page returns 4xx",
         "Visitors and search engines get an error instead of the page, and links to it waste crawl budget.",
         "Restore the page, or redirect it (301) to its replacement and update links to it."),
        ("http_5xx", C, "Page returns 5xx",
         "A server error means the page is down for everyone; persistent 5xx pages get dropped from search results.",
         "Check the server logs for this URL and fix the error; make sure it answers 200 under normal load."),
        ("fetch_failed", C, "Page could not be fetched",
         "DNS, connection, TLS or timeout failures make the page unreachable for visitors and crawlers.",
         "Check DNS, the certificate and the server's availability and response time for this URL."),
        ("broken_link_internal", C, "Broken internal link",
         "A link to a missing page frustrates visitors and leaks link equity into a dead end.",
         "Point the link at a working URL, or restore or redirect the target."),
        ("broken_link_external", W, "Broken external link",
         "Links to dead external pages make your content look neglected and send visitors nowhere.",
         "Update the link to the resource's new address, or remove it."),
        # Recorded once by finalize (audits.notices) in place of the broken
        # external links it would otherwise report: a notice, since it says
        # nothing about the site, only that its external links went unchecked.
        ("external_links_unchecked", N, "External links unchecked",
         "Nearly every external link check failed before reaching a server (DNS or connection), so the crawler "
         "could not reach the internet: those links were left unchecked rather than each reported broken.",
         "Let the crawler's machine resolve names and connect out (DNS, firewall, proxy), then run the audit "
         "again; or turn external link checks off for this site."),
        # Recorded once by finalize (audits.notices) when a crawl of a few pages found
        # its links going to the same site under another host or scheme.
        ("links_to_sibling_origin", N, "Links go to another version of the site",
         "Most links on the crawled pages point at the same site under another host name or scheme (with or "
         "without www, http or https), which an audit treats as another site: those pages were not crawled, "
         "only checked as external links, so this audit covers a few pages.",
         "Audit the version the links point at; and make the site's links, canonical and redirects agree on one "
         "version, redirecting the other to it."),
        # Recorded once by finalize (audits.notices) when URLs were left uncrawled as likely crawler traps.
        ("crawl_traps_skipped", N, "URLs skipped as likely crawler traps",
         "Some linked URLs look like a crawler trap: paths that repeat (a relative link that keeps adding "
         "itself), or URLs very long, very deep or with very many parameters. The audit did not crawl them, so "
         "it covers less than the links reach; search engines waste their crawl budget on the same URLs.",
         "Check the URLs named: link such pages with rel=\"nofollow\", keep them out with robots.txt or "
         "an exclude pattern, or stop generating endless variants."),
        ("broken_resource", W, "Broken image, script or stylesheet",
         "A missing resource breaks how the page looks or works.",
         "Fix the resource's URL or restore the file on the server."),
    ],
    "Redirects": [
        ("redirect_internal_link", N, "Internal link to a redirect",
         "Each redirect adds a round trip for visitors and crawlers.",
         "Link straight to the final URL."),
        ("redirect_chain", W, "Redirect chain",
         "Every extra hop slows the page and search engines may stop following long chains.",
         "Redirect the first URL straight to the final one."),
        ("redirect_loop", C, "Redirect loop",
         "The URL never resolves to a page: browsers show an error and crawlers give up.",
         "Fix the redirect rules so the chain ends at a page that answers 200."),
        ("redirect_broken_target", C, "Redirect to a broken page",
         "The redirect sends visitors to an error instead of content.",
         "Point the redirect at a working page, or restore the target."),
        ("redirect_temporary", N, "Temporary redirect",
         "302/303/307 tell search engines the move is temporary, so the old URL keeps being indexed.",
         "Use a 301 or 308 if the move is permanent."),
        ("meta_refresh", W, "Meta refresh",
         "Meta refresh redirects are slow, bad for accessibility and less reliable for search engines than HTTP redirects.",
         "Replace it with a server-side 301 redirect."),
        ("http_not_redirected", W, "HTTP version not redirected",
         "Serving the page over plain http as well as https splits signals and exposes visitors.",
         "Redirect every http:// URL to its https:// form with a 301."),
    ],
    "HTTPS and mixed content": [
        ("mixed_content_active", C, "Active mixed content",
         "Browsers block scripts, stylesheets and frames loaded over http on an https page, breaking it.",
         "Load the resource over https."),
        ("mixed_content_passive", W, "Passive mixed content",
         "Images and media over http trigger browser warnings and can be tampered with in transit.",
         "Load the resource over https."),
        ("insecure_link_or_form", N, "Link or form to http",
         "Sending visitors or form data over http exposes them to interception.",
         "Change the link or form action to https."),
    ],
    "Indexability": [
        ("noindex", W, "Page is noindex",
         "The page will not appear in search results; if that is not intended, you lose its traffic.",
         "Remove the noindex directive (meta robots or X-Robots-Tag) if the page should be found."),
        ("nofollow", N, "Nofollow",
         "Nofollow stops search engines from following links, so linked pages may not be discovered.",
         "Remove nofollow from internal links and pages unless it is deliberate."),
        ("blocked_by_robots", N, "Blocked by robots.txt",
         "Search engines cannot crawl this URL, so its content is invisible to them.",
         "Allow the URL in robots.txt if it should be crawled."),
        ("robots_txt_unavailable", C, "robots.txt unavailable",
         "A 5xx or timeout on robots.txt makes search engines treat the whole site as disallowed.",
         "Make /robots.txt answer 200 (or 404 if you have none) quickly."),
        ("robots_txt_missing", N, "robots.txt missing",
         "Without robots.txt crawlers may waste time on unimportant URLs and cannot find your sitemap.",
         "Add a /robots.txt that lists your sitemap."),
        ("crawl_delay_capped", N, "Crawl-delay too long",
         "robots.txt asks crawlers to wait longer between requests than any crawler will: Siteward waits at "
         "most 30 s, Bing slows to a crawl and Google ignores the line, so a big site is crawled slowly or "
         "its changes are found late.",
         "Lower or remove the Crawl-delay line in robots.txt; limit crawl rate in the search engines' own "
         "webmaster tools instead."),
    ],
    "Sitemaps": [
        ("sitemap_missing", N, "No sitemap",
         "A sitemap helps search engines find every page, especially deep or poorly linked ones.",
         "Publish /sitemap.xml and reference it with a Sitemap: line in robots.txt."),
        ("sitemaps_partly_read", N, "Sitemaps only partly read",
         "The audit stopped reading the sitemaps early, at one of its own limits (50,000 URLs in all, 50 files, "
         "a minute) or after several files in a row failed, so URLs listed only in the rest were not checked "
         "as listings or for orphans.",
         "Nothing is wrong with the site for that alone; to audit every listed URL, audit sections of the site "
         "with include patterns, or keep the sitemaps to the URLs that matter."),
        ("sitemap_invalid", W, "Invalid sitemap",
         "Search engines ignore a sitemap they cannot read, so it does not help discovery.",
         "Serve well-formed XML within 50,000 URLs and 50 MB, listing only this host's URLs."),
        ("sitemap_bad_url", W, "Bad URL in sitemap",
         "Listing URLs that are broken, redirected, noindex or blocked wastes crawl budget and trust.",
         "List only canonical URLs that answer 200 and are indexable."),
        ("orphan_page", W, "Orphan page",
         "A page that no internal link reaches gets little authority and is hard for visitors to find.",
         "Link to it from relevant pages, or remove it from the sitemap if it is obsolete."),
    ],
    "Canonical": [
        ("canonical_missing", N, "Canonical missing",
         "Without a canonical, search engines guess which of similar URLs to index.",
         "Add <link rel=\"canonical\" href=\"…\"> pointing at the preferred URL."),
        ("canonical_conflict", W, "Conflicting canonicals",
         "Several or contradicting canonicals make search engines ignore all of them.",
         "Keep exactly one canonical, in <head>, agreeing with any Link header."),
        ("canonical_bad_target", C, "Canonical points to a bad URL",
         "A canonical that redirects, errors, is noindex or is blocked by robots.txt sends search engines to the "
         "wrong place.",
         "Point the canonical at an indexable URL that answers 200 and that robots.txt allows."),
        ("canonical_relative_or_invalid", N, "Relative or invalid canonical",
         "Relative or malformed canonicals are easy to get wrong and may point at another scheme or host.",
         "Use an absolute URL on the page's own scheme and host."),
    ],
    "Content": [
        ("title_missing", C, "Title missing",
         "The title is the headline in search results and browser tabs; without it the page ranks and reads poorly.",
         "Add a unique, descriptive <title>."),
        ("title_duplicate", W, "Duplicate title",
         "Pages sharing a title compete with each other and look identical in search results.",
         "Give every page a title that says what is unique about it."),
        ("title_length", N, "Title too short or too long",
         "Short titles waste the headline; long ones are cut off in search results.",
         "Keep titles within the audit's limits, which the message gives (by default 20 to 60 characters)."),
        ("meta_description_missing", W, "Meta description missing",
         "Search engines then pick a snippet themselves, often a poor one.",
         "Add a meta description summarising the page."),
        ("meta_description_duplicate", W, "Duplicate meta description",
         "Identical descriptions make different pages look the same in results.",
         "Write a distinct description for each page."),
        ("meta_description_length", N, "Meta description too short or too long",
         "Short descriptions under-sell the page; long ones are truncated.",
         "Keep descriptions within the audit's limits, which the message gives (by default 80 to 160 characters)."),
        ("head_tags_multiple", W, "Repeated or misplaced head tags",
         "Several titles or descriptions, or meta tags in <body>, may be ignored or misread.",
         "Keep one <title> and one meta description, inside <head>."),
        ("h1_missing", W, "H1 missing",
         "The main heading tells visitors and search engines what the page is about.",
         "Add one <h1> with the page's main topic."),
        ("h1_multiple", N, "Several H1 headings",
         "Several top-level headings blur the page's main topic.",
         "Keep one <h1> and use <h2>–<h6> below it."),
        ("img_alt_missing", W, "Image without alt text",
         "Screen-reader users and search engines cannot tell what the image shows.",
         "Add alt text; use alt=\"\" for purely decorative images."),
        ("hreflang_error", W, "hreflang problem",
         "Broken hreflang annotations make search engines show the wrong language version.",
         "Use valid language codes, include a self-reference and x-default, point every alternate at an "
         "indexable URL that answers 200 and is its own canonical, and link back from every alternate."),
        ("duplicate_content", W, "Duplicate content",
         "Identical pages split ranking signals and waste crawl budget.",
         "Merge the pages, or mark one canonical to the other."),
    ],
    "Structure and performance": [
        ("deep_page", N, "Page is deep in the site",
         "Pages many clicks from the start get crawled less and are hard for visitors to reach.",
         "Link to it from higher-level pages so it is within the audit's click depth of the home page (by default 4)."),
        ("slow_response", W, "Slow response",
         "A slow first byte delays everything else and hurts visitors and rankings.",
         "Cache the page or speed up the server work behind it."),
    ],
    # Rendered audits only (crawler.render): what a browser sees against the raw HTML.
    "Rendering": [
        ("render_title_changed", W, "Title set or changed by JavaScript",
         "Crawlers that read the HTML without running JavaScript, and a search engine before it renders, see "
         "another title than visitors do.",
         "Put the final title in the HTML the server sends (server-side rendering or pre-rendering)."),
        ("render_canonical_changed", W, "Canonical set or changed by JavaScript",
         "A canonical that differs before and after rendering sends search engines two signals; the raw one "
         "may be the only one some of them read.",
         "Send the final canonical link in the HTML itself, and do not change it from scripts."),
        ("render_noindex_changed", C, "noindex added or removed by JavaScript",
         "Whether the page may be indexed differs before and after rendering: a search engine may drop a page "
         "meant to be indexed, or index one meant to stay out.",
         "Decide indexability on the server: put the robots meta tag (or X-Robots-Tag header) in the response."),
        ("render_links_added", W, "Links only present after rendering",
         "Crawlers that do not run JavaScript cannot follow these links, so the pages behind them may never be "
         "found or get less weight.",
         "Render the navigation and content links as plain <a href> in the HTML the server sends."),
        ("render_content_added", N, "Content mostly added by JavaScript",
         "The rendered page has far more text than the HTML: search engines that index before rendering, and "
         "previews and readers, see an almost empty page.",
         "Render the main content on the server, or pre-render the page."),
        ("render_js_error", W, "JavaScript error while rendering",
         "A script error can leave the page half built for visitors and for search engines that render it.",
         "Open the page with the browser console open, fix the error it shows, and test again."),
        ("render_request_failed", W, "A request the page made failed",
         "A script, stylesheet, image or data request that fails in the browser breaks what the page shows; an "
         "HTML-only crawl cannot see it.",
         "Fix or remove the failing URL in the page's scripts or markup."),
        ("render_request_blocked", N, "A request the page made was refused",
         "The page's scripts asked for an address the crawler refuses to reach (a private or reserved network, "
         "another scheme, or a URL robots.txt disallows), so that part of the page was not rendered.",
         "If the request is intended, serve it from the site's own public address; else remove it."),
        ("render_failed", W, "The page could not be rendered",
         "The browser crashed or ran out of memory on this page: visitors with weaker devices may fare the same.",
         "Look for very large scripts, memory leaks or heavy pages; open the page in a browser to reproduce."),
        ("render_timeout", W, "Rendering never finished",
         "The page kept the browser busy past the render deadline (a script that never ends, or that spins): "
         "its facts come from the raw HTML.",
         "Look for scripts that loop or keep the main thread busy, and for requests that never finish."),
    ],
    "More checks": [
        # Judged by finalize (audits.finalize.soft_404s), against the start step's probe (crawler.soft404).
        ("soft_404", W, "Soft 404",
         "A 'not found' page that answers 200 tells search engines and link checkers the URL is fine: it gets "
         "indexed as real content, wastes crawl budget, and broken links to it go unnoticed.",
         "Answer 404 (or 410 for content removed for good) for URLs that do not exist, keeping the helpful "
         "page as the 404's body; redirect a moved page to where it went."),
        ("anchor_missing", N, "Link to a missing anchor",
         "The link promises a section (its #fragment), but no element on the target page has that id or "
         "<a name>: visitors land at the top of the page and must look for it. It often follows a renamed heading.",
         "Point the link at an id the page has, or give the section that id again (keep an old id beside a "
         "new one when a heading is renamed)."),
        ("heading_order", N, "Heading levels skipped",
         "Skipped heading levels confuse screen-reader navigation and the page outline.",
         "Use heading levels in order (h2 after h1, h3 after h2)."),
        ("html_lang_missing", N, "Page language missing",
         "Without <html lang>, screen readers and translators guess the language.",
         "Add a valid lang attribute to <html>."),
        ("viewport_missing", W, "Viewport missing",
         "Without a viewport meta tag the page renders badly on phones.",
         "Add <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">."),
        ("structured_data_invalid", W, "Invalid structured data",
         "Broken JSON-LD is ignored, so the page loses rich results.",
         "Fix the JSON syntax and include @context and @type."),
        ("near_duplicate", N, "Near-duplicate content",
         "Nearly identical pages compete with each other.",
         "Merge them or make each clearly distinct."),
        ("thin_content", N, "Thin content",
         "Pages with very little text rarely rank and may be seen as low quality.",
         "Add useful content, or noindex or merge the page."),
        ("large_html", W, "Large HTML",
         "Very large documents are slow to download and parse, and may be cut off by crawlers.",
         "Trim inline scripts, styles and markup; paginate long lists."),
        ("binary_html", W, "Binary file served as HTML",
         "Browsers show the bytes as garbled text, and search engines cannot index the file or the page it should have been.",
         "Serve the file with its real Content-Type (application/pdf, image/png...), or fix what writes binary data into the page."),
        ("large_image", N, "Large image",
         "Big images slow the page, especially on mobile.",
         "Compress the image and serve an appropriately sized version."),
        ("dead_end", N, "Page without links",
         "A page with no outgoing links is a dead end for visitors and crawlers.",
         "Add navigation or related links."),
        ("url_hygiene", N, "Untidy URL",
         "Uppercase, underscores, spaces, double slashes, tracking parameters or very long URLs cause duplicates and look untrustworthy.",
         "Use short lower-case URLs with hyphens and no tracking parameters."),
        ("security_headers_missing", N, "Security headers missing",
         "HSTS, nosniff and framing protection defend visitors against downgrade, sniffing and clickjacking attacks.",
         "Send Strict-Transport-Security, X-Content-Type-Options: nosniff and a CSP frame-ancestors (or X-Frame-Options)."),
    ],
}

CATALOGUE: dict[str, IssueType] = {
    code: IssueType(code, severity, title, why, fix, group)
    for group, rows in _ROWS.items()
    for code, severity, title, why, fix in rows
}


# Reported once the crawl is over, by the checks across pages and links
# (audits.finalize), never by a page's own checks.
LINK_CODES = frozenset({"broken_link_internal", "broken_link_external", "broken_resource",
                        "redirect_internal_link", "redirect_broken_target"})
# Of those, the ones only the whole site's crawl can judge: duplicates, orphans,
# depth, soft 404s, large images, linked URLs robots.txt kept out, hreflang return
# links and targets, sitemap and canonical targets, and the crawl's own notices
# (external links left unchecked, sibling origins, traps). A validation, which
# re-fetches a few URLs, carries them as unknown. The README lists them by code.
SITE_WIDE_CODES = frozenset({"title_duplicate", "meta_description_duplicate", "duplicate_content",
                             "orphan_page", "deep_page", "hreflang_error", "sitemap_bad_url",
                             "canonical_bad_target", "blocked_by_robots", "soft_404", "large_image",
                             "external_links_unchecked", "links_to_sibling_origin", "crawl_traps_skipped"})
# Judged across two pages, the link's and its target's (audits.missing_anchors): a validation fetches
# both and judges them again.
FRAGMENT_CODES = frozenset({"anchor_missing"})
CROSS_PAGE_CODES = LINK_CODES | SITE_WIDE_CODES | FRAGMENT_CODES
# Codes both: a page check's finding about the page's own tags (no target), and a
# cross-page one about a target (its answer, its return link). Delta carries and
# validation re-checks the first kind as any page check's.
PAGE_AND_CROSS_CODES = frozenset({"hreflang_error"})
# About the URL's own answer (its status, its redirects, its speed): judged
# whenever the URL answered at all. Every other page-level code is about an
# HTML page's content, judged only on a page that answered 2xx.
ANSWER_CODES = frozenset({"http_4xx", "http_5xx", "fetch_failed", "redirect_chain", "redirect_loop",
                          "redirect_temporary", "redirect_broken_target", "slow_response"})
# Set at the start from robots.txt, the sitemaps and the start URL's http:// form.
START_CODES = frozenset({"robots_txt_unavailable", "robots_txt_missing", "crawl_delay_capped", "sitemap_missing",
                         "sitemaps_partly_read", "sitemap_invalid", "http_not_redirected"})
# The start codes judged only once the start page may be crawled: sitemaps and the http:// probe
# are not looked at when robots.txt disallows the start page (a validation goes on without them).
SITE_READ_CODES = frozenset({"sitemap_missing", "sitemaps_partly_read", "sitemap_invalid", "http_not_redirected"})


def finding(
    code: str, message: str, target_url: str | None = None, severity: Severity | None = None,
    variant: str = "",
) -> Finding:
    """Build a Finding with the catalogue's default severity unless one is given."""
    issue_type = CATALOGUE[code]  # KeyError on an unknown code is a programming error
    return Finding(code, severity or issue_type.severity, message, target_url, variant)
