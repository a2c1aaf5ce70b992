"""Rendering a page in headless Chromium (Playwright), with every request the page makes through our fetcher.

Chromium never reaches the network itself: it is launched behind a proxy that
does not exist (loopback included), so any request the route handler does not
answer fails. The handler answers each one with ``Fetcher.fetch``: the SSRF
guard checks the address it connects to, the byte caps and deadlines apply,
and a private site's credentials go to its own origin only. WebSockets,
downloads, service workers and schemes other than http(s) never get out;
WebRTC and window.open are taken from every frame before its scripts run.
The site's answers keep their own CORS verdict, and a script of another
origin (a third party's frame) asking for the site is refused: those answers
carry the site's credentials. A browser that dies is launched again, a few times.

One ``Renderer`` per chunk: a fresh browser context, no profile on disk, a few
pages at a time (``slots``), each within ``deadline`` seconds plus a grace
after which it is abandoned as ``render_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .fetch import REDIRECT_STATUSES, Fetcher
from .html_rules import URL_MAX
from .types import FetchError
from .urls import InvalidURL, origin_of

log = logging.getLogger(__name__)

# Debian's Chromium; Playwright never downloads a browser of its own.
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage",
    # Every request goes through the route handler; anything else meets a dead proxy.
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
    # No name is resolved by the browser itself: a lookup is a message to a nameserver.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    # A page's JavaScript heap: a page that needs more crashes (render_failed), the worker does not.
    "--js-flags=--max-old-space-size=256",
]
# WebRTC's UDP (STUN, peer checks) goes around any proxy (Chromium's disable_non_proxied_udp policy
# still sent STUN to a named server here): every frame's page loses the API before its scripts run.
# And a page opens no windows with window.open: Chromium runs without a popup blocker under
# Playwright, and a popup is neither routed nor closed with the page (see _watch for the rest).
PAGE_LIMITS = """for (const name of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel",
                   "RTCRtpSender", "RTCRtpReceiver", "RTCIceCandidate", "RTCSessionDescription"]) {
  try { Object.defineProperty(globalThis, name, {value: undefined, writable: false, configurable: false}); }
  catch (e) {}
}
try { Object.defineProperty(globalThis, "open", {value: () => null, writable: false, configurable: false}); }
catch (e) {}"""
# Browsers launched in one chunk, the first included: each after the one before died (crashed, killed
# for its memory).
MAX_LAUNCHES = 3
RENDER_DEADLINE = 15.0
# After the deadline, how long the DOM may take to come back before the page is abandoned.
GRACE = 5.0
# Requests one page may make; past it the rest are refused.
MAX_REQUESTS = 300
# A subresource's body cap.
MAX_RESOURCE_BYTES = 8 * 1024 * 1024
# The rendered DOM kept for parsing.
MAX_DOM_BYTES = 10 * 1024 * 1024
# Console errors, failed and refused requests kept per page: a script logging in a loop would
# otherwise fill the worker's memory within the deadline. The page's issues name the first few.
MAX_NOTES = 1000
FETCHED_METHODS = ("GET", "HEAD")


@dataclass
class Rendered:
    """What rendering one page gave: its DOM, or why there is none, and what went wrong on the way."""

    url: str
    html: bytes | None = None
    idle: bool = True  # False: the network never went quiet; the DOM is the deadline's
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, why) requests that failed
    blocked: list[tuple[str, str]] = field(default_factory=list)  # (url, why) requests refused
    problem: str = ""  # "render_failed" or "render_timeout"
    detail: str = ""


class Renderer:
    """Headless Chromium for one chunk. ``async with Renderer(...) as r: await r.render(url, body)``.

    ``fetcher`` answers the page's requests (its guard decides which addresses
    may be reached); ``may_request(url)`` returns why a URL is refused
    (robots.txt, say) or None. Without Chromium or Playwright, every render
    comes back ``render_failed`` and says why: the HTML crawl goes on.
    """

    def __init__(self, fetcher: Fetcher, *, executable: str = CHROMIUM, deadline: float = RENDER_DEADLINE,
                 slots: int = 2, may_request: Callable[[str], str | None] = lambda url: None,
                 user_agent: str | None = None) -> None:
        self.fetcher = fetcher
        self.executable = executable
        self.deadline = deadline
        self.may_request = may_request
        self.user_agent = user_agent
        self._slots = asyncio.Semaphore(max(1, slots))
        self._playwright = None
        self._browser = None
        self._context = None
        self._launches = 0
        self._restarting = asyncio.Lock()
        self._rendering: set = set()  # the pages the slots are rendering now; any other page is a popup
        self._opening = 0  # the slots' new_page calls under way
        self.unavailable = ""

    async def __aenter__(self) -> Renderer:
        try:
            # Imported here: Playwright adds tens of megabytes and a tenth of a second to
            # every crawl process, and only a rendered audit starts a browser.
            from playwright.async_api import async_playwright

            self._playwright = await async_playwright().start()
            await self._launch()
        except Exception as exc:  # no Playwright, no Chromium, or it would not start
            self.unavailable = f"The browser could not start: {type(exc).__name__}: {exc}"[:300]
            log.warning("%s", self.unavailable)
            await self.aclose()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for closing in (self._context, self._browser):
            if closing is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(GRACE):
                        await closing.close()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
        self._context = self._browser = self._playwright = None

    async def _launch(self) -> None:
        self._launches += 1
        self._browser = await self._playwright.chromium.launch(
            executable_path=self.executable, headless=True, args=LAUNCH_ARGS)
        await self._new_context()

    async def _new_context(self) -> None:
        self._context = await self._browser.new_context(
            accept_downloads=False, service_workers="block", user_agent=self.user_agent,
            java_script_enabled=True, bypass_csp=False)
        await self._context.add_init_script(PAGE_LIMITS)
        self._context.on("page", self._on_page)

    async def render(self, url: str, body: bytes, content_type: str = "text/html; charset=utf-8") -> Rendered:
        """Load ``url`` as the browser would, its document being ``body`` (already fetched); never raises."""
        out = Rendered(url)
        if self.unavailable or self._context is None:
            out.problem, out.detail = "render_failed", self.unavailable or "The browser is not running."
            return out
        async with self._slots:
            page = None
            # The route handlers still answering this page's requests: ended with the page. Playwright
            # leaves them running after it closes, and each would still take a slot of the fetcher the
            # chunk's next pages wait on.
            answering: set[asyncio.Task] = set()
            if not self._browser.is_connected():  # it died since the last page: launch another first
                await self._revive()
                if self.unavailable or self._context is None:
                    out.problem, out.detail = "render_failed", self.unavailable or "The browser is not running."
                    return out
            try:
                async with asyncio.timeout(self.deadline + GRACE):
                    self._opening += 1
                    try:
                        page = await self._context.new_page()
                        self._rendering.add(page)
                    finally:
                        self._opening -= 1
                    await self._watch(page, url, body, content_type, out, answering)
                    try:
                        await page.goto(url, wait_until="networkidle", timeout=self.deadline * 1000)
                    except Exception as exc:
                        if not _is_timeout(exc):
                            raise
                        out.idle = False
                    # Open shadow roots as declarative shadow DOM: a web component's links are the page's links.
                    html = await page.content(include_shadow=True)
                    out.html = html.encode("utf-8", "surrogatepass")[:MAX_DOM_BYTES]
            except TimeoutError:
                out.problem = "render_timeout"
                out.detail = f"The page kept the browser busy for more than {self.deadline + GRACE:g} s"
            except Exception as exc:
                out.problem = "render_failed"
                out.detail = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                for task in answering:
                    task.cancel()
                self._rendering.discard(page)
                if not self._browser.is_connected():
                    await self._revive()
                elif page is not None and not await self._closed(page):
                    await self._restart()
        return out

    @property
    def open_pages(self) -> int:
        """The pages the browser holds now: the slots' own, and any window a page opened not closed yet."""
        return len(self._context.pages) if self._context is not None else 0

    async def _on_page(self, page) -> None:
        """Close a window a page opened (a target=_blank link or form, which PAGE_LIMITS' window.open cannot
        stop): nothing routes it, and a storm of them would take the browser down. A slot's own page may be
        opening still: it is known once its new_page returns."""
        for _ in range(200):
            if not self._opening:
                break
            await asyncio.sleep(0.05)
        if page not in self._rendering:
            await self._closed(page)

    async def _watch(self, page, url: str, body: bytes, content_type: str, out: Rendered,
                     answering: set[asyncio.Task]) -> None:
        """Record the page's errors and answer every request it makes."""
        page.on("console", lambda message: message.type == "error" and _note(out.errors, message.text[:300]))
        page.on("pageerror", lambda error: _note(out.errors, str(error)[:300]))
        requests = 0
        home = _origin(url)
        served = False

        async def handle(route) -> None:
            task = asyncio.current_task()
            answering.add(task)
            try:
                await answer(route)
            finally:
                answering.discard(task)

        async def answer(route) -> None:
            nonlocal requests, served
            request = route.request
            if request.is_navigation_request() and request.frame == page.main_frame:
                # The first is the page itself, however Chromium spells its URL (it writes ' in a query
                # as %27). Any later one is the page leaving itself, by script or refresh: one URL is
                # rendered. Aborted as a cancelled navigation ("aborted"), the page stays as it was; a
                # failed one ("failed") would put Chromium's error page in its place.
                if not served:
                    served = True
                    await route.fulfill(status=200, headers={"content-type": content_type}, body=body)
                else:
                    _note(out.blocked, (request.url, "the page navigated there itself (script or "
                                        "refresh); only the page's own URL is rendered"))
                    await route.abort("aborted")
                return
            requests += 1
            why = self._refusal(request.url, request.method, requests) or _asked_across(request, home)
            if why:
                _note(out.blocked, (request.url, why))
                await route.abort("blockedbyclient")
                return
            result = await self.fetcher.fetch(request.url, keep_body=True, max_bytes=MAX_RESOURCE_BYTES)
            if result.error is FetchError.SSRF_BLOCKED:
                _note(out.blocked, (request.url, "a private or reserved address"))
                await route.abort("blockedbyclient")
            elif result.error is not None or result.status is None:
                _note(out.failed, (request.url, result.error.label if result.error else "no answer"))
                await route.abort("failed")
            elif _origin(request.url) != home and _origin(result.final_url) == home:
                # Fulfilled under the URL asked for, the site's answer (its credentials' answer) would be
                # readable by that other origin's frames.
                _note(out.blocked, (request.url, "a redirect into the audited site from another origin"))
                await route.abort("blockedbyclient")
            elif result.status in REDIRECT_STATUSES and result.redirects:
                # A hop the fetcher would not follow (robots.txt, the logout): refused as the URL would be. Not
                # handed to the browser to follow: Playwright routes only a redirect's first request.
                why = self._refusal(result.final_url, request.method, requests) or "a redirect not followed"
                _note(out.blocked, (result.final_url, why))
                await route.abort("blockedbyclient")
            else:
                if result.status >= 400:
                    _note(out.failed, (request.url, f"answered {result.status}"))
                headers = {"content-type": result.headers.get("content-type", "application/octet-stream"),
                           **_cors(result.headers, request.url)}
                await route.fulfill(status=result.status, headers=headers, body=result.body or b"")

        await page.route("**/*", handle)

    def _refusal(self, url: str, method: str, count: int) -> str | None:
        if not url.startswith(("http://", "https://")):
            return "not an http(s) URL"
        if method not in FETCHED_METHODS:
            return f"a {method} request (a render only reads)"
        if count > MAX_REQUESTS:
            return f"more than {MAX_REQUESTS} requests from one page"
        return self.may_request(url)

    async def _closed(self, page) -> bool:
        """Close ``page``; False when even that hung (a page spinning its main thread)."""
        try:
            async with asyncio.timeout(GRACE):
                await page.close(run_before_unload=False)
            return True
        except Exception:
            return False

    async def _restart(self) -> None:
        """A page that would not close: drop the whole context (its renderer processes go with it).

        A browser that died is launched again, MAX_LAUNCHES times in all; after that every
        later page is render_failed, saying why.
        """
        async with self._restarting:
            await self._replace()

    async def _revive(self) -> None:
        """Launch a browser in place of one that died, unless another slot just did."""
        async with self._restarting:
            if not self._browser.is_connected():
                await self._replace()

    async def _replace(self) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(GRACE):
                await self._context.close()
        try:
            if self._browser.is_connected():
                await self._new_context()
            elif self._launches < MAX_LAUNCHES:
                with contextlib.suppress(Exception):
                    await self._browser.close()
                await self._launch()
            else:
                raise RuntimeError(f"it died {self._launches} times")
        except Exception as exc:
            self.unavailable = f"The browser stopped answering: {type(exc).__name__}: {exc}"[:300]
            self._context = None


