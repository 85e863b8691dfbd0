"""Importance: a weight per URL, from the request's meta, a callable named in
``RECRAWL_IMPORTANCE`` or the spider, kept in side storage, handed out as a column.

Only weights other than 1.0 have a row (side table :data:`TABLE`, an 8-byte float
per URL id): a store of a million URLs that weighs a few pays for those few.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.meta import META_IMPORTANCE
from ..settings import RecrawlSettingError, get

logger = logging.getLogger(__name__)

#: the side table of the weights other than 1.0 (key: URL id; value: little-endian f8)
TABLE = "importance"
#: the column the plug-in hands to scoring (1.0 where no weight was given)
COLUMN = "importance"
#: the spider attribute: a number (every page's weight when nothing else gives one) or
#: a method called with (request, response)
SPIDER_ATTRIBUTE = "recrawl_importance"

_F8 = np.dtype("<f8")

Source = Callable[[Any, Any], Any]


def load_callable(settings: Any) -> Source | None:
    """The callable RECRAWL_IMPORTANCE names (None: unset); RecrawlSettingError naming the
    setting when it does not import or is not callable."""
    from scrapy.utils.misc import load_object

    path = get(settings, "RECRAWL_IMPORTANCE")
    if path is None:
        return None
    if not isinstance(path, str):
        if callable(path):
            return path  # type: ignore[no-any-return]
        raise RecrawlSettingError(f"RECRAWL_IMPORTANCE={path!r}: expected a dotted path")
    try:
        fn = load_object(path)
    except (ImportError, ValueError, NameError, AttributeError) as exc:
        raise RecrawlSettingError(f"RECRAWL_IMPORTANCE={path!r}: cannot import it: {exc}") from None
    if not callable(fn):
        raise RecrawlSettingError(f"RECRAWL_IMPORTANCE={path!r}: not a callable")
    return fn  # type: ignore[no-any-return]


def valid_weight(value: Any) -> float | None:
    """``value`` as a weight: a finite real number > 0, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    weight = float(value)
    return weight if math.isfinite(weight) and weight > 0 else None


def weight_of(
    request: Any, response: Any, spider: Any, fn: Source | None
) -> tuple[float | None, Any, str]:
    """The weight given for this fetch, first of: the request's meta, ``fn`` (the
    RECRAWL_IMPORTANCE callable), the spider's attribute. Returns ``(weight, raw,
    source)``: ``raw`` None when none gives one (the stored weight stays); weight None
    with a raw value is a bad value, which the caller warns about naming ``source``."""
    raw: Any = None
    source = ""
    if META_IMPORTANCE in request.meta:
        raw, source = request.meta[META_IMPORTANCE], f"meta[{META_IMPORTANCE!r}]"
    elif fn is not None:
        raw, source = fn(request, response), "RECRAWL_IMPORTANCE"
    elif spider is not None and (attr := getattr(spider, SPIDER_ATTRIBUTE, None)) is not None:
        raw = attr(request, response) if callable(attr) else attr
        source = f"the spider's {SPIDER_ATTRIBUTE}"
    if raw is None:
        return None, None, source
    return valid_weight(raw), raw, source


def pack(weight: float) -> bytes:
    return np.asarray(weight, dtype=_F8).tobytes()


def read_weights(store: Any) -> dict[int, float]:
    """Every stored weight (a value that is not 8 bytes or not a weight is skipped)."""
    out: dict[int, float] = {}
    for key, value in store.side_items(TABLE):
        if len(value) == _F8.itemsize:
            weight = valid_weight(float(np.frombuffer(value, dtype=_F8)[0]))
            if weight is not None:
                out[key] = weight
    return out


def column(ids: np.ndarray, weights: dict[int, float]) -> np.ndarray:
    """The weight of each of ``ids`` (ascending), 1.0 where none is stored."""
    out = np.ones(len(ids))
    if not weights or len(ids) == 0:
        return out
    keys = np.fromiter(weights.keys(), dtype=np.int64, count=len(weights))
    values = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
    pos = np.searchsorted(ids, keys)
    hit = pos < len(ids)
    hit[hit] = ids[pos[hit]] == keys[hit]
    out[pos[hit]] = values[hit]
    return out
