"""scrapy-recrawl: keep a Scrapy crawl fresh by recrawling what is likeliest to have changed."""

__version__ = "0.1.0"
