"""The one budget rule: how many pages a cycle may fetch, and how they split.

The live schedulers and the offline replay both call :func:`budget_pages`, so
"5% of 50 pages" means the same number of pages in a crawl and in a replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """Pages one cycle may fetch, split between recrawls and never-fetched URLs.

    ``None`` means unlimited (a warm-up cycle fetches everything).
    """

    total: int | None
    new: int | None

    @property
    def recrawl(self) -> int | None:
        if self.total is None or self.new is None:
            return None
        return self.total - self.new


def budget_pages(budget: int | float, known: int) -> int:
    """Pages per cycle: an int is a page count; a float below 1 a share of ``known``.

    A share rounds up (5% of 50 pages is 3), so a small collection still gets
    its share; at least one page, else a fresh store with a share budget would
    fetch nothing for ever.
    """
    if isinstance(budget, float) and budget < 1:
        total = math.ceil(budget * known - 1e-9)  # 0.05 * 60 = 3.0000000000000004 is 3
    else:
        total = int(budget)
    return max(total, 1)


def cycle_budget(budget: int | float, new_share: float, known: int, *, warmup: bool) -> Budget:
    """RECRAWL_BUDGET (int pages, or float share of known URLs) and RECRAWL_NEW_SHARE."""
    if warmup:
        return Budget(None, None)
    total = budget_pages(budget, known)
    return Budget(total, int(round(total * new_share)))
