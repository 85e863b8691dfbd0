"""Score a crawl of the example site against the site's ground truth.

Inputs are the two JSON documents the site serves:

* ``GET /_truth/changes``: ``{"day": D, "truth": [{"path", "class", "changes": [days]}, ...],
  "excluded": [...]}``; a truth page's version on day d is the number of its change
  days <= d (changes happen on days >= 1; day 0 is version 0).
* ``GET /_truth/served``: ``{"served": [{"path", "day", "version", "status",
  "not_modified"}, ...]}`` in serving order.

Metrics, per simulated day (= crawl cycle), over truth pages only:

* **ChangeRate**: of the distinct truth pages fetched that day that had been fetched on
  an earlier day, the share whose version at that day's first fetch differs from the
  version at their last earlier fetch. First fetches are excluded. ``None`` if no page
  was re-fetched that day.
* **Freshness** at the end of the day: the share of all truth pages whose last served
  version (up to that day) equals their current version. Never fetched pages are stale.

A 304 counts as a fetch of the current version (the client already held it).

All functions are pure; :func:`fetch_truth` is the only one doing I/O.
"""

from __future__ import annotations

import bisect
import json
import urllib.request
from dataclasses import dataclass

#: Statuses under which a truth page delivered (or confirmed) its content.
FETCH_STATUSES = (200, 304)


@dataclass(frozen=True)
class DayScore:
    day: int
    fetched: int  # distinct truth pages fetched this day
    refetched: int  # of which had been fetched on an earlier day (ChangeRate denominator)
    changed: int  # of which changed since their previous fetch
    change_rate: float | None
    freshness: float


@dataclass(frozen=True)
class TruthScore:
    days: list[DayScore]
    mean_change_rate: float | None  # mean over the days where ChangeRate is defined
    mean_freshness: float | None

    def table(self) -> str:
        """A plain-text table, one row per day, and the means."""
        lines = [
            f"{'day':>4} {'fetched':>8} {'refetched':>9} {'changed':>8} "
            f"{'ChangeRate':>10} {'freshness':>9}"
        ]
        for d in self.days:
            cr = "-" if d.change_rate is None else f"{d.change_rate:.3f}"
            lines.append(
                f"{d.day:>4} {d.fetched:>8} {d.refetched:>9} {d.changed:>8} "
                f"{cr:>10} {d.freshness:>9.3f}"
            )
        mcr = "-" if self.mean_change_rate is None else f"{self.mean_change_rate:.3f}"
        mf = "-" if self.mean_freshness is None else f"{self.mean_freshness:.3f}"
        lines.append(f"{'mean':>4} {'':>8} {'':>9} {'':>8} {mcr:>10} {mf:>9}")
        return "\n".join(lines)


def change_days(changes_doc: dict) -> dict[str, list[int]]:
    """Truth page path -> its sorted change days."""
    return {row["path"]: sorted(row["changes"]) for row in changes_doc["truth"]}


def change_matrix(changes_doc: dict, days: int) -> tuple[list[str], list[list[int]]]:
    """The truth pages' change histories as the replay takes them
    (``scrapy_recrawl.core.simulate``: ``changes[page][cycle]``, 1 = changed during that
    cycle): one row per truth page, one column per day ``0 .. days - 1``, the crawl of
    cycle ``c`` running on day ``c - 1`` as ``make demo`` runs it (one cycle, then
    ``/_admin/advance``). Returns the pages' paths and the rows."""
    paths, rows = [], []
    for row in changes_doc["truth"]:
        changed = [0] * days
        for d in row["changes"]:
            if 0 <= d < days:
                changed[d] = 1
        paths.append(row["path"])
        rows.append(changed)
    return paths, rows


def version_at(days: list[int], day: int) -> int:
    """Version of a page with change days ``days`` on ``day``."""
    return bisect.bisect_right(days, day)


def truth_fetches(changes_doc: dict, served_doc: dict) -> list[tuple[str, int, int]]:
    """The served log restricted to fetches of truth pages: (path, day, version)."""
    truth = change_days(changes_doc)
    return [
        (e["path"], e["day"], e["version"])
        for e in served_doc["served"]
        if e["path"] in truth and e["status"] in FETCH_STATUSES
    ]


