"""The ``Request.meta`` / ``Response.meta`` keys this package sets, named once."""

#: the ChangeResult of the response, for the spider (docs/scheduler.md)
META_RESULT = "recrawl"
#: the cycle that scheduled the request
META_CYCLE = "recrawl_cycle"
#: the second fetch of a boilerplate pair (boilerplate_pairs.py): not a visit, never
#: recorded or stored; components that watch responses (response_received) skip it
META_PAIR = "_recrawl_boilerplate_pair"
#: the recrawl's URL id, its rank in the cycle's selection and its score
META_ID = "recrawl_id"
META_RANK = "recrawl_rank"
META_SCORE = "recrawl_score"

# The ``Response.flags`` tag the middleware adds (Scrapy's "Crawled (200) <GET ...>
# ['recrawl:changed']" log lines show it; docs/project-settings.md).
#: first good fetch: nothing to compare with yet
FLAG_NEW = "recrawl:new"
FLAG_CHANGED = "recrawl:changed"
FLAG_UNCHANGED = "recrawl:unchanged"
#: a 304 to our conditional request, answered with the stored copy (also unchanged)
FLAG_NOT_MODIFIED = "recrawl:not_modified"
#: the flags of a page that has not changed since the last visit
UNCHANGED_FLAGS = frozenset({FLAG_UNCHANGED, FLAG_NOT_MODIFIED})

#: why the scheduler sent the request: one of the KIND_* values (the per-cycle summary
#: counts fetches by it: scrapy_recrawl/cycle_summary.py)
META_KIND = "recrawl_kind"
KIND_RECRAWL = "recrawl"  # a scored recrawl of the cycle's top-k
KIND_NEW = "new"  # a URL never fetched before
KIND_MONITOR = "monitor"  # the monitoring sample (RECRAWL_MONITOR_SHARE)
KIND_PROBE = "probe"  # a loop-time probe (paper 001)
#: sent by the spider outside the budget (its start requests, its dont_filter requests):
#: untagged by the scheduler, counted apart from the budget's pages
KIND_START = "start"

# What a spider (or scrapy_recrawl.evidence.SitemapEvidenceMixin) tells the crawl about a
# URL (docs/evidence.md). Read by the evidence plug-in when the request is scheduled or
# its response received; never kept in the stored request, so a recrawl rebuilt from it
# cannot repeat an old announcement or put back an old weight.
#: the URL's weight, a float > 0 (1.0 when never given)
META_IMPORTANCE = "recrawl_importance"
#: the sitemap's <lastmod>: a W3C datetime string, a datetime or unix seconds
META_LASTMOD = "recrawl_lastmod"
#: the sitemap's <changefreq>: always, hourly, daily, weekly, monthly, yearly or never
META_CHANGEFREQ = "recrawl_changefreq"
