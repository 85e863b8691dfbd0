"""1D / 2D / 3D change prediction accuracy (the paper's Table 1), offline.

Follows Radinsky & Bennett 2013 sec. 5 and 8.1 on a fully observed history
``changes[page, day]`` (1 = a significant change that day), with the changes
below (scikit-learn's logistic regression stands in for their SVM; the
``ml`` extra):

* **Pages.** The paper's filter: a page is kept when its change behaviour
  flips on at least ``alpha`` of the days (``|{t: c(t) != c(t+1)}| >=
  alpha (T - 1)``, their alpha = 0.3). Experts are chosen among *all* pages.
* **Task.** At day ``t`` predict ``c(t + 1)`` (sigma = 1). Days before
  ``train_end`` (default: the first half) train, later days test. One model
  is fitted over all kept pages (pooled), not one per page and sliding
  window as in the paper: the shared histories have too few changes per page
  for per-page models.
* **Balance.** Models are fitted with balanced class weights and scored by
  *balanced accuracy* (mean of the accuracy on changes and on non-changes):
  the accuracy on a test set re-weighted to 50 % changes, so always
  predicting "no change" scores 50 %. Plain accuracy is reported too.
* **1D**: the change frequency over the last ``history`` days (n = 50).
* **2D**: 1D + the window of ``l`` days: ``C_i = c(t - i + 1)`` and ``D_i``,
  the change magnitude over the last ``i`` days: ``log1p`` of the summed
  ``magnitude`` (e.g. commits per day, or cosine distances) when given, else
  ``max(C_1 .. C_i)``.
* **3D (experts, Fig. 3)**: each page's ``k`` experts by lagged temporal
  cross-correlation on the training days (:class:`RelatedIndex`). One weak
  learner is trained on (expert's 2D features at ``t + 1 - d``, its weight,
  its lag) labelled with the *target's* ``c(t + 1)``; at test time the page's
  own 2D model (weight 1) and its experts (weight = correlation) vote, and
  the weighted majority wins.
* **3D (Q feature)**: 2D + the correlation-weighted share of experts that
  changed at their lag (the ``Q`` terminal), one logistic regression.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .related import DEFAULT_CANDIDATES, RelatedIndex

EXTRA_HINT = "pip install scrapy-recrawl[ml]"


def _linear_model() -> Any:
    try:
        from sklearn import linear_model
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 1D/2D/3D evaluation needs scikit-learn's LogisticRegression: "
            f"{EXTRA_HINT} (or pip install scikit-learn)"
        ) from exc
    return linear_model


@dataclass
class Accuracy:
    setting: str
    balanced: float
    accuracy: float


@dataclass
class Table1:
    name: str
    pages: int
    kept: int
    test_examples: int
    positive_share: float
    rows: list[Accuracy] = field(default_factory=list)


def _balanced(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    y = y.astype(bool)
    pred = pred.astype(bool)
    parts = [float((pred[y == v] == v).mean()) for v in (True, False) if (y == v).any()]
    return float(np.mean(parts)), float((pred == y).mean())


class _Features:
    """2D features of (page, day) pairs from cumulative sums."""

    def __init__(
        self, changes: np.ndarray, magnitude: np.ndarray | None, history: int, window: int
    ):
        self.c = changes.astype(np.float32)
        self.cs = np.concatenate([np.zeros((len(changes), 1)), np.cumsum(self.c, axis=1)], axis=1)
        self.ms = None
        if magnitude is not None:
            m = np.asarray(magnitude, dtype=np.float64)
            self.ms = np.concatenate([np.zeros((len(m), 1)), np.cumsum(m, axis=1)], axis=1)
        self.h, self.l = history, window

    def freq(self, p: np.ndarray, s: np.ndarray) -> np.ndarray:
        lo = np.maximum(s + 1 - self.h, 0)
        return (self.cs[p, s + 1] - self.cs[p, lo]) / (s + 1 - lo)

    def two_d(self, p: np.ndarray, s: np.ndarray) -> np.ndarray:
        cols = [self.freq(p, s)]
        cs = [self.c[p, np.maximum(s - i, 0)] for i in range(self.l)]
        cols += cs
        for i in range(1, self.l + 1):
            if self.ms is None:
                cols.append(np.max(np.stack(cs[:i]), axis=0))
            else:
                cols.append(np.log1p(self.ms[p, s + 1] - self.ms[p, np.maximum(s + 1 - i, 0)]))
        return np.stack(cols, axis=-1).astype(np.float32)


def table1(
    changes: np.ndarray,
    *,
    name: str = "",
    magnitude: np.ndarray | None = None,
    groups: Sequence[object] | np.ndarray | None = None,
    alpha: float = 0.3,
    history: int = 50,
    window: int = 3,
    experts: int = 20,
    max_lag: int = 3,
    max_candidates: int = DEFAULT_CANDIDATES,
    train_end: int | None = None,
    max_train_rows: int = 300_000,
    seed: int = 0,
) -> Table1:
    """Balanced accuracy of 1D, 2D and 3D prediction on ``changes[page, day]`` (module doc)."""
    lm = _linear_model()
    c = (np.asarray(changes) != 0).astype(np.int8)
    pages, days = c.shape
    train_end = days // 2 if train_end is None else train_end
    flips = (c[:, 1:] != c[:, :-1]).sum(axis=1)
    kept = np.flatnonzero(flips >= alpha * (days - 1))
    out = Table1(name, pages, int(kept.size), 0, float("nan"))
    if kept.size == 0:
        return out
    f = _Features(c, magnitude, history, window)
    rng = np.random.default_rng(seed)
    t_train = np.arange(history - 1, train_end - 1)  # label day t + 1 < train_end
    t_test = np.arange(max(train_end - 1, history - 1), days - 1)
    grid_p, grid_t = np.meshgrid(kept, t_train, indexing="ij")
    pt, tt = grid_p.ravel(), grid_t.ravel()
    if pt.size > max_train_rows:
        pick = np.sort(rng.choice(pt.size, max_train_rows, replace=False))
        pt, tt = pt[pick], tt[pick]
    grid_p, grid_t = np.meshgrid(kept, t_test, indexing="ij")
    pe, te = grid_p.ravel(), grid_t.ravel()
    y_tr, y_te = c[pt, tt + 1], c[pe, te + 1]
    out.test_examples, out.positive_share = int(y_te.size), float(y_te.mean())
    if len(np.unique(y_tr)) < 2:
        return out

    def fit(x: np.ndarray, y: np.ndarray) -> Any:
        return lm.LogisticRegression(class_weight="balanced", max_iter=1000).fit(x, y)

    x1_tr, x1_te = f.freq(pt, tt)[:, None], f.freq(pe, te)[:, None]
    m1 = fit(x1_tr, y_tr)
    out.rows.append(Accuracy("1D", *_balanced(y_te, m1.predict(x1_te))))
    x2_tr, x2_te = f.two_d(pt, tt), f.two_d(pe, te)
    m2 = fit(x2_tr, y_tr)
    out.rows.append(Accuracy("2D", *_balanced(y_te, m2.predict(x2_te))))

    # 3D: experts on the training days only
    index = RelatedIndex.build(
        c[:, :train_end], k=experts, max_lag=max_lag, groups=groups, max_candidates=max_candidates
    )

    def expert_x(p: np.ndarray, t: np.ndarray, slot: int) -> tuple[np.ndarray, np.ndarray]:
        e = index.ids[p, slot]
        has = e >= 0
        e = np.where(has, e, 0)
        d = index.lags[p, slot].astype(np.int64)
        s = t + 1 - d
        x = f.two_d(e, s)
        extra = np.stack([index.weights[p, slot], d.astype(np.float32)], axis=-1)
        return np.concatenate([x, extra], axis=-1), has

    xs, ys = [], []
    for slot in range(experts):
        x, has = expert_x(pt, tt, slot)
        xs.append(x[has])
        ys.append(y_tr[has])
    xe, ye = np.concatenate(xs), np.concatenate(ys)
    if xe.shape[0] > max_train_rows:
        pick = rng.choice(xe.shape[0], max_train_rows, replace=False)
        xe, ye = xe[pick], ye[pick]
    vote1 = m2.predict(x2_te).astype(np.float64)  # the page itself, weight 1
    vote0 = 1.0 - vote1
    if xe.shape[0] and len(np.unique(ye)) == 2:
        me = fit(xe, ye)
        for slot in range(experts):
            x, has = expert_x(pe, te, slot)
            w = np.where(has, index.weights[pe, slot], 0.0).astype(np.float64)
            v = me.predict(x).astype(np.float64)
            vote1 += w * v
            vote0 += w * (1.0 - v)
    out.rows.append(Accuracy("3D experts", *_balanced(y_te, vote1 > vote0)))

    def q_of(p: np.ndarray, t: np.ndarray) -> np.ndarray:
        num, den = np.zeros(p.size), np.zeros(p.size)
        for slot in range(experts):
            e = index.ids[p, slot]
            has = e >= 0
            w = np.where(has, index.weights[p, slot], 0.0)
            s = np.maximum(t + 1 - index.lags[p, slot].astype(np.int64), 0)
            num += w * c[np.where(has, e, 0), s]
            den += w
        return np.where(den > 0, num / np.maximum(den, 1e-12), 0.0)

    x3_tr = np.concatenate([x2_tr, q_of(pt, tt)[:, None]], axis=1)
    x3_te = np.concatenate([x2_te, q_of(pe, te)[:, None]], axis=1)
    m3 = fit(x3_tr, y_tr)
    out.rows.append(Accuracy("3D Q feature", *_balanced(y_te, m3.predict(x3_te))))
    return out


def site_groups(pages: Sequence[str]) -> np.ndarray:
    """Group of each page path: its folder (the shared histories' stand-in for a host)."""
    return np.array([p.rsplit("/", 1)[0] if "/" in p else "" for p in pages])
