"""Every ``RECRAWL_*`` setting: its default, how a string value is read, its check.

Components read their settings through :func:`get` so a typo'd or out-of-range
value fails at start-up with a message naming the setting, never half-way
through a crawl. A value given as a string (``scrapy crawl -s NAME=VALUE``
hands every value over as one) is converted the way Scrapy's typed getters
convert it (:data:`KINDS`), so ``-s RECRAWL_CONTINUOUS=true`` or
``-s RECRAWL_IGNORE_XPATHS=//footer,//nav`` mean what they say.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

#: Default of every setting this package reads (documented in docs/settings.md).
DEFAULTS: dict[str, Any] = {
    "RECRAWL_ENABLED": True,  # False: the add-on sets nothing, the components stand aside
    # history store
    "RECRAWL_STORE": None,  # None: <project data dir>/recrawl/<spider>/history.sqlite3
    "RECRAWL_SHARED_STORE": False,  # True: spiders may share one store on purpose
    "RECRAWL_STORE_CLASS": None,  # a backend of your own (class path), instead of RECRAWL_STORE
    "RECRAWL_STORE_BODIES": True,
    "RECRAWL_FLUSH_EVERY": 500,  # visits per write; responses held while the store is away
    "RECRAWL_FLUSH_SECONDS": 5.0,
    "RECRAWL_SQLITE_LOG_MAXLEN": 10_000_000,  # visits the SQLite log keeps (0: all)
    # change detection
    "RECRAWL_SHINGLE_SIZE": 4,
    "RECRAWL_SIMHASH_DISTANCE": 3,
    "RECRAWL_MIN_ELEMENT_CHANGES": 1,
    "RECRAWL_IGNORE_XPATHS": [],
    "RECRAWL_LEARN_BOILERPLATE": True,
    "RECRAWL_BOILERPLATE_PAIRS": 2,
    "RECRAWL_MAX_PARSE_BYTES": 5 * 1024 * 1024,
    # recording middleware
    "RECRAWL_CONDITIONAL_GET": True,
    "RECRAWL_SKIP_UNCHANGED": False,  # or "items" / "all": what an unchanged page gives the spider
    "RECRAWL_MAX_FAILURES": 3,  # consecutive failed cycles before a URL is gone (0: never)
    # never kept in a stored request, beside the built-in credentials (history/request_scrub.py)
    "RECRAWL_UNSTORED_HEADERS": [],
    "RECRAWL_UNSTORED_META": [],
    # scheduler
    "RECRAWL_BUDGET": "5%",  # pages per cycle (int) or a share of the known URLs ("5%")
    "RECRAWL_NEW_SHARE": 0.2,
    "RECRAWL_NEW_SHARE_MAX": 0.5,  # the most new URLs may take of a budget while a backlog waits
    "RECRAWL_WARMUP_CYCLES": 2,
    "RECRAWL_CONTINUOUS": False,
    "RECRAWL_CYCLE_SECONDS": 3600.0,  # the longest a cycle may run
    "RECRAWL_CYCLE_PERIOD": 3600.0,  # continuous mode: seconds between cycle starts
    "RECRAWL_MAX_CYCLES": 0,
    "RECRAWL_MONITOR_SHARE": 0.0,
    "RECRAWL_MAX_PER_DOMAIN": None,
    # URL traps (traps.py): a share budget's most pages, known URLs per host, the frontier
    "RECRAWL_BUDGET_MAX": 0,  # the most pages a share budget ("5%") gives a cycle (0: no max)
    "RECRAWL_MAX_URLS_PER_HOST": 0,  # known URLs per host; new ones past it dropped (0: no cap)
    "RECRAWL_FRONTIER_MAX": 1000000,  # new URLs kept waiting in the store (0: no cap)
    "RECRAWL_ADAPTIVE_BUDGET": None,  # expected changes below which a cycle stops recrawling
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
    # importance and sitemaps as evidence (docs/evidence.md)
    "RECRAWL_EVIDENCE": None,  # None: on with RECRAWL_IMPORTANCE, `w` or its terminals
    "RECRAWL_IMPORTANCE": None,  # a callable's path: (request, response) -> weight > 0
    "RECRAWL_SITEMAP_CHECKS": 3,  # checked announcements before a URL's own share decides
    "RECRAWL_SITEMAP_TRUST": 0.5,  # least confirmed share for a lastmod to make a URL due
    # Redis (docs/distributed.md)
    "RECRAWL_REDIS_KEY": "%(spider)s:history",  # one history per spider
    "RECRAWL_REDIS_LOG_MAXLEN": 10_000_000,
    "RECRAWL_REDIS_SHARDS": 16,  # shards of a new Redis store (a store keeps its own)
    "RECRAWL_REDIS_SCHEDULER_KEY": "%(spider)s:recrawl",
    "RECRAWL_REDIS_LOCK_SECONDS": 300.0,
    "RECRAWL_REDIS_WORKER_TIMEOUT": 30.0,
    "RECRAWL_REDIS_OUTAGE_SECONDS": 60.0,
    "RECRAWL_REDIS_CLUSTER": False,  # True: REDIS_URL / RECRAWL_STORE name a Redis Cluster node
    "RECRAWL_ALLOW_PICKLE": False,  # True: a pickling SCHEDULER_SERIALIZER (CWE-502 risk)
    "RECRAWL_ON_STORE_LOSS": "stop",  # a shared store emptied or replaced mid-crawl: or "continue"
    # scoring
    # plug-ins (papers' policies and terminals), merged like DOWNLOADER_MIDDLEWARES
    "RECRAWL_PLUGINS_BASE": {
        "scrapy_recrawl.estimate.plugin.BasketsPlugin": 100,
        "scrapy_recrawl.content.plugin.ContentPlugin": 200,
        "scrapy_recrawl.planning.plugin.WebFountainPlugin": 300,
        "scrapy_recrawl.evidence.plugin.EvidencePlugin": 400,
    },
    "RECRAWL_PLUGINS": {},
    "RECRAWL_SCORER": "aad+",  # measured best on average on the shared histories (docs/benchmarks.md)
    "RECRAWL_PRIOR": None,
    "RECRAWL_SEED": 0,
    # the `nutch` preset (Nutch's AdaptiveFetchSchedule defaults, in cycles of one day)
    "RECRAWL_NUTCH_INTERVAL": 30.0,  # db.fetch.interval.default: 30 days
    "RECRAWL_NUTCH_MIN_INTERVAL": 1.0,  # db.fetch.schedule.adaptive.min_interval: 60 s
    "RECRAWL_NUTCH_MAX_INTERVAL": 365.0,  # db.fetch.schedule.adaptive.max_interval: 1 year
    "RECRAWL_NUTCH_INC_RATE": 0.4,  # db.fetch.schedule.adaptive.inc_rate
    "RECRAWL_NUTCH_DEC_RATE": 0.2,  # db.fetch.schedule.adaptive.dec_rate
    # the `burst` terminal: how fast a change's aftershocks decay, in cycles
    "RECRAWL_BURST_TAU": 2.0,
}


class RecrawlSettingError(ValueError):
    """A RECRAWL_* setting has a value we cannot use; the message names it."""


# -- reading a string the way Scrapy's typed getters do ---------------------------
#
# Each converter takes the raw value and returns it converted when it is a string
# (or, for booleans, 0/1), unchanged otherwise; the kind check of get() then
# refuses what is still of the wrong type. A ValueError means "not that kind".


def _bool(value: Any) -> Any:
    # Settings.getbool(): 0/1, True/False, '0'/'1', 'True'/'False', 'true'/'false'
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return value
    if value in ("True", "true"):
        return True
    if value in ("False", "false"):
        return False
    return bool(int(value))


def _int(value: Any) -> Any:
    return int(value) if isinstance(value, str) else value  # Settings.getint()


def _number(value: Any) -> Any:
    # Settings.getfloat(), keeping "3" an int where a count or a float will do
    if not isinstance(value, str):
        return value
    try:
        return int(value)
    except ValueError:
        return float(value)


def _split(text: str) -> list[str]:
    """Settings.getlist()'s comma split, except that a comma inside brackets,
    parentheses or quotes does not split (an XPath such as
    ``//div[contains(@class, "ad")]`` stays one item); a JSON list is read as one."""
    text = text.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            return parsed
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _list(value: Any) -> Any:
    return _split(value) if isinstance(value, str) else value


def _numbers(value: Any) -> Any:
    # "4,6,9", "[4, 6, 9]" or "(0.5, 100)": a list of numbers
    if not isinstance(value, str):
        return value
    return [_number(x) for x in _split(value.strip().strip("()"))]


def _dict(value: Any) -> Any:
    # Settings.getdict(): a JSON object; a Scrapy BaseSettings becomes a plain dict
    if isinstance(value, str):
        value = json.loads(value)
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        return value
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return dict(value)
    return value


def _text(value: Any) -> Any:
    return value


def _skip(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("items", "all"):
        return value.strip().lower()
    if value in (None, "", "None", "none"):
        return False
    return _bool(value)


_NONE = ("None", "none", "")


def _optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A setting whose default is None: the string "None" (or "") gives it back."""

    def read(value: Any) -> Any:
        if isinstance(value, str) and value.strip() in _NONE:
            return None
        return convert(value)

    return read


#: How each setting's value is read when it is a string (``-s NAME=VALUE``), with
#: the words a refusal uses. Every name of DEFAULTS has one (tests/test_settings.py).
KINDS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "RECRAWL_ENABLED": (_bool, "True or False"),
    "RECRAWL_STORE": (_optional(_text), "a path or a store URL"),
    "RECRAWL_SHARED_STORE": (_bool, "True or False"),
    "RECRAWL_STORE_CLASS": (_optional(_text), "a class path"),
    "RECRAWL_STORE_BODIES": (_bool, "True or False"),
    "RECRAWL_FLUSH_EVERY": (_int, "an integer"),
    "RECRAWL_FLUSH_SECONDS": (_number, "a number"),
    "RECRAWL_SQLITE_LOG_MAXLEN": (_int, "an integer"),
    "RECRAWL_SHINGLE_SIZE": (_int, "an integer"),
    "RECRAWL_SIMHASH_DISTANCE": (_int, "an integer"),
    "RECRAWL_MIN_ELEMENT_CHANGES": (_int, "an integer"),
    "RECRAWL_IGNORE_XPATHS": (_list, "a list of XPaths"),
    "RECRAWL_LEARN_BOILERPLATE": (_bool, "True or False"),
    "RECRAWL_BOILERPLATE_PAIRS": (_int, "an integer"),
    "RECRAWL_MAX_PARSE_BYTES": (_int, "an integer"),
    "RECRAWL_CONDITIONAL_GET": (_bool, "True or False"),
    "RECRAWL_SKIP_UNCHANGED": (_skip, "False, 'items' or 'all'"),
    "RECRAWL_MAX_FAILURES": (_int, "an integer"),
    "RECRAWL_UNSTORED_HEADERS": (_list, "a list of header names"),
    "RECRAWL_UNSTORED_META": (_list, "a list of Request.meta keys"),
    # read by core.budget.parse_budget(), the one budget rule, strings included
    "RECRAWL_BUDGET": (_text, "pages (an int) or a share such as '5%'"),
    "RECRAWL_BUDGET_MAX": (_int, "an integer"),
    "RECRAWL_MAX_URLS_PER_HOST": (_int, "an integer"),
    "RECRAWL_FRONTIER_MAX": (_int, "an integer"),
    "RECRAWL_NEW_SHARE": (_number, "a number"),
    "RECRAWL_NEW_SHARE_MAX": (_number, "a number"),
    "RECRAWL_WARMUP_CYCLES": (_int, "an integer"),
    "RECRAWL_CONTINUOUS": (_bool, "True or False"),
    "RECRAWL_CYCLE_SECONDS": (_number, "a number"),
    "RECRAWL_CYCLE_PERIOD": (_number, "a number"),
    "RECRAWL_MAX_CYCLES": (_int, "an integer"),
    "RECRAWL_MONITOR_SHARE": (_number, "a number"),
    "RECRAWL_MAX_PER_DOMAIN": (_optional(_int), "an integer or None"),
    "RECRAWL_ADAPTIVE_BUDGET": (_optional(_number), "a number or None"),
    "RECRAWL_PROBE": (_optional(_bool), "True, False or None"),
    "RECRAWL_PROBE_OFFSETS": (_numbers, "a list of numbers"),
    "RECRAWL_PROBE_SHARE": (_number, "a number"),
    "RECRAWL_BASKETS": (_numbers, "a list of numbers"),
    "RECRAWL_BASKET_DEFAULT": (_number, "a number"),
    "RECRAWL_BASKET_MODEL": (_optional(_text), "a file path or None"),
    "RECRAWL_HOUR_SECONDS": (_number, "a number"),
    "RECRAWL_CHANGE_TEST": (_text, "'simhash' or 'chi2'"),
    "RECRAWL_CHI2_P": (_number, "a number"),
    "RECRAWL_BOW_TERMS": (_int, "an integer"),
    "RECRAWL_WINDOW": (_int, "an integer"),
    "RECRAWL_EXPERTS": (_int, "an integer"),
    "RECRAWL_EXPERTS_LAG": (_int, "an integer"),
    "RECRAWL_EXPERTS_CANDIDATES": (_int, "an integer"),
    "RECRAWL_EXPERTS_HISTORY": (_int, "an integer"),
    "RECRAWL_EXPERTS_REFRESH": (_int, "an integer"),
    "RECRAWL_EXPERTS_SAME_HOST": (_bool, "True or False"),
    "RECRAWL_PLANNER": (_optional(_text), "None or 'webfountain'"),
    "RECRAWL_PLAN_STRATEGY": (_text, "a strategy name"),
    "RECRAWL_PLAN_PERIODS": (_int, "an integer"),
    "RECRAWL_PLAN_EVERY": (_int, "an integer"),
    "RECRAWL_BUCKETS": (_int, "an integer"),
    "RECRAWL_EVIDENCE": (_optional(_bool), "True, False or None"),
    "RECRAWL_IMPORTANCE": (_optional(_text), "a callable's dotted path or None"),
    "RECRAWL_SITEMAP_CHECKS": (_int, "an integer"),
    "RECRAWL_SITEMAP_TRUST": (_number, "a number"),
    "RECRAWL_REDIS_KEY": (_text, "a key prefix"),
    "RECRAWL_REDIS_LOG_MAXLEN": (_int, "an integer"),
    "RECRAWL_REDIS_SHARDS": (_int, "an integer"),
    "RECRAWL_REDIS_SCHEDULER_KEY": (_text, "a key template"),
    "RECRAWL_REDIS_LOCK_SECONDS": (_number, "a number"),
    "RECRAWL_REDIS_WORKER_TIMEOUT": (_number, "a number"),
    "RECRAWL_REDIS_OUTAGE_SECONDS": (_number, "a number"),
    "RECRAWL_REDIS_CLUSTER": (_bool, "True or False"),
    "RECRAWL_ALLOW_PICKLE": (_bool, "True or False"),
    "RECRAWL_ON_STORE_LOSS": (_text, "'stop' or 'continue'"),
    "RECRAWL_PLUGINS_BASE": (_dict, "a dict {'path.Class': order} (JSON on the command line)"),
    "RECRAWL_PLUGINS": (_dict, "a dict {'path.Class': order} (JSON on the command line)"),
    "RECRAWL_SCORER": (_text, "a preset name, an expression or a JSON path"),
    "RECRAWL_PRIOR": (_optional(_numbers), "two numbers (a, b) or None"),
    "RECRAWL_SEED": (_int, "an integer"),
    "RECRAWL_NUTCH_INTERVAL": (_number, "a number"),
    "RECRAWL_NUTCH_MIN_INTERVAL": (_number, "a number"),
    "RECRAWL_NUTCH_MAX_INTERVAL": (_number, "a number"),
    "RECRAWL_NUTCH_INC_RATE": (_number, "a number"),
    "RECRAWL_NUTCH_DEC_RATE": (_number, "a number"),
    "RECRAWL_BURST_TAU": (_number, "a number"),
}


def _type_name(t: type | tuple[type, ...]) -> str:
    if isinstance(t, tuple):
        return " or ".join(x.__name__ for x in t)
    return t.__name__


def convert(name: str, value: Any, expect: str = "") -> Any:
    """``value`` of setting ``name`` as its kind reads it (:data:`KINDS`); a string
    that is not of that kind raises :class:`RecrawlSettingError` naming both."""
    kind = KINDS.get(name)
    if kind is None:
        return value
    read, words = kind
    try:
        return read(value)
    except RecrawlSettingError:
        raise
    except (ValueError, TypeError):
        raise RecrawlSettingError(f"{name}={value!r}: expected {expect or words}") from None


def get(
    settings: Mapping[str, Any] | Any,
    name: str,
    kind: type | tuple[type, ...] | None = None,
    check: Callable[[Any], bool] | None = None,
    expect: str = "",
) -> Any:
    """Read ``name`` from Scrapy ``settings`` (or a dict), defaulting to DEFAULTS.

    A string is first converted as :data:`KINDS` says (Scrapy's getters' rules).
    ``kind`` is the accepted type(s), ``check`` a predicate on the value and
    ``expect`` says in words what a good value is; a bad value raises
    :class:`RecrawlSettingError` naming the setting, the value and ``expect``.
    """
    raw = settings.get(name, DEFAULTS.get(name)) if settings is not None else DEFAULTS.get(name)
    value = convert(name, raw, expect)
    if value is None and DEFAULTS.get(name) is None:
        return None
    if kind is not None:
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            raise RecrawlSettingError(f"{name}={raw!r}: expected {expect or _type_name(kind)}")
        if not isinstance(value, kind):
            raise RecrawlSettingError(
                f"{name}={raw!r}: expected {expect or _type_name(kind)}, got {type(value).__name__}"
            )
    if isinstance(value, float) and not math.isfinite(value):
        # inf passes most checks (> 0, >= 1) and then poisons a score with inf*0 = NaN
        raise RecrawlSettingError(
            f"{name}={raw!r}: expected a finite number ({expect or 'a number'})"
        )
    if check is not None and not check(value):
        raise RecrawlSettingError(f"{name}={raw!r}: expected {expect}")
    return value


# -- names ----------------------------------------------------------------------


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice ``name`` was most likely meant to be (difflib), or None."""
    found = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_settings(names: Iterable[str], known: Collection[str]) -> list[str]:
    """One message per ``RECRAWL_*`` name that is not a setting (a typo is otherwise
    silently ignored), naming the closest valid one."""
    messages = []
    for name in sorted({n for n in names if isinstance(n, str) and n.startswith("RECRAWL_")}):
        if name in known:
            continue
        near = closest(name, known)
        hint = f"; did you mean {near}?" if near else " (docs/settings.md lists them)"
        messages.append(f"{name} is not a scrapy-recrawl setting, it is ignored{hint}")
    return messages
