"""Every ``RECRAWL_*`` setting: its default, and the check that rejects bad values.

Components read their settings through :func:`get` so a typo'd or out-of-range
value fails at start-up with a message naming the setting, never half-way
through a crawl.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: Default of every setting this package reads (documented in docs/settings.md).
DEFAULTS: dict[str, Any] = {
    # history store
    "RECRAWL_STORE": None,  # None: <project data dir>/recrawl/<spider>/history.sqlite3
    "RECRAWL_SHARED_STORE": False,  # True: spiders may share one store on purpose
    "RECRAWL_STORE_CLASS": None,  # a backend of your own (class path), instead of RECRAWL_STORE
    "RECRAWL_STORE_BODIES": True,
    "RECRAWL_FLUSH_EVERY": 500,  # visits buffered before one write transaction
    "RECRAWL_FLUSH_SECONDS": 5.0,
    # change detection
    "RECRAWL_SHINGLE_SIZE": 4,
    "RECRAWL_SIMHASH_DISTANCE": 3,
    "RECRAWL_MIN_ELEMENT_CHANGES": 1,
    "RECRAWL_IGNORE_XPATHS": [],
    "RECRAWL_MAX_PARSE_BYTES": 5 * 1024 * 1024,
    # recording middleware
    "RECRAWL_CONDITIONAL_GET": True,
    # scheduler
    "RECRAWL_BUDGET": 0.05,  # pages per cycle (int) or share of known URLs (float < 1)
    "RECRAWL_NEW_SHARE": 0.2,
    "RECRAWL_WARMUP_CYCLES": 2,
    "RECRAWL_CONTINUOUS": False,
    "RECRAWL_CYCLE_SECONDS": 3600.0,
    "RECRAWL_MAX_CYCLES": 0,
    "RECRAWL_MONITOR_SHARE": 0.0,
    "RECRAWL_MAX_PER_DOMAIN": None,
    # loop-time baskets (paper 001; docs/baskets.md): probing new URLs, the basket model
    "RECRAWL_PROBE": None,  # None: probe when the scorer uses the `due` terminal
    "RECRAWL_PROBE_OFFSETS": [4, 6, 9, 14, 21, 32, 48, 72],  # hours after the first fetch
    "RECRAWL_PROBE_SHARE": 0.25,  # most of a cycle's budget that due probes may take first
    "RECRAWL_BASKETS": [4, 12, 24, 72, 168],  # loop-time baskets: recrawl intervals, hours
    "RECRAWL_BASKET_DEFAULT": 24.0,  # hours: `due`'s interval for a page not classified yet
    "RECRAWL_BASKET_MODEL": None,  # None: the model `scrapy recrawl-baskets` saved in the store
    "RECRAWL_HOUR_SECONDS": 3600.0,  # wall seconds per hour of the two lists (tests compress)
    # content-aware prediction (paper 004; docs/content.md)
    "RECRAWL_CHANGE_TEST": "simhash",  # or "chi2": Eq. 1 on the bags of words (SQLite or Redis store)
    "RECRAWL_CHI2_P": 0.05,  # significance level of the chi-squared test
    "RECRAWL_BOW_TERMS": 256,  # terms kept per version's bag of words (8 bytes each)
    "RECRAWL_WINDOW": 3,  # l: the D1..Dl, C1..Cl terminals (at most 5)
    "RECRAWL_EXPERTS": 20,  # k related pages per URL (the Q terminal)
    "RECRAWL_EXPERTS_LAG": 3,  # largest cross-correlation delay, cycles
    "RECRAWL_EXPERTS_CANDIDATES": 512,  # URLs each URL is compared with (the cost bound)
    "RECRAWL_EXPERTS_HISTORY": 60,  # cycles of change series the correlation uses
    "RECRAWL_EXPERTS_REFRESH": 10000,  # URLs whose experts are recomputed per cycle, at most
    "RECRAWL_EXPERTS_SAME_HOST": True,  # candidates only from the same host
    # WebFountain plan mode (docs/planning.md)
    "RECRAWL_PLANNER": None,  # None or "webfountain"
    "RECRAWL_PLAN_STRATEGY": "strategy1",
    "RECRAWL_PLAN_PERIODS": 14,
    "RECRAWL_PLAN_EVERY": 7,
    "RECRAWL_BUCKETS": 64,
    # Redis (docs/distributed.md)
    "RECRAWL_REDIS_KEY": "%(spider)s:history",  # one history per spider
    "RECRAWL_REDIS_LOG_MAXLEN": 10_000_000,
    "RECRAWL_REDIS_SCHEDULER_KEY": "%(spider)s:recrawl",
    "RECRAWL_REDIS_LOCK_SECONDS": 300.0,
    "RECRAWL_REDIS_WORKER_TIMEOUT": 30.0,
    "RECRAWL_REDIS_OUTAGE_SECONDS": 60.0,
    # scoring
    # plug-ins (papers' policies and terminals), merged like DOWNLOADER_MIDDLEWARES
    "RECRAWL_PLUGINS_BASE": {
        "scrapy_recrawl.estimate.plugin.BasketsPlugin": 100,
        "scrapy_recrawl.content.plugin.ContentPlugin": 200,
        "scrapy_recrawl.planning.plugin.WebFountainPlugin": 300,
    },
    "RECRAWL_PLUGINS": {},
    "RECRAWL_SCORER": "aad+",  # measured best on average on the shared histories (docs/benchmarks.md)
    "RECRAWL_PRIOR": None,
    "RECRAWL_SEED": 0,
}


class RecrawlSettingError(ValueError):
    """A RECRAWL_* setting has a value we cannot use; the message names it."""


def _type_name(t: type | tuple[type, ...]) -> str:
    if isinstance(t, tuple):
        return " or ".join(x.__name__ for x in t)
    return t.__name__


def get(
    settings: Mapping[str, Any] | Any,
    name: str,
    kind: type | tuple[type, ...] | None = None,
    check: Callable[[Any], bool] | None = None,
    expect: str = "",
) -> Any:
    """Read ``name`` from Scrapy ``settings`` (or a dict), defaulting to DEFAULTS.

    ``kind`` is the accepted type(s), ``check`` a predicate on the value and
    ``expect`` says in words what a good value is; a bad value raises
    :class:`RecrawlSettingError` naming the setting, the value and ``expect``.
    """
    value = settings.get(name, DEFAULTS.get(name)) if settings is not None else DEFAULTS.get(name)
    if value is None and DEFAULTS.get(name) is None:
        return None
    if kind is not None:
        # Scrapy hands command-line (-s) values over as strings: coerce numbers.
        if isinstance(value, str) and kind in (int, float, (int, float)):
            try:
                value = float(value) if kind is not int else int(value)
            except ValueError:
                raise RecrawlSettingError(
                    f"{name}={value!r}: expected {expect or _type_name(kind)}"
                ) from None
        if kind is bool and isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                value = True
            elif low in ("0", "false", "no", "off", ""):
                value = False
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            raise RecrawlSettingError(f"{name}={value!r}: expected {expect or _type_name(kind)}")
        if not isinstance(value, kind):
            raise RecrawlSettingError(
                f"{name}={value!r}: expected {expect or _type_name(kind)}, "
                f"got {type(value).__name__}"
            )
    if check is not None and not check(value):
        raise RecrawlSettingError(f"{name}={value!r}: expected {expect}")
    return value
