"""Content-aware change prediction (paper 004): Table 1, replays, and the index's cost.

    .venv/bin/python bench/content.py table1      # 1D / 2D / 3D accuracy (scikit-learn)
    .venv/bin/python bench/content.py replay      # ChangeRate / freshness with the new terminals
    .venv/bin/python bench/content.py index       # related-page index at 100,000 URLs
    .venv/bin/python bench/content.py grow        # adding URLs to it: extend vs rebuild
    .venv/bin/python bench/content.py all

Data: ``../shared/data/changes/*.npz`` (no content: the change matrix is the
significant-change series, commits per day the magnitude, the file's folder
the "site") and the example site's content model
(``example_project/site.py``, 2,000 pages, seed 1, 120 simulated days: each
version's text gives bags of words, Eq. 1 decides significance, the cosine
distance is the magnitude). Every number is deterministic.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from scrapy_recrawl.change.bow import bag_from_text, chi2_test, cosine_distance  # noqa: E402
from scrapy_recrawl.content.evaluate import site_groups, table1  # noqa: E402
from scrapy_recrawl.content.related import RelatedIndex  # noqa: E402
from scrapy_recrawl.content.replay import simulate_content  # noqa: E402

DATA = os.path.join(ROOT, "..", "shared", "data", "changes")
DATASETS = (
    "ota_raw_snapshots",
    "ota_terms_versions",
    "scoop_extras",
    "fdroid_metadata",
    "tldr_pages_en",
    "php_doc_en",
)
PAPER = {"1D": 54.84, "2D": 62.93, "3D experts": 72.72}


def load(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.load(os.path.join(DATA, name + ".npz"), allow_pickle=False) as d:
        return d["changes"], d["commit_counts"], site_groups(list(d["pages"]))


def example_site(pages: int = 2000, days: int = 120, seed: int = 1, p: float = 0.05):
    """(significant, any change, cosine magnitude) matrices of the example site's truth pages."""
    sys.path.insert(0, ROOT)
    from example_project.site import SiteModel

    model = SiteModel(pages=pages, seed=seed)
    model.ensure_horizon(days)
    rows = [i for i in range(pages) if model.is_truth(i)]
    sig = np.zeros((len(rows), days), dtype=np.uint8)
    anyc = np.zeros_like(sig)
    mag = np.zeros((len(rows), days))
    for r, i in enumerate(rows):
        prev_v, prev_bag = 0, None
        for d in range(days):
            v = model.version(i, d)
            if prev_bag is None or v != prev_v:
                doc = model.doc(i, v)
                text = " ".join(
                    [doc.title, *doc.paragraphs, *doc.items, *(" ".join(x) for x in doc.rows)]
                )
                bag = bag_from_text(text)
                if prev_bag is not None:
                    anyc[r, d] = 1
                    sig[r, d] = chi2_test(prev_bag, bag)[1] < p
                    mag[r, d] = cosine_distance(prev_bag, bag)
                prev_v, prev_bag = v, bag
    return sig, anyc, mag


def cmd_table1() -> None:
    print("## 1D / 2D / 3D prediction accuracy (balanced accuracy %, plain accuracy in brackets)")
    print()
    print(
        "| data | alpha | pages kept / all | test examples | changes | 1D | 2D | 3D experts | 3D Q feature |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| paper (Table 1) | 0.3 | 54,816 | | | {PAPER['1D']} | {PAPER['2D']} | {PAPER['3D experts']} | |"
    )

    def row(name: str, alpha: float, t) -> None:
        cells = {r.setting: f"{100 * r.balanced:.2f} ({100 * r.accuracy:.2f})" for r in t.rows}
        share = "" if not t.test_examples else f"{100 * t.positive_share:.1f}%"
        print(
            f"| {name} | {alpha} | {t.kept} / {t.pages} | {t.test_examples} | {share} | "
            + " | ".join(cells.get(s, "-") for s in ("1D", "2D", "3D experts", "3D Q feature"))
            + " |"
        )

    for name in DATASETS:
        c, counts, groups = load(name)
        for alpha in (0.3, 0.05, 0.02):
            row(name, alpha, table1(c, name=name, magnitude=counts, groups=groups, alpha=alpha))
    t0 = time.perf_counter()
    sig, anyc, mag = example_site()
    took = time.perf_counter() - t0
    for alpha in (0.3, 0.05):
        row("example site (chi2)", alpha, table1(sig, magnitude=mag, alpha=alpha))
        # Eq. 1 finds no significant change there (below): any change, cosine magnitude
        row("example site (any change)", alpha, table1(anyc, magnitude=mag, alpha=alpha))
    print()
    print(
        f"Example site: {int(anyc.sum())} changes, {int(sig.sum())} significant by Eq. 1 "
        f"(p < 0.05), {100 * sig.sum() / max(1, anyc.sum()):.1f}%; content model "
        f"replayed in {took:.1f}s."
    )


