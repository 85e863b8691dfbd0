"""Content-aware change prediction (paper 004): chi-squared, bags, window, related pages."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.change import ChangeDetector
from scrapy_recrawl.change.bow import (
    Bag,
    bag_from_hashes,
    bag_from_text,
    chi2_test,
    cosine_distance,
    significant,
)
from scrapy_recrawl.content import window as win
from scrapy_recrawl.content.related import (
    RelatedIndex,
    best_lag_correlation,
    cross_correlation,
)
from scrapy_recrawl.content.replay import simulate_content
from scrapy_recrawl.content.store import BagStore, ContentColumns, ContentSettings
from scrapy_recrawl.core.simulate import simulate
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.records import window_from_log
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import PRESETS, Scorer, compute_terminals
from scrapy_recrawl.settings import RecrawlSettingError

from .extras import require_extra


def chi2_contingency(table: np.ndarray, **kwargs: object) -> tuple:
    """scipy's, the reference (the planning extra: the tests that use it are marked)."""
    from scipy.stats import chi2_contingency as reference

    return reference(table, **kwargs)


def _bag(counts: dict[int, int], total: int | None = None) -> Bag:
    terms = np.array(sorted(counts), dtype=np.uint32)
    c = np.array([counts[t] for t in sorted(counts)], dtype=np.uint32)
    return Bag(terms, c, int(c.sum()) if total is None else total)


# -- Eq. 1: chi-squared against scipy ------------------------------------------------------

CASES = [
    ({1: 10, 2: 20, 3: 30}, {1: 12, 2: 18, 3: 30}),
    ({1: 10, 2: 20, 3: 30}, {1: 30, 2: 20, 3: 10}),
    ({1: 5, 2: 5}, {1: 5, 3: 5}),
    ({1: 1, 2: 1, 3: 1}, {1: 1, 2: 1, 4: 1}),
    ({1: 100, 2: 3}, {1: 100, 2: 4}),
    ({7: 2, 8: 9, 9: 4, 10: 1}, {7: 3, 8: 1, 10: 6, 11: 2}),
]


@pytest.mark.planning
@pytest.mark.parametrize("a,b", CASES)
def test_chi2_matches_scipy(a, b):
    ba, bb = _bag(a), _bag(b)
    terms = sorted(set(a) | set(b))
    table = np.array([[a.get(t, 0) for t in terms], [b.get(t, 0) for t in terms]])
    stat, p, dof, _ = chi2_contingency(table, correction=False)
    got = chi2_test(ba, bb)
    assert got[0] == pytest.approx(stat)
    assert got[1] == pytest.approx(p)
    assert got[2] == dof
    assert significant(ba, bb, 0.05) == (p < 0.05)


@pytest.mark.planning
def test_chi2_random_small_tables_match_scipy():
    rng = np.random.default_rng(4)
    for _ in range(50):
        v = int(rng.integers(2, 8))
        table = rng.integers(0, 15, size=(2, v))
        table[:, 0] += 1  # no empty row
        keep = table.sum(axis=0) > 0
        a = {i: int(x) for i, x in enumerate(table[0]) if x}
        b = {i: int(x) for i, x in enumerate(table[1]) if x}
        stat, p, *_ = chi2_contingency(table[:, keep], correction=False)
        s, q, _ = chi2_test(_bag(a), _bag(b))
        assert s == pytest.approx(stat) and q == pytest.approx(p)


@pytest.mark.planning
def test_truncated_terms_go_to_other_column():
    # total 10 but kept counts sum to 8: 2 words in "other"
    a, b = _bag({1: 4, 2: 4}, total=10), _bag({1: 4, 2: 4}, total=10)
    assert a.other == 2
    stat, p, dof = chi2_test(a, b)
    assert stat == pytest.approx(0.0) and p == pytest.approx(1.0) and dof == 2
    p2 = chi2_contingency(np.array([[4, 4, 2], [40, 4, 2]]), correction=False)[1]
    assert chi2_test(a, _bag({1: 40, 2: 4}, total=46))[1] == pytest.approx(p2)


