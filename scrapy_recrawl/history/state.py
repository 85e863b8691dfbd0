"""The O(1) per-URL change-estimator state, and the one rule that updates it.

Every visit after a URL's first is a *change observation* ``I_i`` (1 if the
page changed since the previous visit, else 0), ``i = 1..n``.  The scorers
need four estimators of the change rate over those observations (Tan &
Mitra; DESIGN.md); each is kept as a running number so no history has to be
re-read:

* NAD ``X / n``                     -> ``n`` and ``X``
* SAD the last indicator            -> ``sad``
* AAD ``sum(i I_i) / sum(i)``       -> ``aad_sum`` = ``sum(i I_i)``
* GAD ``sum(2^(i-1) I_i) / (2^n-1)`` -> ``gad`` itself, by the stable recursion
  ``gad_n = w_n I_n + (1 - w_n) gad_(n-1)`` with ``w_n = 1 / (2 - 2^(1-n))``,
  which never forms ``2^n`` (it would overflow a float at n = 1024).

The live store (one URL at a time, plain Python numbers) and the offline
simulator (numpy arrays over all pages) both call :func:`observe`, so the
crawl and its replay can never disagree on an estimator.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

T = TypeVar("T", int, float, np.ndarray)


def gad_weight(n: T) -> T:
    """Weight of the n-th observation in GAD's running mean (``n >= 1``), of a count
    array (the simulator) or one count (the store: :func:`observe_one`). ``2.0 ** k``
    is exact for the integer ``k`` here, in numpy and in Python alike (``exp2``'s
    doubles, bit for bit)."""
    return 1.0 / (2.0 - 2.0 ** (1.0 - n))  # type: ignore[return-value]


def observe(n: T, X: T, sad: T, aad_sum: T, gad: T, changed: T) -> tuple[T, T, T, T, T]:
    """Fold one change observation into the state; returns the new state.

    Works element-wise on numpy arrays (the simulator) and on plain numbers
    (the store: :func:`observe_one`). ``changed`` is 0/1 (or bool).
    """
    if np.ndim(n) == 0:
        # plain numbers in, plain numbers out (sqlite can't bind numpy types)
        return observe_one(n, X, sad, aad_sum, gad, changed)  # type: ignore[arg-type,return-value]
    ind = np.asarray(changed, dtype=np.float64)
    n1 = n + 1
    w = gad_weight(n1)
    new_gad = w * ind + (1.0 - w) * gad
    new = (n1, X + (ind > 0), ind, aad_sum + n1 * ind, new_gad)
    return (
        new[0],
        np.asarray(new[1], dtype=np.int64) if np.ndim(X) else new[1],
        new[2],
        new[3],
        new[4],
    )  # type: ignore[return-value]


def observe_one(
    n: int, X: int, sad: float, aad_sum: float, gad: float, changed: int
) -> tuple[int, int, float, float, float]:
    """:func:`observe` of one URL, in plain Python numbers: the array form's operations
    in the same order, so the same doubles, without numpy's cost per call on scalars
    (every observed visit; tests/test_history_sqlite.py holds the two equal)."""
    ind = 1.0 if changed else 0.0
    n1 = int(n) + 1
    w = gad_weight(n1)
    return (
        n1,
        int(X) + (ind > 0),
        ind,
        float(aad_sum) + n1 * ind,
        w * ind + (1.0 - w) * float(gad),
    )


# -- failed downloads: the consecutive-failure count (schema version 4) ------------
#
# A visit with no response at all (status 0: connection refused, DNS error,
# timeout, a download cancelled over DOWNLOAD_MAXSIZE, dropped below the recording
# middleware) is a *failed visit*. The count is of failed **cycles** in a row:
# Scrapy's RetryMiddleware may try a URL several times in one cycle, and those
# attempts are one failure; any visit that gets an answer resets it. The cycle core
# turns the count into a back-off (core/selection.py: backed_off) and the middleware
# marks the URL gone at RECRAWL_MAX_FAILURES. Redis's RECORD_LUA mirrors this rule.


def good_status(status: Any) -> Any:
    """Whether a visit of this status got the page (2xx) or was told it is the same
    (304): a visit of the URL, and maybe a change observation (RECORD_LUA: ``good``).
    ``status`` is one status or a numpy array of them (the visit log's column)."""
    return ((status >= 200) & (status < 300)) | (status == 304)


def gone_status(status: Any) -> Any:
    """Whether this status says the page is gone (404, 410): the middleware marks the
    URL gone. One status or a numpy array of them."""
    return (status == 404) | (status == 410)


def failed(status: int) -> bool:
    """Whether a visit of this status is a failed download (no response at all)."""
    return status == 0


def fold_failure(
    failures: int, last_failure_cycle: int, status: int, cycle: int
) -> tuple[int, int]:
    """The URL's ``(failures, last_failure_cycle)`` after a visit of ``status`` in ``cycle``."""
    if not failed(status):
        return 0, last_failure_cycle
    if last_failure_cycle == cycle and failures > 0:
        return failures, cycle  # another attempt of the same cycle: one failure
    return failures + 1, cycle


# -- the change window: a URL's last observations (schema version 7) ---------------
#
# The ``C1..C5`` terminals (content/window.py) read each URL's last five change
# observations. They are kept in the URL's record, one small int, so no visit log is
# read for them (and none is needed: a trimmed log loses nothing of them): the count
# (<= WINDOW_KEPT) times 32, plus the indicators, newest in bit 0. Redis's RECORD_LUA
# keeps its row's ``cwin`` byte by the same rule; records.window_from_bits decodes it.

#: observations a record's window keeps (content/window.py: WINDOW_MAX)
WINDOW_KEPT = 5


def push_window(cwin: int, changed: int) -> int:
    """The packed window ``cwin`` after one more observation (1 changed, 0 not)."""
    count = min((cwin >> 5) + 1, WINDOW_KEPT)
    bits = ((cwin & 31) << 1 | (1 if changed else 0)) & ((1 << WINDOW_KEPT) - 1)
    return count << 5 | bits


def fold_visit(rec: Any, visit: Any, cycle: int) -> bool:
    """Fold one ``visit`` (history.base.Visit) into ``rec`` (a UrlRecord), in place: the
    estimators, the change window, the validators, gone and the failure count. ``SqliteHistoryStore.record``
    folds with it, and the Redis store predicts with it the record a buffered visit will
    make (``RECORD_LUA`` is the same rule, server-side); the signature, request and body
    are the caller's. Returns whether the visit was a change observation."""
    rec.url = visit.url
    rec.visits += 1
    rec.status = visit.status
    good = good_status(visit.status)
    observed = bool(visit.changed is not None and good and rec.last_visit_cycle >= 0)
    if observed:
        # counts stay ints, the weighted sums floats
        rec.n, rec.X, rec.sad, rec.aad_sum, rec.gad = observe_one(
            rec.n, rec.X, rec.sad, rec.aad_sum, rec.gad, int(bool(visit.changed))
        )
        rec.D, rec.A, rec.R, rec.M = (
            float(visit.distance),
            float(visit.added),
            float(visit.removed),
            float(visit.modified),
        )
        rec.cwin = push_window(rec.cwin, int(bool(visit.changed)))
        if visit.changed:
            rec.last_change_cycle, rec.last_change_time = cycle, visit.time
    if good:
        rec.last_visit_cycle, rec.last_visit_time = cycle, visit.time
        rec.gone = False
        if visit.status == 304:
            rec.etag = visit.etag or rec.etag
            rec.last_modified = visit.last_modified or rec.last_modified
        else:
            rec.etag, rec.last_modified = visit.etag, visit.last_modified
    elif visit.gone:
        rec.gone = True
    rec.failures, rec.last_failure_cycle = fold_failure(
        rec.failures, rec.last_failure_cycle, visit.status, cycle
    )
    return observed
