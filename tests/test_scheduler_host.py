"""The seam between the recrawl scheduler and its frontier (frontier/base.py): what a
frontier may use of the scheduler is declared (SchedulerHost, LocalHost), holds no
Scrapy internals, and is what the scheduler serves; a frontier's own dupefilter is
the one the scheduler asks, Scrapy's is never replaced."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from scrapy import Request

from scrapy_recrawl.frontier import base
from scrapy_recrawl.frontier.base import LocalHost, SchedulerHost
from scrapy_recrawl.scheduler import RecrawlScheduler

from .helpers import offline_scheduler

FRONTIER = Path(base.__file__).resolve().parent

#: Scrapy's scheduler's and crawler's internals, which no frontier is handed
INTERNALS = {"df", "mqs", "dqs", "dqdir", "crawler", "engine", "pqclass", "mqclass"}


def _members(protocol: type) -> set[str]:
    """The names a protocol declares: its attributes and its methods and properties."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if not getattr(cls, "_is_protocol", False) or cls.__module__ == "typing":
            continue
        names |= set(vars(cls).get("__annotations__", {}))
        names |= {
            n
            for n, v in vars(cls).items()
            if not n.startswith("_") and (callable(v) or isinstance(v, property))
        }
    return names


def test_the_host_a_frontier_is_handed_holds_no_scrapy_internals():
    assert _members(SchedulerHost) & INTERNALS == set()
    assert _members(LocalHost) & INTERNALS == set()
    assert _members(SchedulerHost) < _members(LocalHost)
    reach = re.compile(r"host\.(" + "|".join(sorted(INTERNALS)) + r")\b")
    used = {p.name: reach.findall(p.read_text()) for p in FRONTIER.glob("*.py")}
    assert {name: found for name, found in used.items() if found} == {}


def _open(tmp_path: Path) -> RecrawlScheduler:
    return offline_scheduler({"RECRAWL_STORE": str(tmp_path / "history.sqlite3")})


def test_the_scheduler_serves_every_member_a_local_frontier_may_use(tmp_path):
    scheduler = _open(tmp_path)
    try:
        missing = [name for name in sorted(_members(LocalHost)) if not hasattr(scheduler, name)]
        assert missing == []
        assert scheduler.frontier.host is scheduler
    finally:
        scheduler.close("finished")


class _Recording:
    """A frontier's own dupefilter (a shared one's interface), noting what it is asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def request_seen(self, request: Request) -> bool:
        self.asked.append(request.url)
        return False

    def log(self, request: Request, spider: Any) -> None:
        pass


def test_a_frontiers_own_dupefilter_is_asked_and_scrapys_is_kept(tmp_path):
    scheduler = _open(tmp_path)
    try:
        scrapys = scheduler.df
        own = scheduler.frontier.dupefilter = _Recording()
        new = Request("http://example.com/new")  # a link: a new URL
        redirect = Request(  # a continuation, into Scrapy's own queues
            "http://example.com/r", meta={"redirect_urls": ["http://example.com/x"]}
        )
        assert scheduler.enqueue_request(new) and scheduler.enqueue_request(redirect)
        assert own.asked == [new.url, redirect.url]
        assert scheduler.df is scrapys  # never replaced
        assert not scrapys.request_seen(new) and not scrapys.request_seen(redirect)
        scheduler.frontier.dupefilter = None  # none of its own: Scrapy's
        assert not scheduler.enqueue_request(Request("http://example.com/new"))
        assert own.asked == [new.url, redirect.url]
    finally:
        scheduler.close("finished")
