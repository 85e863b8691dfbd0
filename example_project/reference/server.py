"""The reference site over real HTTP: a threaded server, in a thread or from the CLI.

Why plain ``http.server``: no Twisted reactor is involved, so the site can run in a
thread beside (or before) a crawl that starts its own reactor, exactly like
``example_project.site``. Routes (all JSON answers are ``Cache-Control: no-store``):

* ``GET /`` links the sections; ``/shop/…`` and ``/news/…`` are the sites
  (``ReferenceSite.respond``); ``GET /robots.txt`` hides ``/_admin/`` and ``/_truth/``.
* ``GET /_admin/day``; ``POST /_admin/advance[?days=N]``; ``POST /_admin/reset``.
* ``GET /_truth/changes[?day=D]``, ``GET /_truth/pages[?day=D]``,
  ``GET /_truth/served[?since=K]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from example_project.serving import ServerThread

from .boilerplate import KINDS
from .model import at_noon
from .world import SITES, ReferenceSite, dumps

__all__ = ["RunningReferenceSite", "main", "make_server", "start_in_thread"]


class ReferenceHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: Scrapy reuses connections
    disable_nagle_algorithm = True
    server_version = "RecrawlReferenceSite/1.0"
    site: ReferenceSite  # set on the subclass made by make_server

    def log_message(self, format, *args) -> None:  # noqa: A002 - silence per-request logs
        pass

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header: the site's own clock (noon of its simulated day), the
        clock its Last-Modified dates are on, as a real server's are on one clock."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        return format_datetime(at_noon(self.site.day), usegmt=True)

    def _send(
        self,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        head_only: bool = False,
    ) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and status != 304 and not head_only:
            self.wfile.write(body)

    def _json(self, doc: object, status: int = 200) -> None:
        headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
        self._send(status, dumps(doc), headers)

    def _day_arg(self, query: dict[str, list[str]], name: str) -> int | None:
        raw = query.get(name, [None])[0]
        if raw is None:
            return self.site.day if name == "day" else 0
        value = _int_or_none(raw)
        if value is None or value < 0:
            self._json({"error": f"{name} must be a non-negative integer, got {raw!r}"}, 400)
            return None
        return value

    def do_HEAD(self) -> None:
        self._get(head_only=True)

    def do_GET(self) -> None:
        self._get(head_only=False)

    def _get(self, head_only: bool) -> None:
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        site = self.site
        if path.startswith("/_truth/") or path.startswith("/_admin/"):
            if path == "/_admin/day":
                return self._json(site.day_doc())
            if path in ("/_admin/advance", "/_admin/reset"):
                return self._json({"error": "use POST"}, 405)
            if path == "/_truth/served":
                since = self._day_arg(query, "since")
                return None if since is None else self._json(site.served_doc(since))
            if path in ("/_truth/changes", "/_truth/pages"):
                day = self._day_arg(query, "day")
                if day is None:
                    return None
                doc = site.changes_doc(day) if path == "/_truth/changes" else site.pages_doc(day)
                return self._json(doc)
            return self._json({"error": "not found"}, 404)
        html = {"Content-Type": "text/html; charset=utf-8"}
        if path == "/":
            links = "".join(f'<li><a href="/{s}/">{s}</a></li>' for s in site.sections)
            body = f"<!DOCTYPE html><title>Reference site</title><ul>{links}</ul>\n".encode()
            return self._send(200, body, html, head_only)
        if path == "/robots.txt":
            body = b"User-agent: *\nDisallow: /_admin/\nDisallow: /_truth/\n"
            return self._send(200, body, {"Content-Type": "text/plain"}, head_only)
        headers = {k: v for k, v in self.headers.items()}
        if head_only:  # a HEAD is not a fetch of the content: answer it, do not log it
            page = site.page(path)
            status = 404 if page is None else page.status
            return self._send(status, b"", html, head_only=True)
        resp = site.respond(self.path, headers)
        if resp is None:
            return self._send(404, b"<!DOCTYPE html><h1>Not found</h1>\n", html)
        return self._send(resp.status, resp.body, resp.headers)

    def do_POST(self) -> None:
        length = _int_or_none(self.headers.get("Content-Length", "0")) or 0
        if length > 0:
            self.rfile.read(length)
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/_admin/advance":
            raw = query.get("days", ["1"])[0]
            days = _int_or_none(raw)
            if days is None or days < 0:
                return self._json(
                    {"error": f"days must be a non-negative integer, got {raw!r}"}, 400
                )
            return self._json({"day": self.site.advance(days)})
        if url.path == "/_admin/reset":
            return self._json({"day": self.site.reset()})
        return self._json({"error": "not found"}, 404)


def _int_or_none(s: str | None) -> int | None:
    try:
        return int(s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def make_server(
    site: ReferenceSite, host: str = "127.0.0.1", port: int = 8000
) -> ThreadingHTTPServer:
    """A bound, not yet serving, HTTP server for ``site``."""
    handler = type("BoundReferenceHandler", (ReferenceHandler,), {"site": site})
    return _Server((host, port), handler)


class RunningReferenceSite(ServerThread):
    """A reference site served from a background thread; a context manager.

    ``.site`` is the :class:`ReferenceSite` (the truth, in process), ``.base_url`` its
    address without a trailing slash. Keyword arguments go to :class:`ReferenceSite`.
    """

    def __init__(
        self,
        site: ReferenceSite | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        **kwargs: Any,
    ) -> None:
        self.site = site if site is not None else ReferenceSite(**kwargs)
        super().__init__(make_server(self.site, host, port), "reference-site")

    def __enter__(self) -> RunningReferenceSite:
        return self


def start_in_thread(
    site: ReferenceSite | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    **kwargs: Any,
) -> tuple[str, Callable[[], None]]:
    """Serve ``site`` (or a new ``ReferenceSite(**kwargs)``) from a daemon thread on
    ``host:port`` (0: a free port); returns ``(base_url, stop)``, e.g.
    ``("http://127.0.0.1:43121", stop)``. Keep the site object to ask the truth in
    process, or read the ``/_truth/*`` endpoints."""
    running = RunningReferenceSite(site, host=host, port=port, **kwargs)
    return running.base_url, running.stop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m example_project.reference",
        description="Serve the reference shop and news site (simulated days, ground truth).",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sites", default=",".join(SITES), help=f"comma list of {', '.join(SITES)}")
    p.add_argument(
        "--boilerplate",
        default="all",
        help=f"'all', 'none' or a comma list of {', '.join(KINDS)}",
    )
    p.add_argument("--products", type=int, default=200)
    p.add_argument("--categories", type=int, default=14)
    p.add_argument("--daily-products", type=int, default=10)
    p.add_argument("--articles", type=int, default=30)
    p.add_argument("--articles-per-day", type=int, default=2)
    p.add_argument("--per-page", type=int, default=10)
    p.add_argument(
        "--day-seconds",
        type=float,
        default=0.0,
        help="also advance one simulated day every S wall seconds (0: only POST /_admin/advance)",
    )
    args = p.parse_args(argv)
    try:
        site = ReferenceSite(
            args.seed,
            sites=[s.strip() for s in args.sites.split(",") if s.strip()],
            boilerplate=args.boilerplate,
            products=args.products,
            categories=args.categories,
            daily_products=args.daily_products,
            articles=args.articles,
            articles_per_day=args.articles_per_day,
            per_page=args.per_page,
            day_seconds=args.day_seconds,
        )
        server = make_server(site, args.host, args.port)
    except (ValueError, OSError) as exc:
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        return 2
    port = int(server.server_address[1])
    host = args.host
    print(
        f"reference site: http://{host}:{port}/  sites={','.join(site.sections)} "
        f"seed={args.seed} boilerplate={','.join(sorted(site.kinds)) or 'none'}  "
        "(truth: /_truth/changes, /_truth/pages, /_truth/served; admin: POST "
        "/_admin/advance, POST /_admin/reset, GET /_admin/day)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
