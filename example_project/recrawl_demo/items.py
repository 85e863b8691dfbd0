from dataclasses import dataclass


@dataclass
class PageItem:
    """What the demo keeps of a page: enough to see that it was fetched."""

    url: str
    title: str


@dataclass
class ProductItem:
    """A product of the reference shop, as its page shows it."""

    url: str
    name: str
    price: float | None  # in dollars; None if the page showed none
    stock: int  # units in stock (0: "Out of stock")


@dataclass
class ArticleItem:
    """An article of the reference news site."""

    url: str
    title: str
    published: str  # ISO time from the byline's <time datetime>
    corrections: int  # correction notes on the page
