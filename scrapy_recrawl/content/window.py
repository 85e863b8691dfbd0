"""2D features over a window of the last ``l`` visits (paper 004, sec. 4.2.1, features 3 and 5).

Per URL, newest first (``i = 1`` is the last visit):

* ``C_i``: the change indicator of the ``i``-th most recent change observation
  (1 changed, 0 not; NaN when the URL has fewer than ``i`` observations);
* ``D_i = ||A(t) - A(t - i)||``: cosine distance between the bag of words of
  the last version and the version ``i`` visits before it (NaN when unknown).

Where there is no content (the shared change matrices, a store without the
bag table) ``D_i`` degenerates to the change indicator over the same span:
``D_i = max(C_1 .. C_i)`` (did the page change between visit ``t - i`` and
``t``).

The window length ``l`` is ``RECRAWL_WINDOW`` (default 3, at most
:data:`WINDOW_MAX`); the terminals ``D1 .. D5`` and ``C1 .. C5`` exist for
every ``l``, those beyond ``l`` are NaN.
"""

from __future__ import annotations

import numpy as np

#: Largest RECRAWL_WINDOW: the terminals D1..D5 and C1..C5 are registered.
WINDOW_MAX = 5
DEFAULT_WINDOW = 3


def c_names(window: int = WINDOW_MAX) -> tuple[str, ...]:
    return tuple(f"C{i}" for i in range(1, window + 1))


def d_names(window: int = WINDOW_MAX) -> tuple[str, ...]:
    return tuple(f"D{i}" for i in range(1, window + 1))


def check_window(window: object) -> int:
    from ..settings import RecrawlSettingError

    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= WINDOW_MAX:
        raise RecrawlSettingError(
            f"RECRAWL_WINDOW={window!r}: expected an int from 1 to {WINDOW_MAX} (visits)"
        )
    return window


def empty_window(pages: int, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """``[pages, window]`` of NaN: no observation yet."""
    return np.full((pages, window), np.nan)


def push(win: np.ndarray, idx: np.ndarray | slice, values: np.ndarray) -> None:
    """Record one new observation for the rows ``idx`` (newest first, in place)."""
    win[idx, 1:] = win[idx, :-1]
    win[idx, 0] = values


def degenerate_d(c_window: np.ndarray) -> np.ndarray:
    """``D_i = max(C_1 .. C_i)`` (NaN once an indicator is missing): no content available."""
    out = np.maximum.accumulate(np.nan_to_num(c_window, nan=-1.0), axis=1)
    out[np.isnan(np.maximum.accumulate(c_window, axis=1))] = np.nan
    return out


def columns(c_window: np.ndarray, d_window: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The ``C*`` and ``D*`` state columns the terminals read (``D`` degenerate if no content)."""
    d = degenerate_d(c_window) if d_window is None else d_window
    out = {f"C{i + 1}": c_window[:, i] for i in range(c_window.shape[1])}
    out.update({f"D{i + 1}": d[:, i] for i in range(d.shape[1])})
    return out