@pytest.mark.planning  # the chi-squared test is scipy's
def test_empty_bags():
    empty = _bag({})
    assert chi2_test(empty, empty)[1] == 1.0
    assert chi2_test(empty, _bag({1: 3}))[1] == 0.0
    assert cosine_distance(empty, empty) == 0.0
    assert cosine_distance(empty, _bag({1: 1})) == 1.0


def test_bag_is_bounded_deterministic_and_round_trips():
    words = np.array([5, 5, 5, 3, 3, 9, 9, 1, 2, 2], dtype=np.uint64)
    b = bag_from_hashes(words, max_terms=3)
    assert list(b.terms) == [2, 3, 5] and list(b.counts) == [2, 2, 3]  # 9 loses the tie to 2
    assert b.total == 10 and b.other == 3
    assert bag_from_hashes(words[::-1], max_terms=3) == b
    data = b.to_bytes()
    assert len(data) == 12 + 8 * 3
    assert Bag.from_bytes(data) == b
    with pytest.raises(ValueError):
        Bag.from_bytes(data[:-1])
    big = bag_from_text(" ".join(f"w{i}" for i in range(1000)), max_terms=256)
    assert len(big) == 256 and len(big.to_bytes()) == 12 + 8 * 256


def test_cosine_distance():
    a = _bag({1: 1, 2: 1})
    assert cosine_distance(a, a) == pytest.approx(0.0)
    assert cosine_distance(a, _bag({3: 4})) == pytest.approx(1.0)
    assert cosine_distance(a, _bag({1: 1})) == pytest.approx(1 - 1 / np.sqrt(2))


# -- the detector's optional chi-squared rule --------------------------------------------


def _page(paragraphs: list[str]) -> bytes:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return f"<html><body>{body}</body></html>".encode()


@pytest.mark.planning  # the chi-squared test is scipy's
def test_detector_chi2_is_off_by_default_and_decides_by_word_distribution():
    text = [" ".join(f"word{i % 40} other{i % 7}" for i in range(j, j + 30)) for j in range(20)]
    small = list(text)
    small[3] = small[3].replace("word5", "word6", 1)  # one word
    big = [" ".join(f"fresh{i % 50} news{i % 3}" for i in range(30)) for _ in range(20)]
    default = ChangeDetector()
    assert default.change_test == "simhash" and not default.keep_bags
    a = default.signature(_page(text), "http://x/", "text/html")
    assert a.bag is None
    assert default.compare(a, default.signature(_page(small), "http://x/", "text/html")).changed
    det = ChangeDetector(change_test="chi2", chi2_p=0.05)
    old = det.signature(_page(text), "http://x/", "text/html")
    assert old.bag is not None and old.bag.total > 0
    assert not det.compare(old, det.signature(_page(small), "http://x/", "text/html")).changed
    assert det.compare(old, det.signature(_page(big), "http://x/", "text/html")).changed
    # the bag is not part of the stored form: a reloaded signature has none, falls back
    reloaded = type(old).from_bytes(old.to_bytes())
    assert reloaded == old and reloaded.bag is None
    new = det.signature(_page(small), "http://x/", "text/html")
    assert det.compare(reloaded, new).changed  # no old bag: the default rule
    assert not det.compare(reloaded, new, old_bag=old.bag).changed


@pytest.mark.planning  # the chi-squared test is scipy's
def test_detector_settings_are_checked():
    with pytest.raises(RecrawlSettingError, match="RECRAWL_CHANGE_TEST"):
        ChangeDetector(change_test="md5")
    with pytest.raises(RecrawlSettingError, match="RECRAWL_CHI2_P"):
        ChangeDetector(change_test="chi2", chi2_p=1.5)
    det = ChangeDetector.from_settings({"RECRAWL_CHANGE_TEST": "chi2", "RECRAWL_BOW_TERMS": 16})
    assert det.change_test == "chi2" and det.bow_terms == 16


# -- cross-correlation and the related-pages index ----------------------------------------


def _xcorr_reference(a, b, d):
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = len(a)
    s = sum((a[i] - a.mean()) * (b[i - d] - b.mean()) for i in range(d, n))
    return s / (n * a.std() * b.std())