SCORERS = {
    "aad+": "aad+",
    "cg+": "cg+",
    "gp4c": "gp4c",
    "window: 1-exp(-(AADp+0.1*C1)*t)": "1 - exp(-(AADp + 0.1*C1)*t)",
    "window: 1-exp(-AADp*(1+D3)*t)": "1 - exp(-AADp*(1 + D3)*t)",
    "experts": "experts",
    "Q only: 1-exp(-Q*t)": "1 - exp(-Q*t)",
}


def cmd_replay() -> None:
    print("## Replays: mean ChangeRate / freshness (k = 5%, warm-up 2, window 3, 20 experts)")
    print()
    print("| data | " + " | ".join(SCORERS) + " |")
    print("|---|" + "---|" * len(SCORERS))
    sig, anyc, _ = example_site()
    sets = [(n, *load(n)) for n in DATASETS] + [
        ("example site (chi2)", sig, None, None),
        ("example site (any change)", anyc, None, None),
    ]
    for name, c, _counts, groups in sets:
        cells = []
        for spec in SCORERS.values():
            r = simulate_content(c, spec, groups=groups)
            cells.append(f"{r.mean_change_rate:.3f} / {r.mean_freshness:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


def _index_series(pages: int) -> tuple[np.ndarray, np.ndarray]:
    """Real change series: every shared page, the last 60 days, tiled to ``pages`` with
    circular day shifts (deterministic) so the copies are not identical; 50 "hosts"."""
    series = np.concatenate([load(n)[0][:, -60:] for n in DATASETS])
    reps = -(-pages // len(series))
    tiles = [np.roll(series, s, axis=1) for s in range(reps)]
    s = np.concatenate(tiles)[:pages].astype(np.float32)
    # shuffle (fixed seed): the URLs discovered last are not all copies of one data set
    s = s[np.random.default_rng(0).permutation(pages)]
    return s, np.arange(pages) % 50


def _measured(fn):
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, took, peak


def cmd_index(pages: int = 100_000, candidates: int = 512, k: int = 20) -> None:
    print(f"## Related-page index at {pages:,} URLs (k = {k}, lags 1..3, 60 cycles)")
    print()
    s, groups = _index_series(pages)
    print(
        "| candidates per URL | build s | us / URL | index bytes / URL | peak MB | refresh 1% s |"
    )
    print("|---|---|---|---|---|---|")
    for m in (128, candidates, 2000):
        idx, took, peak = _measured(
            lambda m=m: RelatedIndex.build(s, k=k, max_lag=3, groups=groups, max_candidates=m)
        )
        t1 = time.perf_counter()
        idx.refresh(s, np.arange(0, pages, 100))
        ref = time.perf_counter() - t1
        print(
            f"| {m} | {took:.1f} | {1e6 * took / pages:.0f} | {idx.nbytes / pages:.0f} | "
            f"{peak / 2**20:.0f} | {ref:.2f} |"
        )


def cmd_grow(pages: int = 100_000, candidates: int = 512, k: int = 20) -> None:
    """New URLs: RelatedIndex.extend against a rebuild, at ``pages`` URLs after the growth."""
    print(
        f"## Adding URLs to the related-page index: extend vs rebuild, {pages:,} URLs after "
        f"(k = {k}, {candidates} candidates, lags 1..3, 60 cycles, 50 hosts)"
    )
    print()
    s, groups = _index_series(pages)
    print(
        "| new URLs | rebuild s | extend s | rebuild us / URL | extend us / new URL | "
        "old lists touched | rebuild peak MB | extend peak MB | peak bytes / URL (rebuild / "
        "extend) | speed-up | same lists |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    kw = dict(k=k, max_lag=3, max_candidates=candidates)
    full, t_full, p_full = _measured(lambda: RelatedIndex.build(s, groups=groups, **kw))
    for share in (0.001, 0.01, 0.05):
        m = int(pages * share)
        idx = RelatedIndex.build(s[:-m], groups=groups[:-m], **kw)
        touched, t_ext, p_ext = _measured(lambda idx=idx: idx.extend(s, groups))
        same = (
            np.array_equal(idx.ids, full.ids)
            and np.array_equal(idx.weights, full.weights)
            and np.array_equal(idx.lags, full.lags)
        )
        print(
            f"| {m:,} ({100 * share:g}%) | {t_full:.2f} | {t_ext:.2f} | "
            f"{1e6 * t_full / pages:.0f} | {1e6 * t_ext / m:.0f} | "
            f"{len(touched):,} ({100 * len(touched) / (pages - m):.1f}%) | "
            f"{p_full / 2**20:.0f} | {p_ext / 2**20:.0f} | "
            f"{p_full / pages:.0f} / {p_ext / pages:.0f} | {t_full / t_ext:.1f}x | "
            f"{'yes' if same else 'NO'} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("table1", "replay", "index", "grow", "all"))
    what = ap.parse_args().what
    steps = (
        ("table1", cmd_table1),
        ("replay", cmd_replay),
        ("index", cmd_index),
        ("grow", cmd_grow),
    )
    for name, fn in steps:
        if what in (name, "all"):
            fn()
            print()


if __name__ == "__main__":
    main()
