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
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


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


#: The strings that say "no value" (an ``-s NAME=None`` on the command line).
_NONE = ("None", "none", "")


def _skip(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("items", "all"):
        return value.strip().lower()
    if value is None or value in _NONE:
        return False
    return _bool(value)


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _feed(value: Any) -> Any:
    # a URI, or a JSON object of FEEDS' shape on the command line
    if isinstance(value, str) and value.strip().startswith("{"):
        return _dict(value)
    return _dict(value) if isinstance(value, Mapping) else value


def _optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A setting whose default is None: the string "None" (or "") gives it back."""

    def read(value: Any) -> Any:
        if isinstance(value, str) and value.strip() in _NONE:
            return None
        return convert(value)

    return read


#: What a refusal of each kind says when the declaration gives no words of its own.
_WORDS = {
    "bool": "True or False",
    "int": "an integer",
    "number": "a number",
}

_NUM = (int, float)


def _increasing_positive(least: int) -> Callable[[Any], bool]:
    """At least ``least`` finite positive numbers (not booleans), strictly increasing."""

    def check(value: Any) -> bool:
        try:
            xs = [float(x) for x in value]
        except (TypeError, ValueError):
            return False
        return (
            len(xs) >= least
            and not any(isinstance(x, bool) for x in value)
            and all(math.isfinite(x) and x > 0 for x in xs)
            and all(a < b for a, b in zip(xs, xs[1:], strict=False))
        )

    return check


def _strings(value: Any) -> bool:
    """A list of names or XPaths: every item a non-empty string."""
    return all(isinstance(x, str) and x.strip() for x in value)


@dataclass(frozen=True)
class Setting:
    """One ``RECRAWL_*`` setting, declared once: its default, how a string value is
    read (``-s NAME=VALUE``), the type(s) it must then be, the check its value must
    pass and the words a refusal uses. :func:`get` applies all of it, so no
    component checks a range where it reads the value."""

    name: str
    default: Any
    read: Callable[[Any], Any]
    kind: type | tuple[type, ...] | None = None
    check: Callable[[Any], bool] | None = None
    expect: str = ""


def _declare(*settings: Setting) -> dict[str, Setting]:
    return {s.name: s for s in settings}


def _b(name: str, default: Any) -> Setting:
    return Setting(name, default, _bool, bool, None, _WORDS["bool"])


def _i(
    name: str, default: Any, check: Callable[[Any], bool] | None = None, expect: str = ""
) -> Setting:
    return Setting(name, default, _int, int, check, expect or _WORDS["int"])


def _n(
    name: str, default: Any, check: Callable[[Any], bool] | None = None, expect: str = ""
) -> Setting:
    return Setting(name, default, _number, _NUM, check, expect or _WORDS["number"])


#: Every setting this package reads (documented in docs/settings.md), in one table.
SETTINGS: dict[str, Setting] = _declare(
    _b("RECRAWL_ENABLED", True),  # False: the add-on sets nothing, the components stand aside
    # -- history store
    # None: <project data dir>/recrawl/<spider>/history.sqlite3
    Setting(
        "RECRAWL_STORE", None, _optional(_text), (str, os.PathLike), None, "a path or a store URL"
    ),
    _b("RECRAWL_SHARED_STORE", False),  # True: spiders may share one store on purpose
    # a backend of your own (class path), instead of RECRAWL_STORE
    Setting("RECRAWL_STORE_CLASS", None, _optional(_text), str, None, "a class path"),
    _b("RECRAWL_STORE_BODIES", True),
    # the body before a URL's last change, beside the kept one (recrawl-report --url)
    _b("RECRAWL_KEEP_PREVIOUS", True),
    _i(
        "RECRAWL_PREVIOUS_BODY_MAX_BYTES",
        1024 * 1024,
        lambda v: v >= 0,
        "an int >= 0 (bytes of a body; 0: none kept)",
    ),
    # visits per write; responses held while the store is away
    _i("RECRAWL_FLUSH_EVERY", 500, lambda v: v >= 1, "a positive number of visits"),
    _n("RECRAWL_FLUSH_SECONDS", 5.0, lambda v: v >= 0, "a number of seconds >= 0"),
    # visits the SQLite log keeps (0: all)
    _i("RECRAWL_SQLITE_LOG_MAXLEN", 10_000_000, lambda v: v >= 0, "visits >= 0 (0: no cap)"),
    # -- change detection
    _i("RECRAWL_SHINGLE_SIZE", 4, lambda v: v >= 1, "an int >= 1"),
    _i("RECRAWL_SIMHASH_DISTANCE", 3, lambda v: 0 <= v <= 64, "an int from 0 to 64"),
    _i("RECRAWL_MIN_ELEMENT_CHANGES", 1, lambda v: v >= 0, "an int >= 0"),
    Setting("RECRAWL_IGNORE_XPATHS", [], _list, (list, tuple), _strings, "a list of XPaths"),
    # compare only inside these elements, when a page has one (else the whole page)
    Setting("RECRAWL_WATCH_XPATHS", [], _list, (list, tuple), _strings, "a list of XPaths"),
    Setting("RECRAWL_WATCH_CSS", [], _list, (list, tuple), _strings, "a list of CSS selectors"),
    _b("RECRAWL_LEARN_BOILERPLATE", True),
    _i(
        "RECRAWL_BOILERPLATE_PAIRS",
        2,
        lambda v: v >= 1,
        "a number of pairs >= 1 per section of a site",
    ),
    _i("RECRAWL_MAX_PARSE_BYTES", 5 * 1024 * 1024, lambda v: v >= 0, "an int >= 0 (bytes)"),
    # -- recording middleware
    _b("RECRAWL_CONDITIONAL_GET", True),
    # or "items" / "all": what an unchanged page gives the spider
    Setting("RECRAWL_SKIP_UNCHANGED", False, _skip, None, None, "False, 'items' or 'all'"),
    # -- what changed in the spider's items (item_change.py, item_watch.py)
    # "items": a page changed iff its items did (held_observations.py)
    Setting(
        "RECRAWL_CHANGE_SIGNAL",
        "text",
        _lower,
        str,
        lambda v: v in ("text", "items"),
        "'text' or 'items'",
    ),
    _b("RECRAWL_ITEM_CHANGES", False),  # compare each page's items (on with the two above)
    # the fields that identify an item ([]: its class and position on the page)
    Setting("RECRAWL_ITEM_KEY", [], _list, (list, tuple), _strings, "a list of field names"),
    _b("RECRAWL_ITEM_VALUES", False),  # keep field values (old -> new), not only hashes
    _i("RECRAWL_ITEM_VALUES_MAX_BYTES", 16384, lambda v: v >= 0, "an int >= 0 (bytes per page)"),
    # a feed URI (JSON Lines) or a FEEDS-style {uri: options} of the item change records
    Setting(
        "RECRAWL_CHANGE_FEED",
        None,
        _optional(_feed),
        (str, dict),
        lambda v: bool(v) and (isinstance(v, str) or all(isinstance(o, dict) for o in v.values())),
        "a feed URI or a FEEDS-style dict {uri: {option: value}}",
    ),
    # consecutive failed cycles before a URL is gone (0: never)
    _i(
        "RECRAWL_MAX_FAILURES",
        3,
        lambda v: v >= 0,
        "a number of failed cycles >= 0 (0: never gone for failures)",
    ),
    # never kept in a stored request, beside the built-in credentials
    # (history/request_scrub.py)
    Setting(
        "RECRAWL_UNSTORED_HEADERS", [], _list, (list, tuple), _strings, "a list of header names"
    ),
    Setting(
        "RECRAWL_UNSTORED_META", [], _list, (list, tuple), _strings, "a list of Request.meta keys"
    ),
    # -- scheduler
    # pages per cycle (int) or a share of the known URLs ("5%"): read by
    # core.budget.parse_budget(), the one budget rule, strings included
    Setting("RECRAWL_BUDGET", "5%", _text, None, None, "pages (an int) or a share such as '5%'"),
    _n("RECRAWL_NEW_SHARE", 0.2, lambda v: 0 <= v <= 1, "a share 0..1"),
    # the most new URLs may take of a budget while a backlog waits
    _n("RECRAWL_NEW_SHARE_MAX", 0.5, lambda v: 0 <= v <= 1, "a share 0..1"),
    _i("RECRAWL_WARMUP_CYCLES", 2, lambda v: v >= 0, "a number of cycles >= 0"),
    _b("RECRAWL_CONTINUOUS", False),
    # the longest a cycle may run
    _n("RECRAWL_CYCLE_SECONDS", 3600.0, lambda v: v > 0, "a number of seconds > 0"),
    # continuous mode: seconds between cycle starts
    _n("RECRAWL_CYCLE_PERIOD", 3600.0, lambda v: v > 0, "a number of seconds > 0"),
    _i("RECRAWL_MAX_CYCLES", 0, lambda v: v >= 0, "a number of cycles (0: no limit)"),
    _n("RECRAWL_MONITOR_SHARE", 0.0, lambda v: 0 <= v <= 1, "a share from 0 to 1"),
    Setting(
        "RECRAWL_MAX_PER_DOMAIN",
        None,
        _optional(_int),
        int,
        lambda v: v >= 1,
        "a number of pages >= 1, or None",
    ),
    # -- URL traps (traps.py): a share budget's most pages, known URLs per host, the frontier
    # the most pages a share budget ("5%") gives a cycle (0: no max)
    _i("RECRAWL_BUDGET_MAX", 0, lambda v: v >= 0, "a number of pages (0: no maximum)"),
    # known URLs per host; new ones past it dropped (0: no cap)
    _i("RECRAWL_MAX_URLS_PER_HOST", 0, lambda v: v >= 0, "a number of URLs (0: no cap)"),
    _i(
        "RECRAWL_FRONTIER_MAX", 1000000, lambda v: v >= 0, "a number of URLs (0: no cap)"
    ),  # new URLs kept waiting in the store (0: no cap)
    # expected changes below which a cycle stops recrawling
    Setting("RECRAWL_ADAPTIVE_BUDGET", None, _optional(_number), None, None, "a number or None"),
    # -- loop-time baskets (paper 001; docs/baskets.md): probing new URLs, the basket model
    # None: probe when the scorer uses the `due` terminal
    Setting("RECRAWL_PROBE", None, _optional(_bool), bool, None, "True, False or None"),
    # hours after the first fetch
    Setting(
        "RECRAWL_PROBE_OFFSETS",
        [4, 6, 9, 14, 21, 32, 48, 72],
        _numbers,
        (list, tuple),
        _increasing_positive(1),
        "increasing positive numbers of hours after the first fetch, "
        "e.g. [4, 6, 9, 14, 21, 32, 48, 72]",
    ),
    # most of a cycle's budget that due probes may take first
    _n("RECRAWL_PROBE_SHARE", 0.25, lambda v: 0 < v <= 1, "a share of the cycle budget in (0, 1]"),
    # loop-time baskets: recrawl intervals, hours
    Setting(
        "RECRAWL_BASKETS",
        [4, 12, 24, 72, 168],
        _numbers,
        (list, tuple),
        _increasing_positive(2),
        "at least 2 increasing positive recrawl intervals in hours, e.g. [4, 12, 24, 72, 168]",
    ),
    # hours: `due`'s interval for a page not classified yet
    _n("RECRAWL_BASKET_DEFAULT", 24.0, lambda v: v > 0, "a recrawl interval in hours > 0"),
    # None: the model `scrapy recrawl-baskets` saved in the store
    Setting("RECRAWL_BASKET_MODEL", None, _optional(_text), str, None, "a file path or None"),
    # wall seconds per hour of the two lists (tests compress)
    _n(
        "RECRAWL_HOUR_SECONDS",
        3600.0,
        lambda v: v > 0,
        "a number of seconds > 0 (3600 outside tests and simulations)",
    ),
    # -- content-aware prediction (paper 004; docs/content.md)
    # or "chi2": Eq. 1 on the bags of words (SQLite or Redis store)
    Setting("RECRAWL_CHANGE_TEST", "simhash", _text, str, None, "'simhash' or 'chi2'"),
    # significance level of the chi-squared test
    _n("RECRAWL_CHI2_P", 0.05, lambda v: 0 < v < 1, "a p-value in (0, 1)"),
    # terms kept per version's bag of words (8 bytes each)
    _i("RECRAWL_BOW_TERMS", 256, lambda v: 1 <= v <= 65535, "an int from 1 to 65535"),
    # l: the D1..Dl, C1..Cl terminals (at most 5)
    _i("RECRAWL_WINDOW", 3, lambda v: 1 <= v <= 5, "an int from 1 to 5 (visits)"),
    _i("RECRAWL_EXPERTS", 20, lambda v: 1 <= v <= 255, "an int 1..255"),  # k related pages per URL
    # largest cross-correlation delay, cycles
    _i("RECRAWL_EXPERTS_LAG", 3, lambda v: 1 <= v <= 255, "an int 1..255"),
    # URLs each URL is compared with (the cost bound)
    _i("RECRAWL_EXPERTS_CANDIDATES", 512, lambda v: v >= 2, "an int >= 2 (URLs)"),
    # cycles of change series the correlation uses
    _i("RECRAWL_EXPERTS_HISTORY", 60, lambda v: v >= 4, "an int >= 4"),
    # URLs whose experts are recomputed per cycle, at most
    _i("RECRAWL_EXPERTS_REFRESH", 10000, lambda v: v >= 1, "an int >= 1"),
    _b("RECRAWL_EXPERTS_SAME_HOST", True),  # candidates only from the same host
    # -- WebFountain plan mode (docs/planning.md)
    Setting(
        "RECRAWL_PLANNER",
        None,
        _optional(_text),
        str,
        lambda v: v == "webfountain",
        "None or 'webfountain'",
    ),
    Setting("RECRAWL_PLAN_STRATEGY", "strategy1", _text, str, None, "a strategy name"),
    _i("RECRAWL_PLAN_PERIODS", 14, lambda v: v >= 1, "periods >= 1"),
    _i("RECRAWL_PLAN_EVERY", 7, lambda v: v >= 1, "cycles >= 1"),
    _i("RECRAWL_BUCKETS", 64, lambda v: 1 <= v <= 256, "1 to 256 buckets"),
    # -- importance and sitemaps as evidence (docs/evidence.md)
    # None: on with RECRAWL_IMPORTANCE, `w` or its terminals
    Setting("RECRAWL_EVIDENCE", None, _optional(_bool), bool, None, "True, False or None"),
    # a callable's path: (request, response) -> weight > 0
    Setting(
        "RECRAWL_IMPORTANCE", None, _optional(_text), None, None, "a callable's dotted path or None"
    ),
    # checked announcements before a URL's own share decides
    _i("RECRAWL_SITEMAP_CHECKS", 3, lambda v: v >= 1, "a number >= 1"),
    # least confirmed share for a lastmod to make a URL due
    _n("RECRAWL_SITEMAP_TRUST", 0.5, lambda v: 0 <= v <= 1, "a share from 0 to 1"),
    # -- Redis (docs/distributed.md)
    Setting(
        "RECRAWL_REDIS_KEY", "%(spider)s:history", _text, str, None, "a key prefix"
    ),  # one per spider
    _i("RECRAWL_REDIS_LOG_MAXLEN", 10_000_000, lambda v: v >= 0, "entries >= 0 (0: no cap)"),
    # shards of a new Redis store (a store keeps its own)
    _i("RECRAWL_REDIS_SHARDS", 16, lambda v: 1 <= v <= 1024, "1 to 1024 shards"),
    Setting(
        "RECRAWL_REDIS_SCHEDULER_KEY", "%(spider)s:recrawl", _text, str, None, "a key template"
    ),
    _n("RECRAWL_REDIS_LOCK_SECONDS", 300.0, lambda v: v > 0, "seconds > 0"),
    _n("RECRAWL_REDIS_WORKER_TIMEOUT", 30.0, lambda v: v > 0, "seconds > 0"),
    _n("RECRAWL_REDIS_OUTAGE_SECONDS", 60.0, lambda v: v >= 0, "seconds >= 0"),
    # True: REDIS_URL / RECRAWL_STORE name a Redis Cluster node
    _b("RECRAWL_REDIS_CLUSTER", False),
    _b("RECRAWL_ALLOW_PICKLE", False),  # True: a pickling SCHEDULER_SERIALIZER (CWE-502 risk)
    # a shared store emptied or replaced mid-crawl: or "continue"
    Setting(
        "RECRAWL_ON_STORE_LOSS",
        "stop",
        _text,
        str,
        lambda v: v in ("stop", "continue"),
        "'stop' or 'continue'",
    ),
    # -- scoring
    # plug-ins (papers' policies and terminals), merged like DOWNLOADER_MIDDLEWARES
    Setting(
        "RECRAWL_PLUGINS_BASE",
        {
            "scrapy_recrawl.estimate.plugin.BasketsPlugin": 100,
            "scrapy_recrawl.content.plugin.ContentPlugin": 200,
            "scrapy_recrawl.planning.plugin.WebFountainPlugin": 300,
            "scrapy_recrawl.evidence.plugin.EvidencePlugin": 400,
        },
        _dict,
        None,
        None,
        "a dict {'path.Class': order} (JSON on the command line)",
    ),
    Setting(
        "RECRAWL_PLUGINS",
        {},
        _dict,
        None,
        None,
        "a dict {'path.Class': order} (JSON on the command line)",
    ),
    # measured best on average on the shared histories (docs/benchmarks.md)
    Setting(
        "RECRAWL_SCORER", "aad+", _text, str, None, "a preset name, an expression or a JSON path"
    ),
    Setting("RECRAWL_PRIOR", None, _optional(_numbers), None, None, "two numbers (a, b) or None"),
    _i("RECRAWL_SEED", 0),
    # -- the `nutch` preset (Nutch's AdaptiveFetchSchedule defaults, in cycles of one day)
    _n(
        "RECRAWL_NUTCH_INTERVAL", 30.0, lambda v: v > 0, "a number of cycles > 0"
    ),  # db.fetch.interval.default
    # db.fetch.schedule.adaptive.min_interval: 60 s
    _n("RECRAWL_NUTCH_MIN_INTERVAL", 1.0, lambda v: v > 0, "a number of cycles > 0"),
    # db.fetch.schedule.adaptive.max_interval: 1 year
    _n("RECRAWL_NUTCH_MAX_INTERVAL", 365.0, lambda v: v > 0, "a number of cycles > 0"),
    _n("RECRAWL_NUTCH_INC_RATE", 0.4, lambda v: 0 <= v <= 10, "a rate 0..10"),  # inc_rate
    _n("RECRAWL_NUTCH_DEC_RATE", 0.2, lambda v: 0 <= v < 1, "a rate 0 <= r < 1"),  # dec_rate
    # the `burst` terminal: how fast a change's aftershocks decay, in cycles
    _n("RECRAWL_BURST_TAU", 2.0, lambda v: v > 0, "a number of cycles > 0"),
)

#: Default of every setting (a view of :data:`SETTINGS`).
DEFAULTS: dict[str, Any] = {name: s.default for name, s in SETTINGS.items()}

#: How each setting's value is read when it is a string, with the words a refusal
#: uses (a view of :data:`SETTINGS`).
KINDS: dict[str, tuple[Callable[[Any], Any], str]] = {
    name: (s.read, s.expect) for name, s in SETTINGS.items()
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
    """Read ``name`` from Scrapy ``settings`` (or a dict), defaulting to its default.

    A string is first converted as the setting's declaration says (Scrapy's getters'
    rules), then the value must be of the declared type(s) and pass the declared check
    (:data:`SETTINGS`); a bad value raises :class:`RecrawlSettingError` naming the
    setting, the value and what a good value is. ``kind``, ``check`` and ``expect`` are
    for a setting this package does not declare (a plug-in's own).
    """
    declared = SETTINGS.get(name)
    if declared is not None:
        # the one declaration decides: a read site names the setting, nothing more
        kind, check, expect = declared.kind, declared.check, declared.expect
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
