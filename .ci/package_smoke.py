"""Crawl a local site twice with the *installed* scrapy-recrawl, from a new project.

Run by package_check.sh with the fresh venv's python, outside the repository:
``scrapy startproject``, one spider, ``ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}``,
two ``scrapy crawl`` runs against a threaded http.server on 127.0.0.1, then the
history store is read back through the installed package's own API.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

SPIDER = """
import scrapy


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, base="", **kw):
        super().__init__(**kw)
        self.start_urls = [base + "/index.html"]

    def parse(self, response):
        yield {"url": response.url}
        yield from response.follow_all(css="a")
"""


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    pages = 6
    for i in range(pages):
        links = "".join(f'<a href="/p{j}.html">p{j}</a>' for j in range(pages) if j != i)
        (root / f"p{i}.html").write_text(f"<html><body><h1>Page {i}</h1>{links}</body></html>")
    (root / "index.html").write_text('<html><body><a href="/p0.html">start</a></body></html>')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main(workdir: str) -> int:
    work = Path(workdir)
    work.mkdir(parents=True)
    site = work / "site"
    site.mkdir()
    server, base = serve(site)
    bindir = Path(sys.executable).parent
    subprocess.run(
        [bindir / "scrapy", "startproject", "smoke", str(work / "smoke")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    project = work / "smoke"
    (project / "smoke" / "spiders" / "site.py").write_text(SPIDER)
    store = work / "history.sqlite3"
    with open(project / "smoke" / "settings.py", "a") as fh:
        fh.write(
            '\nADDONS = {"scrapy_recrawl.RecrawlAddon": 100}\n'
            f"RECRAWL_STORE = {str(store)!r}\n"
            "ROBOTSTXT_OBEY = False\n"
        )
    env = {**os.environ, "PYTHONPATH": ""}
    for run in (1, 2):
        out = subprocess.run(
            [bindir / "scrapy", "crawl", "site", "-a", f"base={base}", "-s", "LOG_LEVEL=INFO"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            print(out.stderr[-4000:])
            print(f"package-check: crawl {run} exited {out.returncode}")
            return 1
    server.shutdown()

    import scrapy_recrawl.change._walk as walk
    from scrapy_recrawl.history import SqliteHistoryStore

    if not walk.__file__.startswith(sys.prefix):
        print(f"package-check: the compiled module came from {walk.__file__}, not the venv")
        return 1
    with SqliteHistoryStore(str(store)) as history:
        arrays = history.arrays()
        known, cycle = len(arrays.ids), history.cycle
    if known < 7 or cycle != 2:
        print(f"package-check: expected 7 URLs over 2 cycles, found {known} URLs, cycle {cycle}")
        return 1
    print(f"package-check: installed sdist crawled {known} URLs over {cycle} cycles: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
