"""Test helpers: a real local HTTP server whose pages the test edits, and a real
``scrapy crawl`` of it in a subprocess (Twisted's reactor cannot restart in-process)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Page:
    body: bytes
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    etag: str | None = None
    last_modified: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    gzip: bool = False


class LocalSite:
    """Pages served from a dict the test edits between crawls; every request is logged."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.log: list[dict] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:
                page = site.pages.get(self.path)
                inm = self.headers.get("If-None-Match")
                ims = self.headers.get("If-Modified-Since")
                site.log.append({"path": self.path, "if_none_match": inm, "if_modified_since": ims})
                if page is None:
                    self._send(404, {"Content-Type": "text/plain"}, b"not found")
                    return
                headers = {"Content-Type": page.content_type, **page.headers}
                if page.etag:
                    headers["ETag"] = page.etag
                if page.last_modified:
                    headers["Last-Modified"] = page.last_modified
                if page.status == 200 and (
                    (inm and page.etag and inm == page.etag)
                    or (not inm and ims and page.last_modified and ims == page.last_modified)
                ):
                    self._send(304, {k: v for k, v in headers.items() if k != "Content-Type"}, b"")
                    return
                body = page.body
                if page.gzip:
                    body = gzip.compress(body)
                    headers["Content-Encoding"] = "gzip"
                self._send(page.status, headers, body)

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LocalSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def requests_for(self, path: str) -> list[dict]:
        return [r for r in self.log if r["path"] == path]


_SPIDER = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

args = json.loads(sys.argv[1])
items = []

class TestSpider(scrapy.Spider):
    name = "test"
    custom_settings = {"HTTPERROR_ALLOW_ALL": True}

    async def start(self):
        for url in args["urls"]:
            yield scrapy.Request(url, callback=self.parse_page, meta={"tag": "kept"})

    def parse_page(self, response):
        result = response.meta.get("recrawl")
        links = [a for a in response.xpath("//a/@href").getall()] if hasattr(response, "xpath") else []
        items.append({
            "url": response.url, "status": response.status, "flags": response.flags,
            "tag": response.meta.get("tag"), "links": links, "size": len(response.body),
            "recrawl": None if result is None else {
                k: getattr(result, k) for k in ("changed", "distance", "added", "removed", "modified", "attributes")
            },
        })

settings = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False,
            "RETRY_ENABLED": False, **args["settings"]}
process = CrawlerProcess(settings)
crawler = process.create_crawler(TestSpider)
failures = []
process.crawl(crawler).addErrback(lambda f: failures.append(f.getTraceback()))
process.start()
if failures:  # as `scrapy crawl` does: a crawler that failed to start exits non-zero
    sys.stderr.write("\n".join(failures))
    sys.exit(1)
json.dump({"items": items, "stats": {k: v for k, v in crawler.stats.get_stats().items()
                                       if isinstance(v, (int, float, str))}}, sys.stdout, default=str)
"""


def run_crawl(urls: list[str], settings: dict, cwd: Path, timeout: float = 120) -> dict:
    """Crawl ``urls`` once with ``settings`` in a fresh process; returns items and stats."""
    args = json.dumps({"urls": urls, "settings": settings})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", _SPIDER, args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise AssertionError(f"crawl failed ({out.returncode}):\n{out.stderr[-4000:]}")
    result = json.loads(out.stdout)
    result["log"] = out.stderr
    return result
