from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from ..items import PageItem


class SiteSpider(CrawlSpider):
    """Crawl the local example site: follow the index pages, yield one item per page.

    ``scrapy crawl site -a start_url=http://127.0.0.1:8000/``
    """

    name = "site"
    rules = (
        # Paginated index pages: follow only.
        Rule(LinkExtractor(allow=r"/index/\d+\.html$"), follow=True),
        # Content pages: one item each, and follow their related links.
        Rule(LinkExtractor(allow=r"/page/\d+\.html$"), callback="parse_page", follow=True),
    )

    def __init__(self, start_url: str = "http://127.0.0.1:8000/", *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = [start_url]

    def parse_page(self, response):
        yield PageItem(
            url=response.url,
            title=response.xpath("normalize-space(//title)").get(default=""),
        )
