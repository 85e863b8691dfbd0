"""Loop-time baskets (Meegahapola et al. 2018, paper 001): probe a new page, classify it.

A newly discovered page is fetched again at fixed offsets after its first
fetch (``RECRAWL_PROBE_OFFSETS``, the paper's 4, 6, 9, 14, 21, 32, 48 and 72
hours). At each probe the change detector's four counts (elements added,
removed, modified, attribute changes) are taken twice: against the *first*
version and against the *previous probe*. The 8 offsets x 2 references x 4
counts = 64 numbers are the page's features; a random forest maps them to one
of the loop-time baskets (``RECRAWL_BASKETS``, recrawl intervals, default 4 h,
12 h, 1 d, 3 d, 7 d). The ``due`` terminal then divides the time since a
page's last visit by its basket interval.

This module is pure (numpy, and scikit-learn imported lazily): features,
labels, the classifier, its (de)serialisation and the paper's error
distribution. Where probe state lives and how probes are scheduled is
:mod:`scrapy_recrawl.estimate.probes`.

**Labels.** A training page's true basket is the basket nearest (on a log
scale: intervals are ratios) to its mean change interval, estimated from a
longer visit history with Cho & Garcia-Molina's estimator (the paper's [16]):
``r = -log((n - X + 0.5)/(n + 0.5))`` changes per mean visit gap, interval =
gap / r; a page never seen changing gets the longest basket.

**Relevance split** (the paper's trees 6-9, optional): a second small forest
(4 regression trees) predicts the share of a page's changes that are
*relevant*; when it is below one half and the basket is not already the
longest, the page moves one basket longer (Algorithm 1, lines 12-16). Here a
change is relevant when it touches text (elements added, removed or
modified), not only attributes (a retargeted link, a changed class).
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..settings import RecrawlSettingError, get
from .forest import Forest

#: The paper's probing offsets, hours after the first fetch.
DEFAULT_OFFSETS: tuple[float, ...] = (4, 6, 9, 14, 21, 32, 48, 72)
#: The default loop-time baskets, recrawl intervals in hours (4 h, 12 h, 1 d, 3 d, 7 d).
DEFAULT_BASKETS: tuple[float, ...] = (4, 12, 24, 72, 168)
#: The change detector's counts recorded at each probe.
CHANGE_FIELDS: tuple[str, ...] = ("added", "removed", "modified", "attributes")
#: The two references a probe is compared with.
REFERENCES: tuple[str, ...] = ("first", "prev")
#: Feature value of a probe that was not taken (missed offset, error response).
MISSING = -1.0

#: The paper's E distribution (Fig. 5: 624 test pages).
PAPER_E = {"pages": 624, "0": 549, "+1": 45, "-1": 19, "larger": 11}

EXTRA_HINT = "pip install scrapy-recrawl[ml]"

#: Format of a saved model: 2, the trees as arrays in an ``.npz`` (estimate/forest.py);
#: 1 was a pickle, never read again.
MODEL_FORMAT = 2

#: What loading a format-1 (pickled) model says.
PICKLED_MODEL = (
    "is a basket model saved as a pickle by an earlier scrapy-recrawl; it is never "
    "unpickled (a pickle runs code when read): retrain it with `scrapy recrawl-baskets`"
)


class ModelFormatError(RecrawlSettingError):
    """Bytes that are not a basket model of this release; the message says what to do
    (a RecrawlSettingError: a crawl given such a model file stops at start-up)."""


class MissingExtraError(ImportError):
    """scikit-learn is needed and not installed; the message names the extra."""


def require_sklearn() -> Any:
    """Import scikit-learn's ensemble module, or fail naming the ``ml`` extra."""
    try:
        from sklearn import ensemble
    except ImportError as exc:
        raise MissingExtraError(
            "loop-time baskets need scikit-learn's RandomForestClassifier, which is not "
            f"installed: {EXTRA_HINT} (or pip install scikit-learn)"
        ) from exc
    return ensemble


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class BasketSettings:
    """The RECRAWL_* settings of probing and baskets (docs/settings.md)."""

    probe: bool | None  # None: on when the scorer uses the ``due`` terminal
    offsets: tuple[float, ...] = DEFAULT_OFFSETS
    baskets: tuple[float, ...] = DEFAULT_BASKETS
    probe_share: float = 0.25
    default_basket: float = 24.0
    model: str | None = None
    hour_seconds: float = 3600.0

    @classmethod
    def from_settings(cls, s: Any) -> BasketSettings:
        # -s RECRAWL_PROBE_OFFSETS=4,6,9 (or "[4, 6, 9]") is a list of numbers here
        probe = get(s, "RECRAWL_PROBE")
        offsets = get(s, "RECRAWL_PROBE_OFFSETS")  # increasing positive hours (settings.py)
        baskets = get(s, "RECRAWL_BASKETS")  # at least 2, increasing positive hours
        return cls(
            probe=probe,
            offsets=tuple(float(x) for x in offsets),
            baskets=tuple(float(x) for x in baskets),
            probe_share=float(get(s, "RECRAWL_PROBE_SHARE")),
            default_basket=float(get(s, "RECRAWL_BASKET_DEFAULT")),
            model=get(s, "RECRAWL_BASKET_MODEL"),
            hour_seconds=float(get(s, "RECRAWL_HOUR_SECONDS")),
        )


