"""The reference shop: a home page, category pages and product pages whose prices change.

Why this shape: it is the site of issue 26's trial. Product prices change at
heterogeneous per-product rates (products ``1..daily`` every day, the rest drawn from
:data:`PRODUCT_CLASSES`: many rarely, a good share never); a category page lists its
products with their prices, so it really changes whenever one of them does; the home
page links the categories and never changes. Products of odd-numbered categories send
an ETag and Last-Modified and answer conditional GETs with 304; the other sections send
no validators, so a crawler has to read the page to know.

Paths: ``/shop/`` (home), ``/shop/category/<k>`` (k = 1..categories), and
``/shop/product/<i>`` (i = 1..products). Default: 200 products in 14 categories, 215
pages. Nothing is created or removed after day 0. The products were listed 30-730 days
before it and changed at their rates since, so a product's Last-Modified tells when its
price last changed, before the crawl as after (``Product.modified_before``).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from .boilerplate import esc as _e
from .boilerplate import layout, link
from .model import (
    ChangeProcess,
    Page,
    Slot,
    Template,
    paragraph,
    rng,
    sim_date,
    suffix_int,
    title,
)

PREFIX = "/shop/"

#: (class, share of the products after the daily ones, change rate per day or a range)
PRODUCT_CLASSES: tuple[tuple[str, float, tuple[float, float]], ...] = (
    ("never", 0.40, (0.0, 0.0)),
    ("rare", 0.35, (0.01, 0.05)),
    ("moderate", 0.17, (0.05, 0.25)),
    ("frequent", 0.08, (0.3, 0.7)),
)


@dataclass
class Product:
    """The fixed, seeded nature of one product and its price/stock states."""

    id: int
    category: int
    name: str
    klass: str
    rate: float
    description: list[str]
    reviewed: int  # the latest review was this many days before day 0 (reldate slot)
    # the product's last change before day 0 was this many days before it (listed for
    # up to two years at the same rate; never changed since listed: the listing's age)
    modified_before: int
    changes: ChangeProcess
    states: list[tuple[int, int]] = field(default_factory=list)  # (price cents, stock)


class Shop:
    """The shop's content as a pure function of (seed, path, day)."""

    name = "shop"

    def __init__(self, seed: int = 1, products: int = 200, categories: int = 14, daily: int = 10):
        if products < 1 or categories < 1 or categories > products:
            raise ValueError(
                f"need 1 <= categories <= products, got {categories} categories, "
                f"{products} products"
            )
        if not 0 <= daily <= products:
            raise ValueError(f"daily must be in 0..{products}, got {daily}")
        self.seed = seed
        self.n_products = products
        self.n_categories = categories
        self.daily = daily
        per = math.ceil(products / categories)
        self.category_names = [
            title(rng(seed, "shop", "category", k)) for k in range(1, categories + 1)
        ]
        self.members: list[list[int]] = [[] for _ in range(categories + 1)]  # 1-based
        self.products: list[Product] = [self._product(i, min(categories, 1 + (i - 1) // per))
                                        for i in range(1, products + 1)]  # fmt: skip
        for p in self.products:
            self.members[p.category].append(p.id)
        self._lock = threading.Lock()

    # -- the model ------------------------------------------------------------------

    def _product(self, i: int, category: int) -> Product:
        r = rng(self.seed, "shop", "product", i)
        if i <= self.daily:
            klass, rate = "daily", 1.0
        else:
            u, acc = r.random(), 0.0
            klass, (lo, hi) = PRODUCT_CLASSES[-1][0], PRODUCT_CLASSES[-1][2]
            for name, share, bounds in PRODUCT_CLASSES:
                acc += share
                if u < acc:
                    klass, (lo, hi) = name, bounds
                    break
            rate = 0.0 if hi == 0 else math.exp(r.uniform(math.log(lo), math.log(hi)))
        product = Product(
            id=i,
            category=category,
            name=f"{title(r)} {i}",
            klass=klass,
            rate=rate,
            description=[paragraph(r) for _ in range(r.randint(1, 3))],
            reviewed=r.randint(1, 60),
            modified_before=_days_since_change(
                rng(self.seed, "shop", "product", i, "before"), rate
            ),
            changes=ChangeProcess(rng(self.seed, "shop", "product", i, "days"), rate),
        )
        product.states.append((r.randint(5, 500) * 100 - 1, r.randint(0, 40)))
        return product

    def state(self, p: Product, day: int) -> tuple[int, int]:
        """(price in cents, units in stock) of product ``p`` on ``day``."""
        k = p.changes.count(day)
        with self._lock:
            while len(p.states) <= k:
                n = len(p.states)
                r = rng(self.seed, "shop", "product", p.id, "change", n)
                price, stock = p.states[-1]
                sign = r.choice((-1, 1)) if price >= 1000 else 1  # no price below $9.99
                new = max(99, round(price * (1 + sign * r.uniform(0.03, 0.25)) / 100) * 100 - 1)
                if new == price:  # a price change is always a real change
                    new = price + 100
                if r.random() < 0.5:
                    stock = r.randint(0, 40)
                p.states.append((new, stock))
            return p.states[k]

    def product_of(self, path: str) -> Product | None:
        i = suffix_int(path, PREFIX + "product/")
        return self.products[i - 1] if i is not None and 1 <= i <= self.n_products else None

    # -- the section interface (world.py) -----------------------------------------

    def paths(self, day: int) -> list[str]:
        """Every live path on ``day`` (the shop never changes its set of pages)."""
        cats = [f"{PREFIX}category/{k}" for k in range(1, self.n_categories + 1)]
        return [PREFIX, *cats, *(f"{PREFIX}product/{p.id}" for p in self.products)]

    def page(self, path: str, day: int) -> Page | None:
        """The page at ``path`` on ``day``; None: no such page (404)."""
        if path == PREFIX:
            return Page(200, self._home(), "home")
        k = suffix_int(path, PREFIX + "category/")
        if k is not None:
            if not 1 <= k <= self.n_categories:
                return None
            return Page(200, self._category(k, day), "category")
        p = self.product_of(path)
        if p is None:
            return None
        validators = "etag" if p.category % 2 == 1 else "none"
        return Page(200, self._product_page(p, day), "product", validators, p.modified_before)

    def meta(self, path: str) -> dict[str, object]:
        """What the truth tells about a page beyond its history (class and rate)."""
        p = self.product_of(path)
        if p is None:
            return {}
        return {"class": p.klass, "rate": round(p.rate, 6), "category": p.category}

    def unchanged_chance(self, path: str, since: int, day: int) -> float | None:
        """The model's chance that the page on ``day`` is the one of ``since``
        (``ReferenceSite.unchanged_chance``): a product keeps its state each day with
        chance ``1 - rate``; a category page lists its products' prices, and a product's
        change always moves its price; the home page never changes."""
        days = max(0, day - since)
        if path == PREFIX:
            return 1.0
        k = suffix_int(path, PREFIX + "category/")
        if k is not None:
            if not 1 <= k <= self.n_categories:
                return None
            return math.prod((1.0 - self.products[i - 1].rate) ** days for i in self.members[k])
        p = self.product_of(path)
        return None if p is None else (1.0 - p.rate) ** days

    def recommend(self, r: random.Random, day: int) -> Sequence[tuple[str, str]]:
        picks = r.sample(self.products, min(4, self.n_products))
        return [
            (f"{PREFIX}product/{p.id}", f"{p.name}: {_price(self.state(p, day)[0])}") for p in picks
        ]

    # -- rendering ----------------------------------------------------------------

    def _frame(self, page_title: str, body: Template) -> Template:
        return layout(page_title, "Reference Shop", PREFIX, body)

    def _home(self) -> Template:
        body: Template = ['<h1>Welcome to the Reference Shop</h1>\n<ul class="categories">\n']
        for k, name in enumerate(self.category_names, start=1):
            body += ["<li>", *link(f"{PREFIX}category/{k}", name), "</li>\n"]
        body.append("</ul>\n")
        return self._frame("Reference Shop", body)

    def _category(self, k: int, day: int) -> Template:
        name = self.category_names[k - 1]
        body: Template = [
            '<nav class="breadcrumb">',
            *link(PREFIX, "Home"),
            f'</nav>\n<h1>{_e(name)}</h1>\n<ul class="products">\n',
        ]
        for i in self.members[k]:
            p = self.products[i - 1]
            price, _ = self.state(p, day)
            body += [
                "<li>",
                *link(f"{PREFIX}product/{p.id}", p.name),
                f' <span class="price">{_price(price)}</span></li>\n',
            ]
        body.append("</ul>\n")
        return self._frame(f"{name} - Reference Shop", body)

    def _product_page(self, p: Product, day: int) -> Template:
        price, stock = self.state(p, day)
        cat = self.category_names[p.category - 1]
        avail = f"In stock: {stock}" if stock else "Out of stock"
        reviewed = sim_date(-p.reviewed).isoformat()
        body: Template = [
            '<nav class="breadcrumb">',
            *link(PREFIX, "Home"),
            " / ",
            *link(f"{PREFIX}category/{p.category}", cat),
            f'</nav>\n<article class="product">\n<h1 class="name">{_e(p.name)}</h1>\n',
            f'<p class="price">{_price(price)}</p>\n<p class="stock">{avail}</p>\n',
            *(f"<p>{_e(t)}</p>\n" for t in p.description),
            '<p class="review">Latest review: ',
            Slot("reldate", reviewed),
            "</p>\n</article>\n",
        ]
        return self._frame(f"{p.name} - Reference Shop", body)


def _days_since_change(r: random.Random, rate: float) -> int:
    """Days from a product's last change before day 0 to day 0: listed 30-730 days
    before it, changing on each day with chance ``rate`` since (as after day 0)."""
    listed = r.randint(30, 730)
    if rate <= 0.0:
        return listed
    if rate >= 1.0:
        return 1
    back = 1 + int(math.log(1.0 - r.random()) / math.log(1.0 - rate))  # geometric
    return min(back, listed)


def _price(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"