def test_cross_correlation_of_known_series():
    rng = np.random.default_rng(1)
    b = rng.integers(0, 2, 40).astype(float)
    a = np.roll(b, 2)  # a follows b two cycles later
    a[:2] = 0
    for d in range(0, 5):
        assert cross_correlation(a, b, d) == pytest.approx(_xcorr_reference(a, b, d))
    corr, lag = best_lag_correlation(a, b, 4)
    assert lag == 2 and corr == pytest.approx(_xcorr_reference(a, b, 2))
    assert corr > 0.9
    # identical series at lag 0: 1; a constant series correlates with nothing
    assert cross_correlation(b, b, 0) == pytest.approx(1.0)
    assert cross_correlation(np.ones(10), b[:10], 1) == 0.0
    # numpy's correlate on the standardized series gives the same numbers
    za, zb = (a - a.mean()) / a.std(), (b - b.mean()) / b.std()
    full = np.correlate(za, zb, mode="full") / len(a)
    assert cross_correlation(a, b, 3) == pytest.approx(full[len(a) - 1 + 3])


def test_index_selects_lagged_followers_deterministically():
    rng = np.random.default_rng(7)
    leader = rng.integers(0, 2, 60)
    series = [leader]
    for d in (1, 2, 3):
        f = np.roll(leader, d)
        f[:d] = 0
        series.append(f)  # pages 1..3 follow page 0 by d cycles
    series += [rng.integers(0, 2, 60) for _ in range(6)]
    s = np.array(series)
    idx = RelatedIndex.build(s, k=3, max_lag=3)
    # page 3 follows 0 by 3, 1 by 2, 2 by 1: those are its experts, with those lags
    row = {int(e): int(lag) for e, lag in zip(idx.ids[3], idx.lags[3], strict=True) if e >= 0}
    assert row == {0: 3, 1: 2, 2: 1}
    again = RelatedIndex.build(s, k=3, max_lag=3)
    np.testing.assert_array_equal(idx.ids, again.ids)
    np.testing.assert_array_equal(idx.weights, again.weights)
    # ties: identical candidates are ranked by id
    tie = np.array([leader, np.roll(leader, -1), np.roll(leader, -1), np.roll(leader, -1)])
    t = RelatedIndex.build(tie, k=2, max_lag=1)
    assert list(t.ids[0]) == [1, 2]
    # refreshing every row gives back the build; no page is its own expert
    idx.refresh(s, np.arange(len(s)))
    np.testing.assert_array_equal(idx.ids, again.ids)
    assert not (idx.ids == np.arange(len(s))[:, None]).any()


def test_index_windows_bound_candidates_and_groups():
    rng = np.random.default_rng(0)
    s = (rng.random((40, 30)) < rng.random((40, 1))).astype(np.uint8)
    groups = np.array(list("ab") * 20)
    m = 5
    idx = RelatedIndex.build(s, k=4, groups=groups, max_candidates=m)
    rate = s.mean(axis=1).astype(np.float32)
    for g in "ab":
        rows = np.flatnonzero(groups == g)
        order = rows[np.lexsort((rows, rate[rows]))]  # the group by rate, then id
        pos = {int(r): p for p, r in enumerate(order)}
        for r in rows:
            for e in idx.ids[r][idx.ids[r] >= 0]:
                assert groups[e] == g  # never across groups
                assert abs(pos[int(e)] - pos[int(r)]) < m  # inside the row's window of m
    assert (idx.ids >= 0).any()
    assert idx.nbytes == 40 * (4 * 9 + 8)
    # the old partition is still there for callers
    blocks = RelatedIndex.blocks(s, groups=groups, max_candidates=3)
    assert np.bincount(blocks).max() <= 3