# --------------------------------------------------------------------------- features


def feature_names(offsets: Sequence[float] = DEFAULT_OFFSETS) -> list[str]:
    """``X4_first_added`` ... ``X72_prev_attributes``: 8 offsets x 2 references x 4 counts."""
    return [f"X{_fmt(o)}_{ref}_{c}" for o in offsets for ref in REFERENCES for c in CHANGE_FIELDS]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def empty_features(n_offsets: int) -> np.ndarray:
    """One page's feature row before any probe: every value missing."""
    return np.full(n_offsets * len(REFERENCES) * len(CHANGE_FIELDS), MISSING)


def set_probe(row: np.ndarray, index: int, vs_first: Sequence[int], vs_prev: Sequence[int]) -> None:
    """Write probe ``index``'s two sets of four counts into a feature row, in place."""
    k = len(CHANGE_FIELDS)
    base = index * len(REFERENCES) * k
    row[base : base + k] = vs_first
    row[base + k : base + 2 * k] = vs_prev


def due_index(elapsed_hours: float, offsets: Sequence[float], done: int) -> int | None:
    """The probe to take now: the latest offset reached, not yet taken (None: none due).

    A probe taken late (the crawler was busy or not running) is recorded at the
    latest offset it reached; the offsets it skipped stay missing.
    """
    reached = int(np.searchsorted(np.asarray(offsets, dtype=float), elapsed_hours, side="right"))
    return reached - 1 if reached > done else None


# --------------------------------------------------------------------------- labels


def mean_change_interval(gap_hours: float, n: int, X: int) -> float:
    """Mean change interval (hours) from ``n`` observations ``gap_hours`` apart on average,
    ``X`` of which saw a change (Cho & Garcia-Molina); ``inf`` if none did."""
    if n <= 0 or X <= 0:
        return math.inf
    rate = -math.log((n - X + 0.5) / (n + 0.5))  # changes per gap
    return gap_hours / rate


def nearest_basket(interval_hours: float | np.ndarray, baskets: Sequence[float]) -> np.ndarray:
    """Index of the basket nearest each interval on a log scale (``inf``: the longest)."""
    iv = np.atleast_1d(np.asarray(interval_hours, dtype=float))
    logs = np.log(np.asarray(baskets, dtype=float))
    with np.errstate(divide="ignore"):
        li = np.log(np.where(iv > 0, iv, np.nan))
    idx = np.abs(li[:, None] - logs[None, :]).argmin(axis=1)
    idx[np.isinf(li) & (li > 0)] = len(baskets) - 1
    idx[np.isnan(li)] = 0  # a zero interval: the shortest basket
    return idx.astype(np.int64)


def relevance_share(added: np.ndarray, removed: np.ndarray, modified: np.ndarray,
                    attributes: np.ndarray) -> float:  # fmt: skip
    """Share of changes that touch text (not attributes only); 1.0 when nothing changed."""
    text = (np.asarray(added) + np.asarray(removed) + np.asarray(modified)) > 0
    any_change = text | (np.asarray(attributes) > 0)
    return float(text.sum() / any_change.sum()) if any_change.any() else 1.0


# --------------------------------------------------------------------------- the model


