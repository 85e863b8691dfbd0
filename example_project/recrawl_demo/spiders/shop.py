"""The reference shop's spider: an ordinary CrawlSpider, as a user would write it."""

import re

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule
from w3lib.url import url_query_cleaner

from ..items import ProductItem


def drop_session(value: str) -> str:
    """Links carry ``?sid=…`` (a session id per response): the page is the same without."""
    return url_query_cleaner(value, ("sid",), remove=True)


class ShopSpider(CrawlSpider):
    """Crawl the reference shop: follow the categories, yield one item per product.

    ``scrapy crawl shop -a start_url=http://127.0.0.1:8000/shop/``
    """

    name = "shop"
    rules = (
        Rule(
            LinkExtractor(allow=r"/shop/category/\d+$", process_value=drop_session),
            follow=True,
        ),
        Rule(
            LinkExtractor(allow=r"/shop/product/\d+$", process_value=drop_session),
            callback="parse_product",
        ),
    )

    def __init__(self, start_url: str = "http://127.0.0.1:8000/shop/", *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = [start_url]

    def parse_product(self, response):
        price = response.css("article.product p.price::text").get(default="")
        stock = response.css("article.product p.stock::text").get(default="")
        m = re.search(r"\d+", stock)
        yield ProductItem(
            url=response.url,
            name=response.css("article.product h1.name::text").get(default="").strip(),
            price=float(price.lstrip("$")) if price.startswith("$") else None,
            stock=int(m.group()) if m else 0,
        )
