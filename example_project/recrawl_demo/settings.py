"""Settings of the example Scrapy project (a local site: polite but quick)."""

# Works both as ``recrawl_demo.settings`` (scrapy.cfg, run from example_project/) and as
# ``example_project.recrawl_demo.settings`` (imported from the repository root).
_PACKAGE = __name__.rsplit(".", 1)[0]

BOT_NAME = "recrawl_demo"
SPIDER_MODULES = [f"{_PACKAGE}.spiders"]
NEWSPIDER_MODULE = f"{_PACKAGE}.spiders"

USER_AGENT = "recrawl-demo (+https://github.com/scrapy/scrapy; local test site)"
# The site is on localhost and its robots.txt only hides the private endpoints.
ROBOTSTXT_OBEY = False

CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 16
DOWNLOAD_DELAY = 0
DOWNLOAD_TIMEOUT = 30
AUTOTHROTTLE_ENABLED = False
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False

LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"

# --- scrapy-recrawl ----------------------------------------------------------------
# One line sets the recrawl scheduler and the recording middleware.
ADDONS = {"scrapy_recrawl.RecrawlAddon": 100}

# Each `scrapy crawl site` is one cycle (one simulated day of the site); the first
# two fetch everything, later ones 5% of the known pages, picked by the scorer.
RECRAWL_SCORER = "gp4c"
RECRAWL_BUDGET = "5%"

# No ignore rule: the site's ad slot carries random text on every request, and the
# crawl learns that by itself (docs/detection.md); `scrapy recrawl-report` shows it.
