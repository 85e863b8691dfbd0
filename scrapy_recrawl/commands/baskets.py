"""``scrapy recrawl-baskets``: train the loop-time basket classifier (paper 001).

Inside a Scrapy project it reads the project's history store: the probe
features of every URL whose probes are finished, labelled with the basket
nearest to the mean change interval its longer visit history shows (Cho &
Garcia-Molina's estimate; only URLs with at least ``--min-observations``
observations over ``--min-span`` hours). Anywhere, ``--history FILE.npz``
reads arrays ``features`` (pages x 64) and ``basket`` (or ``interval_hours``),
with ``offsets`` and ``baskets`` (``bench/baskets.py --save-history`` writes one
from the example site).

It holds out ``--test-share`` of the pages, prints the confusion matrix and
the paper's error distribution E = predicted - true basket on them, then fits
the forest on every page and saves it: in the store (the crawl's
``RECRAWL_BASKET_MODEL = None`` reads it there) and/or to ``--output FILE``.
scikit-learn is needed: ``pip install scrapy-recrawl[ml]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np
from scrapy.exceptions import UsageError

from scrapy_recrawl.estimate.baskets import (
    CHANGE_FIELDS,
    PAPER_E,
    REFERENCES,
    BasketModel,
    BasketSettings,
    MissingExtraError,
    basket_label,
    confusion_matrix,
    error_distribution,
    mean_change_interval,
    nearest_basket,
    relevance_share,
    require_sklearn,
    split_train_test,
)
from scrapy_recrawl.learn.tables import markdown_table

from . import InputError, RecrawlCommand, check_output


def format_confusion(m: np.ndarray, baskets: Sequence[float]) -> str:
    """The confusion matrix as a Markdown table (rows: true basket, columns: predicted)."""
    names = [basket_label(b) for b in baskets]
    return markdown_table(
        ("true \\ predicted", *names),
        ((name, *(int(v) for v in row)) for name, row in zip(names, m, strict=True)),
        right=range(1, len(names) + 1),
    )


def format_errors(dist: dict[str, int], paper: dict[str, int] | None = PAPER_E) -> str:
    """A Markdown table of E beside the paper's."""
    rows = []
    for key, label in (("0", "0"), ("+1", "+1"), ("-1", "-1"), ("larger", "2 or more, either way")):
        row: list[object] = [label, dist[key], f"{dist[key] / max(1, dist['pages']):.2%}"]
        if paper:
            row += [paper[key], f"{paper[key] / paper['pages']:.2%}"]
        rows.append(row)
    headers = ("E", "pages", "share", *(("paper pages", "paper share") if paper else ()))
    return markdown_table(headers, rows, right=range(1, len(headers)))


