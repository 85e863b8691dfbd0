"""crawl_stats.stat_adder: counts as StatsCollector.inc_value does, cheaper."""

from __future__ import annotations

from scrapy.statscollectors import DummyStatsCollector, MemoryStatsCollector
from scrapy.utils.test import get_crawler

from scrapy_recrawl.crawl_stats import stat_adder


def test_counts_as_inc_value_does_also_after_set_stats():
    crawler = get_crawler()
    stats, twin = MemoryStatsCollector(crawler), MemoryStatsCollector(crawler)
    add = stat_adder(stats)
    for key, n in [("a", 1), ("b", 3), ("a", 2)]:
        add(key, n)
        twin.inc_value(key, n)
    assert stats.get_stats() == twin.get_stats() == {"a": 3, "b": 3}
    stats.set_stats({"a": 10})  # a new dict: counted in that one
    add("a", 1)
    assert stats.get_value("a") == 11


def test_other_collectors_are_called():
    crawler = get_crawler()
    calls = []

    class Sending(MemoryStatsCollector):
        def inc_value(self, key, count=1, start=0, spider=None):
            calls.append((key, count))
            super().inc_value(key, count, start)

    stats = Sending(crawler)
    stat_adder(stats)("x", 2)
    assert calls == [("x", 2)] and stats.get_value("x") == 2
    dummy = DummyStatsCollector(crawler)
    stat_adder(dummy)("x", 1)
    assert dummy.get_value("x") is None
    stat_adder(None)("x", 1)  # no collector: nothing


def test_an_inc_value_set_on_the_instance_is_called():
    crawler = get_crawler()
    sent = []
    stats = MemoryStatsCollector(crawler)
    inner = MemoryStatsCollector.inc_value.__get__(stats)

    def forwarding(key, count=1, start=0, spider=None):
        sent.append((key, count))
        inner(key, count, start)

    stats.inc_value = forwarding
    stat_adder(stats)("k", 2)
    assert sent == [("k", 2)] and stats.get_value("k") == 2