@dataclass
class BasketModel:
    """A fitted random forest over probe features, with what it was fitted for."""

    offsets: tuple[float, ...]
    baskets: tuple[float, ...]
    forest: Forest
    relevance: Forest | None = None  # the relevance split's 4 regression trees, or None
    relevance_threshold: float = 0.5
    trained_on: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fit(
        cls,
        features: np.ndarray,
        labels: np.ndarray,
        *,
        offsets: Sequence[float] = DEFAULT_OFFSETS,
        baskets: Sequence[float] = DEFAULT_BASKETS,
        relevance: np.ndarray | None = None,
        trees: int = 100,
        seed: int = 0,
    ) -> BasketModel:
        """Fit the classifier (and, with ``relevance`` targets, the relevance split)."""
        ensemble = require_sklearn()
        features = np.asarray(features, dtype=float)
        labels = np.asarray(labels, dtype=np.int64)
        want = len(offsets) * len(REFERENCES) * len(CHANGE_FIELDS)
        if features.ndim != 2 or features.shape[1] != want:
            raise ValueError(
                f"expected features of shape (pages, {want}) for {len(offsets)} offsets, "
                f"got {features.shape}"
            )
        if len(features) == 0:
            raise ValueError("no training pages")
        forest = ensemble.RandomForestClassifier(
            n_estimators=trees, random_state=seed, n_jobs=1, class_weight=None
        )
        forest.fit(features, labels)
        rel = None
        if relevance is not None:
            rel = ensemble.RandomForestRegressor(n_estimators=4, random_state=seed, n_jobs=1)
            rel.fit(features, np.asarray(relevance, dtype=float))
        return cls(
            tuple(float(o) for o in offsets),
            tuple(float(b) for b in baskets),
            Forest.from_sklearn(forest),
            None if rel is None else Forest.from_sklearn(rel),
            trained_on=len(features),
        )

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Basket index per row (0 = the shortest interval)."""
        features = np.asarray(features, dtype=float)
        if len(features) == 0:
            return np.zeros(0, dtype=np.int64)
        pred = np.asarray(self.forest.predict(features), dtype=np.int64)
        if self.relevance is not None:
            # Algorithm 1: a page whose changes are mostly not relevant moves one basket on
            irrelevant = self.relevance.predict(features) < self.relevance_threshold
            last = len(self.baskets) - 1
            pred = np.where(irrelevant & (pred < last), pred + 1, pred)
        return pred

    def check_compatible(self, offsets: Sequence[float], baskets: Sequence[float]) -> None:
        if tuple(map(float, offsets)) != self.offsets or tuple(map(float, baskets)) != self.baskets:
            raise RecrawlSettingError(
                f"the basket model was trained for RECRAWL_PROBE_OFFSETS={list(self.offsets)} "
                f"and RECRAWL_BASKETS={list(self.baskets)}, but the crawl uses "
                f"{list(offsets)} and {list(baskets)}: retrain it (scrapy recrawl-baskets) "
                "or set them back"
            )

    # -- persistence: the trees as arrays in an .npz, no pickle (estimate/forest.py) --

    def to_bytes(self) -> bytes:
        header = {
            "format": MODEL_FORMAT,
            "offsets": list(self.offsets),
            "baskets": list(self.baskets),
            "trained_on": self.trained_on,
            "relevance_threshold": self.relevance_threshold,
            "info": self.info,
        }
        arrays = self.forest.arrays("forest_")
        if self.relevance is not None:
            arrays.update(self.relevance.arrays("relevance_"))
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        savez: Any = np.savez_compressed  # numpy's stub types **kwds as its allow_pickle
        savez(buf, **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "the data") -> BasketModel:
        """The model saved by :meth:`to_bytes`; :class:`ModelFormatError` naming ``where``
        for anything else, a pickled model of format 1 included (never unpickled)."""
        if not data.startswith(b"PK"):
            size = int.from_bytes(data[:4], "big")
            if data[4:5] == b"{" and b'"format": 1' in data[4 : 4 + size]:
                raise ModelFormatError(f"{where} {PICKLED_MODEL}")
            raise ModelFormatError(f"{where} is not a basket model (scrapy recrawl-baskets)")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                header = json.loads(bytes(npz["header"]))
                if not isinstance(header, dict) or header.get("format") != MODEL_FORMAT:
                    fmt = header.get("format") if isinstance(header, dict) else None
                    raise ModelFormatError(
                        f"{where}: basket model format {fmt} is not {MODEL_FORMAT}: retrain it "
                        "with `scrapy recrawl-baskets`"
                    )
                forest = Forest.from_arrays(npz, "forest_")
                rel = Forest.from_arrays(npz, "relevance_") if "relevance_roots" in npz else None
                return cls(
                    tuple(float(o) for o in header["offsets"]),
                    tuple(float(b) for b in header["baskets"]),
                    forest,
                    rel,
                    float(header.get("relevance_threshold", 0.5)),
                    int(header.get("trained_on", 0)),
                    dict(header.get("info", {})),
                )
        except ModelFormatError:
            raise
        except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise ModelFormatError(f"{where} is not a readable basket model: {exc}") from None

    def save(self, path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(self.to_bytes())

    @classmethod
    def load(cls, path: str, setting: str = "") -> BasketModel:
        """The model saved in the file ``path`` (``setting``: the setting that named it,
        for the message)."""
        with open(path, "rb") as fh:
            return cls.from_bytes(fh.read(), f"{setting}{' ' if setting else ''}{path}")


# --------------------------------------------------------------------------- evaluation


def error_distribution(predicted: np.ndarray, true: np.ndarray) -> dict[str, int]:
    """The paper's E = predicted - true basket: counts of 0, +1, -1 and |E| >= 2."""
    e = np.asarray(predicted, dtype=np.int64) - np.asarray(true, dtype=np.int64)
    return {
        "pages": int(e.size),
        "0": int((e == 0).sum()),
        "+1": int((e == 1).sum()),
        "-1": int((e == -1).sum()),
        "larger": int((np.abs(e) >= 2).sum()),
    }


def confusion_matrix(predicted: np.ndarray, true: np.ndarray, k: int) -> np.ndarray:
    """``m[true, predicted]`` page counts."""
    m = np.zeros((k, k), dtype=np.int64)
    np.add.at(m, (np.asarray(true, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return m


def basket_label(hours: float) -> str:
    if hours % 24 == 0:
        return f"{_fmt(hours / 24)} d"
    return f"{_fmt(hours)} h"


def split_train_test(
    n: int, test_share: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``n`` rows: (train indices, test indices)."""
    order = np.random.default_rng(seed).permutation(n)
    cut = n - int(round(n * test_share))
    return np.sort(order[:cut]), np.sort(order[cut:])