def training_from_store(
    store: Any, cfg: BasketSettings, *, min_span_hours: float, min_observations: int
) -> dict[str, np.ndarray]:
    """Features and labels of the probed URLs whose longer history says their interval."""
    from scrapy_recrawl.estimate.probes import ProbeStore

    probes = ProbeStore(store)
    ids, feats = probes.features(done_only=True)
    if not len(ids):
        return {"features": np.zeros((0, 0)), "basket": np.zeros(0, dtype=np.int64), "ids": ids}
    log = store.visit_log(ids)
    keep, labels, rel = [], [], []
    for row, url_id in enumerate(ids.tolist()):
        mine = log["url_id"] == url_id
        good = mine & ((log["status"] // 100 == 2) | (log["status"] == 304))
        times = log["time"][good]
        observed = log["changed"][mine] >= 0
        n = int(observed.sum())
        if n < min_observations or len(times) < 2:
            continue
        span_h = (times.max() - times.min()) / cfg.hour_seconds
        if span_h < min_span_hours:
            continue
        changed = mine & (log["changed"] == 1)
        X = int(changed.sum())
        interval = mean_change_interval(span_h / n, n, X)
        keep.append(row)
        labels.append(int(nearest_basket(interval, cfg.baskets)[0]))
        rel.append(
            relevance_share(
                log["added"][changed],
                log["removed"][changed],
                log["modified"][changed],
                log["attributes"][changed],
            )
        )
    k = np.asarray(keep, dtype=np.int64)
    return {
        "features": feats[k] if len(k) else np.zeros((0, feats.shape[1])),
        "basket": np.asarray(labels, dtype=np.int64),
        "relevance": np.asarray(rel),
        "ids": ids[k] if len(k) else k,
    }


def training_from_file(path: str, cfg: BasketSettings) -> tuple[dict[str, np.ndarray], Any, Any]:
    """The training arrays of a ``.npz``, checked: shapes, finite numbers, labels."""
    from scrapy_recrawl.learn.histories import HistoryError, read_npz

    try:
        data = read_npz(path)
    except HistoryError as exc:
        raise InputError(str(exc)) from None
    if "features" not in data or not ({"basket", "interval_hours"} & set(data)):
        raise InputError(
            f"--history {path}: expected arrays 'features' and 'basket' (or 'interval_hours')"
        )
    offsets = _axis(data, "offsets", cfg.offsets, path)
    baskets = _axis(data, "baskets", cfg.baskets, path)
    feats = _numbers(data, "features", path)
    want = len(offsets) * len(REFERENCES) * len(CHANGE_FIELDS)
    if feats.ndim != 2 or feats.shape[1] != want:
        raise InputError(
            f"--history {path}: 'features' must be pages x {want} ({len(offsets)} offsets), "
            f"got shape {feats.shape}"
        )
    if "basket" in data:
        labels = _numbers(data, "basket", path)
        if labels.ndim != 1 or (labels != np.round(labels)).any():
            raise InputError(f"--history {path}: 'basket' must be a vector of basket indices")
        if len(labels) and not ((labels >= 0) & (labels < len(baskets))).all():
            raise InputError(
                f"--history {path}: 'basket' values must be 0..{len(baskets) - 1} "
                f"({len(baskets)} baskets)"
            )
        data["basket"] = labels.astype(np.int64)
    else:
        hours = _numbers(data, "interval_hours", path)
        if hours.ndim != 1 or (hours <= 0).any():
            raise InputError(f"--history {path}: 'interval_hours' must be a vector of hours > 0")
        data["basket"] = nearest_basket(hours, baskets)
    if len(data["basket"]) != len(feats):
        raise InputError(
            f"--history {path}: {len(feats)} rows of 'features' but {len(data['basket'])} labels"
        )
    if "relevance" in data:
        rel = _numbers(data, "relevance", path)
        if rel.shape != (len(feats),):
            raise InputError(f"--history {path}: 'relevance' must have one value per page")
    data["features"] = feats
    return data, offsets, baskets


def _numbers(data: dict[str, np.ndarray], name: str, path: str) -> np.ndarray:
    """The array ``name`` as finite floats, or the one-line reason it is not."""
    try:
        values = np.asarray(data[name], dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"--history {path}: '{name}' is not numeric") from None
    if not np.isfinite(values).all():
        raise InputError(f"--history {path}: '{name}' holds NaN or infinite values")
    return values


def _axis(
    data: dict[str, np.ndarray], name: str, default: tuple[float, ...], path: str
) -> tuple[float, ...]:
    if name not in data:
        return default
    values = _numbers(data, name, path)
    if values.ndim != 1 or not len(values) or (values <= 0).any() or (np.diff(values) <= 0).any():
        raise InputError(f"--history {path}: '{name}' must be increasing hours > 0")
    return tuple(float(x) for x in values)


class Command(RecrawlCommand):
    reads_history = True

    def short_desc(self) -> str:
        return "Train the loop-time basket classifier (random forest) from probe features"

    def long_desc(self) -> str:
        return __doc__ or ""

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--history", metavar="FILE.npz", help="train from this file")
        parser.add_argument("--output", "-o", metavar="FILE", help="also save the model here")
        parser.add_argument(
            "--no-save", action="store_true", help="do not save the model in the store"
        )
        parser.add_argument("--test-share", type=float, default=0.2)
        parser.add_argument("--trees", type=int, default=100)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--relevance", action="store_true", help="add the paper's relevance split"
        )
        parser.add_argument("--min-span", type=float, default=None, metavar="HOURS")
        parser.add_argument("--min-observations", type=int, default=5)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not 0 <= opts.test_share < 1:
            raise UsageError("--test-share must be in [0, 1)")
        try:
            require_sklearn()
        except MissingExtraError as exc:
            raise UsageError(str(exc)) from None
        settings = self.settings
        cfg = BasketSettings.from_settings(settings)
        if opts.output:  # checked before the training, not after it
            check_output(opts.output, "--output", inputs=(opts.history,))
        store = None
        if opts.history:
            data, offsets, baskets = training_from_file(opts.history, cfg)
        else:
            store = self._store(opts)
            min_span = 2 * cfg.baskets[-1] if opts.min_span is None else opts.min_span
            from scrapy_recrawl.history import HistoryStoreError

            try:
                data = training_from_store(
                    store, cfg, min_span_hours=min_span, min_observations=opts.min_observations
                )
            except (HistoryStoreError, ValueError) as exc:
                store.close()
                raise InputError(str(exc)) from None
            offsets, baskets = cfg.offsets, cfg.baskets
        try:
            self._train(data, offsets, baskets, opts, store)
        finally:
            if store is not None:
                store.close()

    def _store(self, opts: argparse.Namespace) -> Any:
        """The store to train from: read-only, unless the model is saved in it.

        Saving makes this command one of the store's writers, as a crawl is: it takes
        the store's lock (a running crawl refuses it, with its pid), and it never
        upgrades a store of an older schema (the next crawl does; or --no-save)."""
        from scrapy_recrawl.history import SCHEMA_VERSION
        from scrapy_recrawl.history.base import file_store

        store = self.open_history(opts)  # read-only: missing, foreign, newer: refused here
        if opts.no_save or not store.read_only:
            return store  # not saved in it
        file = file_store(store)
        older = file.file_schema_version if file is not None else None
        store.close()

        if older is not None and older < SCHEMA_VERSION:
            raise InputError(
                f"the history store {store.location} has schema version {older}: a crawl "
                f"upgrades it to {SCHEMA_VERSION}; this command does not. Crawl once, or "
                "pass --no-save (with --output FILE)"
            )
        return self.open_history(opts, read_only=False)

    def _train(
        self,
        data: dict[str, np.ndarray],
        offsets: tuple[float, ...],
        baskets: tuple[float, ...],
        opts: argparse.Namespace,
        store: Any,
    ) -> None:
        feats, labels = np.asarray(data["features"], dtype=float), data["basket"]
        if len(labels) < 2:
            source = opts.history or (store.location if store is not None else "the history")
            raise InputError(
                f"{source}: only {len(labels)} pages with finished probes and a long enough "
                "history (--min-span, --min-observations): crawl longer, or use --history"
            )
        rel = data.get("relevance") if opts.relevance else None
        if opts.relevance and rel is None:
            raise InputError("--relevance: the history has no 'relevance' array")
        counts = np.bincount(labels, minlength=len(baskets))
        print(f"{len(labels)} pages; true baskets " + ", ".join(map(str, counts.tolist())))
        if opts.test_share > 0:
            train, test = split_train_test(len(labels), opts.test_share, opts.seed)
            held = BasketModel.fit(
                feats[train],
                labels[train],
                offsets=offsets,
                baskets=baskets,
                relevance=None if rel is None else rel[train],
                trees=opts.trees,
                seed=opts.seed,
            )
            pred = held.predict(feats[test])
            print(f"\nconfusion matrix ({len(test)} held-out pages):\n")
            print(format_confusion(confusion_matrix(pred, labels[test], len(baskets)), baskets))
            print("\nE = predicted - true basket:\n")
            print(format_errors(error_distribution(pred, labels[test]), PAPER_E))
        model = BasketModel.fit(
            feats,
            labels,
            offsets=offsets,
            baskets=baskets,
            relevance=rel,
            trees=opts.trees,
            seed=opts.seed,
        )
        model.info = {"source": opts.history or (store.location if store is not None else "")}
        if opts.output:
            model.save(opts.output)
            print(f"\nmodel saved to {opts.output}")
        if store is not None and not opts.no_save:
            from scrapy_recrawl.estimate.probes import ProbeStore

            ProbeStore(store).save_model(model)
            print(f"\nmodel saved in the store {store.location}")
