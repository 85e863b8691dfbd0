"""The one budget rule: what a budget value means, how many pages a cycle may
fetch, and how they split.

``RECRAWL_BUDGET`` is a page count (an int: ``100``) or a share of the known URLs
(a percentage string: ``"5%"``); :func:`parse_budget` reads both, from settings
and from the command line alike. The live schedulers and the offline replay both
call :func:`budget_pages`, so "5% of 50 pages" means the same number of pages in
a crawl and in a replay.

``RECRAWL_ADAPTIVE_BUDGET`` (None: off) spends less on a quiet site: a cycle's
ranked recrawls stop where the expected changes of the rest of the list fall below
that number (:func:`adaptive_cut`, applied by both the crawl and the replay).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..scoring import compute_terminals
from ..scoring.terminals import DEFAULT_PRIOR, check_prior
from ..settings import RecrawlSettingError

Prior = tuple[float, float] | None


class Share(float):
    """A budget given as a share of the known URLs: ``"5%"`` is ``Share(0.05)``, 0 < share <= 1.

    A float, so arithmetic and JSON see the fraction; its own type, so ``Share(1.0)``
    ("100%") is never mistaken for one page.
    """

    def __repr__(self) -> str:
        return repr(f"{float(self) * 100:g}%")


def _refuse(name: str, value: Any, why: str) -> RecrawlSettingError:
    return RecrawlSettingError(f"{name}={value!r}: {why}")


def parse_budget(value: Any, name: str = "RECRAWL_BUDGET") -> tuple[int | Share, str | None]:
    """``(pages or Share, deprecation)`` of a budget value; a bad one raises
    :class:`RecrawlSettingError` naming ``name``.

    * an int (or a string of one) ``>= 1``: that many pages;
    * a percentage string, ``"5%"`` (``0 < p <= 100``): that share of the known URLs;
    * a float below 1 (or a string of one), the old spelling of a share: still a
      share, with a deprecation message to log (``deprecation``, else None);
    * a float from 1 up is refused: ``1.0`` meant one page to some and every page to others.
    """
    pages_or_share = (
        "expected a number of pages (an int, e.g. 100) or a share of the pages the "
        "store knows, as a percentage (e.g. '5%')"
    )
    if isinstance(value, Share):
        return value, None
    if isinstance(value, bool) or value is None:
        raise _refuse(name, value, pages_or_share)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%"):
            try:
                percent = float(text[:-1])
            except ValueError:
                raise _refuse(name, value, pages_or_share) from None
            if not 0 < percent <= 100:
                raise _refuse(name, value, "a share must be above 0% and at most 100%")
            return Share(percent / 100), None
        try:
            number: Any = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise _refuse(name, value, pages_or_share) from None
        try:
            return parse_budget(number, name)
        except RecrawlSettingError as exc:  # say it as the user wrote it: "1.0", not 1.0
            raise RecrawlSettingError(
                str(exc).replace(f"{name}={number!r}", f"{name}={value!r}", 1)
            ) from None
    if isinstance(value, numbers.Integral):
        if value < 1:
            raise _refuse(name, value, "expected at least 1 page (or a share such as '5%')")
        return int(value), None
    if isinstance(value, numbers.Real):
        share = float(value)
        if 0 < share < 1:
            as_percent = f"{share * 100:g}%"
            return Share(share), (
                f"{name}={value!r}: a float below 1 as a share is deprecated; "
                f"write {as_percent!r} (a share) or an int (pages)"
            )
        if share == 1:
            raise _refuse(
                name, value, "ambiguous; write 1 for one page or '100%' for every known URL"
            )
        if share > 1 and share.is_integer():
            raise _refuse(
                name, value, f"a float is ambiguous; write {int(share)} for {int(share)} pages"
            )
        raise _refuse(name, value, pages_or_share)
    raise _refuse(name, value, pages_or_share)


@dataclass(frozen=True)
class Budget:
    """Pages one cycle may fetch, split between recrawls and never-fetched URLs.

    ``total`` is what the frontier hands out against the cycle: the budget's
    :attr:`pages` (RECRAWL_BUDGET's, less an adaptive cut) and the monitoring sample
    (``monitor``), fetched on top of it; ``new`` is the new URLs' share of the pages
    (:func:`new_pages`). ``None`` means unlimited (a warm-up cycle fetches everything).
    """

    total: int | None
    new: int | None
    #: the monitoring sample (RECRAWL_MONITOR_SHARE): handed out on the recrawl side,
    #: on top of the budget's pages, never counted in them
    monitor: int = 0

    @property
    def recrawl(self) -> int | None:
        """The recrawl side's quota: the pages less the new share, plus the sample."""
        if self.total is None or self.new is None:
            return None
        return self.total - self.new

    @property
    def pages(self) -> int | None:
        """The budget's pages, as RECRAWL_BUDGET set them (after an adaptive cut): what
        recrawls, new URLs and probes may spend; None in a warm-up."""
        return None if self.total is None else self.total - self.monitor


def budget_pages(budget: int | float | str, known: int, maximum: int = 0) -> int:
    """Pages per cycle: a page count, or a share of ``known`` (:func:`parse_budget`).

    A share rounds up (5% of 50 pages is 3), so a small collection still gets
    its share; at least one page, else a fresh store with a share budget would
    fetch nothing for ever. A share gives at most ``maximum`` pages
    (RECRAWL_BUDGET_MAX; 0: no maximum), so a URL trap that grows the known URLs
    does not grow the budget with it.
    """
    value, _ = parse_budget(budget)
    if isinstance(value, Share):
        total = math.ceil(value * known - 1e-9)  # 0.05 * 60 = 3.0000000000000004 is 3
        if maximum > 0:
            total = min(total, maximum)
    else:
        total = value
    return max(total, 1)


def new_pages(total: int, new_share: float, backlog: int, max_share: float = 0.5) -> int:
    """The new URLs' share of a budget of ``total`` pages (RECRAWL_NEW_SHARE
    ``new_share``, RECRAWL_NEW_SHARE_MAX ``max_share``) when ``backlog`` never-fetched
    URLs wait from earlier cycles: the one rule, for the crawl and the replay.

    * ``new_share * total``, rounded;
    * while a backlog waits, **at least one page** (the share never rounds to zero:
      20% of 2 pages is 0, with a backlog 1), and it **grows** to the backlog plus
      that base (the backlog is fetched, oldest first, and this cycle's finds still get
      their base share), up to ``max_share * total`` pages (rounded down, at least the
      base): the recrawls keep the rest. At most ``max_share * total`` new pages
      appearing per cycle are then all fetched in the cycle they are found or the next;
    * ``new_share = 0``: none (new URLs only get what the recrawls leave).

    A share no backlog claims when the cycle opens is lent to the recrawls, and taken
    back by new URLs found during the cycle (core/cycle.py: plan_cycle, side_order).
    """
    if new_share <= 0 or total <= 0:
        return 0
    base = min(total, int(round(total * new_share)))
    if backlog <= 0:
        return base
    base = max(base, 1)
    cap = min(total, max(base, int(total * max_share + 1e-9)))
    return min(cap, base + backlog)


def cycle_budget(
    budget: int | float | str,
    new_share: float,
    known: int,
    *,
    warmup: bool,
    backlog: int = 0,
    max_share: float = 0.5,
    maximum: int = 0,
) -> Budget:
    """RECRAWL_BUDGET (pages, or a share of the known URLs, at most ``maximum`` pages:
    RECRAWL_BUDGET_MAX) and the new URLs' share of it (:func:`new_pages`:
    RECRAWL_NEW_SHARE, grown while ``backlog`` new URLs wait, up to
    RECRAWL_NEW_SHARE_MAX)."""
    if warmup:
        return Budget(None, None)
    total = budget_pages(budget, known, maximum)
    return Budget(total, new_pages(total, new_share, backlog, max_share))


# -- the adaptive budget (RECRAWL_ADAPTIVE_BUDGET) ----------------------------------


#: The adaptive budget's prior strength, in observations: RECRAWL_PRIOR's mean ``a/b``
#: counts as at most this many observations in a page's chance of change, so a page's
#: own evidence decides once it has a few (the prior (0.5, 100) at full strength made
#: a page that changed at each of 6 observations a 5% chance a cycle; here 57%).
CHANCE_PRIOR_STRENGTH = 1.0


def chance_prior(prior: Prior) -> tuple[float, float]:
    """The prior ``(a, b)`` of :func:`change_chance`: RECRAWL_PRIOR's mean ``a/b`` at a
    strength ``b`` of at most :data:`CHANCE_PRIOR_STRENGTH` observations."""
    a, b = DEFAULT_PRIOR if prior is None else check_prior(prior)
    strength = min(b, CHANCE_PRIOR_STRENGTH)
    return a / b * strength, strength


def change_chance(state: Mapping[str, np.ndarray], cycle: int, prior: Prior) -> np.ndarray:
    """Each URL's chance of a change since its last visit: ``1 - exp(-rate * t)`` over the
    cycles ``t`` since the visit, ``rate`` the AAD rate smoothed towards RECRAWL_PRIOR's
    mean at a bounded strength (:func:`chance_prior`): ``(m AAD + a') / (m + b')``, ``m``
    AAD's effective observations (the ``AADp`` terminal's form, with the prior
    ``(a', b')``). A page seen changing at each of its ``n >= 5`` observations gets a
    chance of at least 0.5 a cycle, one never seen changing ``(a/b) / (m + 1)`` a cycle.
    ``state`` holds the store's columns of those URLs only."""
    terms = compute_terminals(state, cycle, prior=chance_prior(prior), needed=("AADp", "t"))
    rate = terms["AADp"]
    rate *= terms["t"]
    np.negative(rate, out=rate)
    return np.negative(np.expm1(rate, out=rate), out=rate)


def adaptive_keep(chance: np.ndarray, threshold: float) -> int:
    """How many of a ranked list (``chance``: each pick's chance of a change, best pick
    first) to fetch: up to the first pick from which the expected changes of the rest
    of the list, ``sum(chance[j:])``, fall below ``threshold`` (all of it if never)."""
    rest = np.cumsum(chance[::-1])[::-1]  # rest[j] = sum(chance[j:]), non-increasing
    below = np.flatnonzero(rest < threshold)
    return int(below[0]) if below.size else int(chance.size)


def adaptive_cut(
    columns: Mapping[str, np.ndarray],
    rows: np.ndarray,
    cycle: int,
    prior: Prior,
    threshold: float,
) -> int:
    """Picks to keep of a cycle's ranked recrawls (``rows`` of ``columns``, best first)
    under RECRAWL_ADAPTIVE_BUDGET ``threshold``: the crawl (core/cycle.py) and the
    replay (core/simulate.py) both cut with this."""
    if rows.size == 0:
        return 0
    state = {name: columns[name][rows] for name in _CHANCE_COLUMNS}
    return adaptive_keep(change_chance(state, cycle, prior), threshold)


#: the columns change_chance() reads (AADp: n, aad_sum; t: last_visit_cycle)
_CHANCE_COLUMNS = ("n", "aad_sum", "last_visit_cycle")


def check_adaptive_budget(value: Any, name: str = "RECRAWL_ADAPTIVE_BUDGET") -> float | None:
    """None (off) or a number of expected changes > 0; anything else is refused."""
    if value is None:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or not float(value) > 0:
        raise _refuse(
            name,
            value,
            "expected None (off) or a number > 0 of expected changes below which a "
            "cycle's remaining recrawls are not fetched",
        )
    return float(value)
