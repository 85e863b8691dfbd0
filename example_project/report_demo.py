"""The crawl behind docs/changes.md ("What changed?"): the example site crawled with
gp4c over a number of simulated days into a store that is kept, then read back with
``scrapy recrawl-report``.

    python -m example_project.report_demo --store /tmp/changes/history.sqlite3
        [--pages 1000] [--cycles 12] [--budget 0.05] [--monitor-share 0.05]
        [-s NAME=VALUE ...]

Then, in example_project/:
``scrapy recrawl-report -s RECRAWL_STORE=/tmp/changes/history.sqlite3 [--plot FILE.png]``.
"""

from __future__ import annotations

import argparse
import os
import time

from example_project.demo import crawl_cycle, post
from example_project.site import RunningSite


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m example_project.report_demo", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--store", required=True, help="the SQLite store to write (kept)")
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--cycles", type=int, default=12)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--monitor-share", type=float, default=0.05)
    ap.add_argument("--scorer", default="gp4c")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    if os.path.exists(args.store):
        raise SystemExit(f"--store {args.store}: exists; choose a new file")
    # the crawl refuses a RECRAWL_STORE in a missing directory (a typo); this one is asked for
    os.makedirs(os.path.dirname(os.path.abspath(args.store)), exist_ok=True)
    extra = dict(s.split("=", 1) for s in args.settings)
    extra.setdefault("RECRAWL_MONITOR_SHARE", str(args.monitor_share))
    t0 = time.monotonic()
    with RunningSite(pages=args.pages, seed=args.seed) as site:
        for cycle in range(1, args.cycles + 1):
            stats = crawl_cycle(
                site.base_url, args.store, args.scorer, args.budget, args.seed, extra
            )
            print(f"cycle {cycle:2d}: {stats.get('downloader/response_count', 0)} responses")
            if cycle < args.cycles:
                post(site.base_url + "/_admin/advance")
    print(f"store: {args.store} ({time.monotonic() - t0:.0f}s)")


if __name__ == "__main__":
    main()
