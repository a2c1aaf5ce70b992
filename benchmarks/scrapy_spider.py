"""Scrapy's CrawlSpider over the benchmark corpus: the yardstick for crawl throughput.

Run as a subprocess by ``bench_library`` (Twisted's reactor cannot be restarted
inside one process). Robots, retries, cookies, telnet and throttling are off so
Scrapy does only what our crawl does: fetch, extract every ``a``/``area`` link
with ``LinkExtractor``, follow the ones on the start host, up to a page limit.
It prints one JSON line: responses, wall seconds from open to close, CPU seconds.

    python -m benchmarks.scrapy_spider http://127.0.0.1:8080/ --pages 2100 --concurrency 16
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import time
from urllib.parse import urlsplit

from benchmarks.netguard import refuse_non_loopback


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("start_url")
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--uvloop", action="store_true", help="run Twisted's asyncio reactor on uvloop's loop"
    )
    args = parser.parse_args()
    refuse_non_loopback()

    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import CrawlSpider, Rule

    host = urlsplit(args.start_url).hostname or ""
    ipaddress.ip_address(host)  # the yardstick only ever crawls a loopback literal
    timing: dict[str, float] = {}

    class CorpusSpider(CrawlSpider):
        name = "corpus"
        allowed_domains = [host]
        start_urls = [args.start_url]
        rules = (Rule(LinkExtractor(), follow=True),)

    loop_settings = {}
    if args.uvloop:
        # Scrapy's default reactor is already asyncio's; this swaps the loop
        # under it for uvloop's, the loop our crawler runs on.
        loop_settings = {
            "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
            "ASYNCIO_EVENT_LOOP": "uvloop.Loop",
        }
    process = CrawlerProcess(
        settings={
            **loop_settings,
            "LOG_LEVEL": __import__("os").environ.get("BENCH_SCRAPY_LOG", "WARNING"),
            "ROBOTSTXT_OBEY": False,
            "RETRY_ENABLED": False,
            "COOKIES_ENABLED": False,
            "TELNETCONSOLE_ENABLED": False,
            "REMOTE_CONTROL_ENABLED": False,
            "AUTOTHROTTLE_ENABLED": False,
            "HTTPCACHE_ENABLED": False,
            "DOWNLOAD_DELAY": 0,
            "CONCURRENT_REQUESTS": args.concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
            "CLOSESPIDER_PAGECOUNT": args.pages,
            "REDIRECT_ENABLED": True,
            "USER_AGENT": "SitewardBench-Scrapy",
        }
    )
    crawler = process.create_crawler(CorpusSpider)

    def opened(spider):
        timing["wall"] = time.monotonic()
        timing["cpu"] = time.process_time()

    def closed(spider, reason):
        timing["wall"] = time.monotonic() - timing["wall"]
        timing["cpu"] = time.process_time() - timing["cpu"]
        timing["reason"] = reason

    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    import scrapy

    print(
        json.dumps(
            {
                "responses": stats.get("response_received_count", 0),
                "status_404": stats.get("downloader/response_status_count/404", 0),
                "seconds": timing["wall"],
                "cpu_seconds": timing["cpu"],
                "finish_reason": timing.get("reason"),
                "scrapy": scrapy.__version__,
            }
        )
    )


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