def _note(kept: list, item) -> None:
    """Keep ``item``, up to MAX_NOTES: an error's text, or a request's (URL, why), its URL cut to URL_MAX."""
    if len(kept) < MAX_NOTES:
        kept.append((item[0][:URL_MAX], *item[1:]) if isinstance(item, tuple) else item)


def _is_timeout(exc: Exception) -> bool:
    return type(exc).__name__ == "TimeoutError" and type(exc).__module__.startswith("playwright")


def _origin(url: str | None) -> str:
    """``url``'s origin as the crawl's scope spells it ("" for none, or no http(s) URL: an Origin of null)."""
    try:
        return origin_of(url or "")
    except InvalidURL:
        return ""


def _asked_across(request, home: str) -> str | None:
    """Why a request for the audited origin from another origin's script is refused, or None.

    The fetcher sends the site's credentials (basic auth, tokens, login cookies)
    with every request for its origin; a third-party frame or worker asking for
    one (a cross-origin fetch, which carries its Origin) would read what only
    the logged-in site should show.
    """
    asker = request.headers.get("origin")
    if _origin(request.url) != home or not asker or _origin(asker) == home:
        return None
    return "asked for by another origin's script (the audited site's answers are not read across origins)"


# The real answer's CORS verdict, or, without one, an allowed origin no other page has: Playwright's
# fulfill adds "allow this origin, with credentials" to a cross-origin answer that names none.
CORS_HEADERS = ("access-control-allow-origin", "access-control-allow-credentials", "access-control-expose-headers")


def _cors(headers: dict[str, str], url: str) -> dict[str, str]:
    kept = {name: headers[name] for name in CORS_HEADERS if name in headers}
    kept.setdefault("access-control-allow-origin", _origin(url) or "null")
    return kept