def _grow_cases():
    rng = np.random.default_rng(11)
    for case in range(25):
        p = int(rng.integers(8, 300))
        n = int(rng.integers(6, 40))
        s = (rng.random((p, n)) < rng.random((p, 1))).astype(np.float32)
        if case % 3 == 0:
            s[rng.integers(0, p, p // 3)] = s[0]  # many exact ties
        if case % 4 == 1:
            s[: p // 2] = rng.random((p // 2, n))  # not only 0/1
        groups = None if case % 5 == 0 else rng.integers(0, int(rng.integers(1, 5)), p)
        yield s, groups, int(rng.integers(2, 60)), int(rng.integers(1, 10)), rng


def test_extend_equals_a_build_on_the_grown_series():
    for s, groups, m, k, rng in _grow_cases():
        p = len(s)
        kw = dict(k=k, max_lag=min(3, s.shape[1] - 1), max_candidates=m)
        full = RelatedIndex.build(s, groups=groups, **kw)
        start = int(rng.integers(1, p))
        g = None if groups is None else groups
        idx = RelatedIndex.build(s[:start], groups=None if g is None else g[:start], **kw)
        # N -> N + m in a few steps; groups of the new rows only, or of all rows
        for i, end in enumerate(sorted({*rng.integers(start, p + 1, 3).tolist(), p})):
            before = len(idx)
            if g is None:
                idx.extend(s[:end])
            else:
                idx.extend(s[:end], g[before:end] if i % 2 else g[:end])
        np.testing.assert_array_equal(idx.ids, full.ids)
        np.testing.assert_array_equal(idx.weights, full.weights)
        np.testing.assert_array_equal(idx.lags, full.lags)


def test_extend_touches_only_the_neighbourhood():
    rng = np.random.default_rng(5)
    s = (rng.random((2000, 40)) < rng.random((2000, 1))).astype(np.float32)
    groups = np.arange(2000) % 10
    idx = RelatedIndex.build(s[:1990], groups=groups[:1990], k=5, max_candidates=32)
    touched = idx.extend(s, groups)
    # ten new URLs, one per group of 200: each reaches one window of old rows (32, up to
    # 1.5 times that at the ends of a group), not the index
    assert 0 < len(touched) <= 10 * 48
    assert len(idx) == 2000 and (idx.ids[1990:] >= 0).any()
    with pytest.raises(ValueError, match="groups"):
        idx.extend(np.concatenate([s, s[:1]]))


def test_q_is_weighted_evidence_at_the_lag():
    idx = RelatedIndex(
        ids=np.array([[1, 2], [-1, -1], [-1, -1]], dtype=np.int32),
        weights=np.array([[0.75, 0.25], [0, 0], [0, 0]], dtype=np.float32),
        lags=np.array([[1, 2], [0, 0], [0, 0]], dtype=np.uint8),
        block=np.zeros(3, dtype=np.int32),
        max_lag=2,
    )
    obs = np.array([[0, 0, 0], [0, 0, 1], [0, 1, np.nan]], dtype=float)
    q = idx.q(obs)
    # page 1 seen changed in the last cycle (lag 1): 1; page 2 two cycles back: 1
    assert q[0] == pytest.approx(1.0)
    obs[2, 1] = 0
    assert idx.q(obs)[0] == pytest.approx(0.75)
    assert q[1] == 0.0  # no experts: no evidence


# -- window features, terminals, preset, replay -------------------------------------------


def test_window_push_and_degenerate_d():
    w = win.empty_window(2, 3)
    win.push(w, np.array([0]), np.array([1.0]))
    win.push(w, slice(None), np.array([0.0, 1.0]))
    np.testing.assert_array_equal(w[0], [0, 1, np.nan])
    np.testing.assert_array_equal(w[1], [1, np.nan, np.nan])
    d = win.degenerate_d(w)
    np.testing.assert_array_equal(d[0], [0, 1, np.nan])
    np.testing.assert_array_equal(d[1], [1, np.nan, np.nan])


def test_window_from_log_newest_first():
    url = np.array([5, 7, 5, 5, 7, 5])
    changed = np.array([-1, 1, 0, 1, -1, 1])  # -1: not an observation
    w = window_from_log(np.array([5, 7, 9]), url, changed, 3)
    np.testing.assert_array_equal(w[0], [1, 1, 0])
    np.testing.assert_array_equal(w[1], [1, np.nan, np.nan])
    assert np.isnan(w[2]).all()


def test_new_terminals_are_nan_without_their_columns():
    state = {k: np.zeros(3) for k in ("n", "X", "sad", "aad_sum", "gad", "last_visit_cycle")}
    state["last_visit_time"] = np.zeros(3)
    reg = default_registry()  # the content plug-in's terminals
    tm = compute_terminals(state, 5, needed={"D1", "C3", "Q"}, registry=reg)
    assert all(np.isnan(tm[k]).all() for k in ("D1", "C3", "Q"))
    state["Q"] = np.array([0.1, 0.2, 0.3])
    got = compute_terminals(state, 5, needed={"Q"}, registry=reg)["Q"]
    np.testing.assert_allclose(got, state["Q"])


def test_experts_preset_uses_q():
    s = Scorer.from_spec("experts", registry=default_registry())
    assert "Q" in s.terminals_needed and PRESETS["experts"].expression


def test_content_replay_equals_simulate_without_new_terminals():
    c = (np.random.default_rng(3).random((200, 40)) < 0.15).astype(np.uint8)
    for p in ("aad+", "gp4c"):
        a, b = simulate(c, p), simulate_content(c, p)
        np.testing.assert_array_equal(a.change_rate, b.change_rate)
        np.testing.assert_array_equal(a.freshness, b.freshness)
    r = simulate_content(c, "experts", experts=5, max_candidates=50)
    assert r.change_rate.shape == (38,)


def test_table1_experts_find_followers():
    # followers change one day after their leader: only the 3D settings can see it coming
    require_extra("ml")
    from scrapy_recrawl.content.evaluate import table1

    rng = np.random.default_rng(5)
    leaders = (rng.random((20, 200)) < 0.4).astype(np.uint8)
    followers = np.roll(leaders, 1, axis=1)
    followers[:, 0] = 0
    noise = (rng.random((40, 200)) < 0.4).astype(np.uint8)
    t = table1(np.concatenate([leaders, followers, noise]), experts=3, max_lag=2)
    acc = {r.setting: r.balanced for r in t.rows}
    assert set(acc) == {"1D", "2D", "3D experts", "3D Q feature"}
    assert acc["3D Q feature"] > acc["2D"] + 0.1
    assert acc["3D experts"] > acc["2D"]
    again = table1(np.concatenate([leaders, followers, noise]), experts=3, max_lag=2)
    assert [r.balanced for r in again.rows] == [r.balanced for r in t.rows]  # deterministic


# -- live state beside the SQLite store ---------------------------------------------------


def test_bag_store_and_columns(tmp_path):
    with SqliteHistoryStore(tmp_path / "h.sqlite3") as store:
        bags = BagStore(store, keep=3, window=3)
        a, b = _bag({1: 2, 2: 2}), _bag({1: 2, 3: 2})
        assert bags.bags(0) == []
        d = bags.update(0, a)
        assert np.isnan(d).all()
        d = bags.update(0, b)
        assert d[0] == pytest.approx(0.5) and np.isnan(d[1])
        bags.update(0, b)
        assert bags.bags(0) == [b, b, a]
        bags.update(0, a)
        assert len(bags.bags(0)) == 3  # bounded by keep
        # a store with two URLs and a few observed cycles
        for cyc in range(4):
            for i, fp in enumerate((b"u0", b"u1")):
                store.record(
                    Visit(
                        fp,
                        f"http://h/{i}",
                        float(cyc),
                        200,
                        changed=None if cyc == 0 else bool(cyc % 2),
                        cycle=cyc,
                    )
                )
            store.advance_cycle()
        arrays = store.arrays()
        cols = ContentColumns(store, ContentSettings(experts=1, history=8), {"C1", "C2", "Q"})
        out = cols.columns(arrays)
        np.testing.assert_array_equal(out["C1"], [1, 1])  # cycle 3: changed
        np.testing.assert_array_equal(out["C2"], [0, 0])
        assert out["Q"].shape == (2,)
        # the observations of the last cycles are read back (1 changed, 0 not, NaN unseen)
        obs = cols.observations(np.sort(arrays.ids), arrays.cycle)
        np.testing.assert_array_equal(obs[:, -4:], [[np.nan, 1, 0, 1]] * 2)
        assert np.isnan(obs[:, :-4]).all()
