"""The cycle core: pure functions and protocols shared by every scheduler and the replay.

Nothing here imports Scrapy, a store backend or a paper's package: both
schedulers, the offline simulator and the plug-ins call it, so the crawl and
the replay cannot disagree (docs/architecture.md).
"""
