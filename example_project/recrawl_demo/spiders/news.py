"""The reference news site's spider: an ordinary CrawlSpider, as a user would write it."""

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from ..items import ArticleItem
from .shop import drop_session


class NewsSpider(CrawlSpider):
    """Crawl the reference news site: follow the listings, yield one item per article.

    ``scrapy crawl news -a start_url=http://127.0.0.1:8000/news/``
    """

    name = "news"
    rules = (
        Rule(LinkExtractor(allow=r"/news/page/\d+$", process_value=drop_session), follow=True),
        Rule(
            LinkExtractor(allow=r"/news/article/\d+$", process_value=drop_session),
            callback="parse_article",
        ),
    )

    def __init__(self, start_url: str = "http://127.0.0.1:8000/news/", *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = [start_url]

    def parse_article(self, response):
        yield ArticleItem(
            url=response.url,
            title=response.css("article.story h1::text").get(default="").strip(),
            published=response.css("article.story p.byline time::attr(datetime)").get(default=""),
            corrections=len(response.css("article.story p.correction")),
        )