def change_rate_by_day(changes_doc: dict, served_doc: dict) -> dict[int, tuple[int, int, int]]:
    """Day -> (fetched, refetched, changed), counting each page once per day."""
    last_before: dict[str, int] = {}  # page -> version at its last fetch on an earlier day
    today: dict[str, int] = {}  # page -> version at its first fetch on the current day
    today_last: dict[str, int] = {}
    out: dict[int, tuple[int, int, int]] = {}
    current: int | None = None

    def close_day(day: int) -> None:
        refetched = changed = 0
        for path, version in today.items():
            if path in last_before:
                refetched += 1
                changed += version != last_before[path]
        out[day] = (len(today), refetched, changed)
        last_before.update(today_last)

    for path, day, version in sorted(
        truth_fetches(changes_doc, served_doc), key=lambda f: f[1]
    ):  # stable: keeps serving order within a day
        if day != current:
            if current is not None:
                close_day(current)
            current, today, today_last = day, {}, {}
        today.setdefault(path, version)
        today_last[path] = version
    if current is not None:
        close_day(current)
    return out


def _held_by_day(changes_doc: dict, served_doc: dict, days: list[int]):
    """For each of ``days`` in order: ``(day, fresh, held)``: how many truth pages fetched
    up to the end of the day hold their current version, and how many were fetched."""
    truth = change_days(changes_doc)
    fetches = sorted(truth_fetches(changes_doc, served_doc), key=lambda f: f[1])
    held: dict[str, int] = {}
    k = 0
    for d in sorted(days):
        while k < len(fetches) and fetches[k][1] <= d:
            path, _, version = fetches[k]
            held[path] = version
            k += 1
        yield d, sum(1 for p, v in held.items() if v == version_at(truth[p], d)), len(held)


def freshness_by_day(changes_doc: dict, served_doc: dict, days: list[int]) -> dict[int, float]:
    """Day -> share of truth pages whose last served copy is current at the end of the day."""
    pages = len(change_days(changes_doc))
    if not pages:
        return {d: 0.0 for d in days}
    return {d: fresh / pages for d, fresh, _ in _held_by_day(changes_doc, served_doc, days)}


def known_freshness_by_day(
    changes_doc: dict, served_doc: dict, days: list[int]
) -> dict[int, tuple[float, int]]:
    """Day -> ``(share, pages)``: the true freshness of the *known* truth pages at the end
    of the day, the figure the crawl's freshness estimate is of: of the truth pages
    fetched at least once up to that day (``pages``), the share whose last served copy
    is current. (Truth pages are the live ones: the 404, 500 and 301 pages are left
    out of the truth, :func:`change_days`.) ``(nan, 0)`` before any fetch."""
    return {
        d: (fresh / held if held else float("nan"), held)
        for d, fresh, held in _held_by_day(changes_doc, served_doc, days)
    }


def score(
    changes_doc: dict,
    served_doc: dict,
    first_day: int = 0,
    last_day: int | None = None,
) -> TruthScore:
    """Per-day ChangeRate and freshness for days first_day..last_day, and their means.

    ``last_day`` defaults to the site's current day (``changes_doc["day"]``). Pass
    ``first_day`` to leave warm-up cycles out of the means (and the table).
    """
    if last_day is None:
        last_day = changes_doc["day"]
    days = list(range(first_day, last_day + 1))
    counts = change_rate_by_day(changes_doc, served_doc)
    fresh = freshness_by_day(changes_doc, served_doc, days)
    rows = []
    for d in days:
        fetched, refetched, changed = counts.get(d, (0, 0, 0))
        rate = changed / refetched if refetched else None
        rows.append(DayScore(d, fetched, refetched, changed, rate, fresh[d]))
    rates = [r.change_rate for r in rows if r.change_rate is not None]
    return TruthScore(
        days=rows,
        mean_change_rate=sum(rates) / len(rates) if rates else None,
        mean_freshness=sum(r.freshness for r in rows) / len(rows) if rows else None,
    )


def fetch_truth(base_url: str, timeout: float = 30.0) -> tuple[dict, dict]:
    """GET both truth documents from a running site: (changes_doc, served_doc)."""
    base = base_url.rstrip("/")
    docs = []
    for path in ("/_truth/changes", "/_truth/served"):
        with urllib.request.urlopen(base + path, timeout=timeout) as resp:
            docs.append(json.load(resp))
    return docs[0], docs[1]


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m example_project.truth",
        description="Print per-day ChangeRate and freshness of the crawl of a running site.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--first-day", type=int, default=0)
    args = parser.parse_args(argv)
    changes_doc, served_doc = fetch_truth(args.url)
    print(score(changes_doc, served_doc, first_day=args.first_day).table())


if __name__ == "__main__":
    main()
