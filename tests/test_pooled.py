"""The pooled priors (scoring/pooled.py) and their group column (core/groups.py):
the terminals against small groups worked out by hand, the column in both stores
(SQLite, a real Redis) and in the replay of a shared history."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scrapy_recrawl.core.cycle import CycleConfig, plan_cycle
from scrapy_recrawl.core.groups import (
    GROUP_COLUMN,
    GroupIndex,
    group_codes,
    group_key,
    history_groups,
)
from scrapy_recrawl.core.simulate import load_changes, load_groups, simulate
from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.redis import RedisHistoryStore
from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import Scorer, compute_terminals
from scrapy_recrawl.scoring.pooled import POOLED_NAMES, prior_mean, prior_strength

from .helpers import history_arrays

PRIOR = (1.0, 10.0)
POOLED = ["Gm", "Gb", "NADh", "AADh", "CGh"]

# three URLs of group 0 (2, 0 and 4 changes in 4 observations), one alone in group 1
X = np.array([2, 0, 4, 1])
N = np.array([4, 4, 4, 2])
GROUP = np.array([0, 0, 0, 1])


def _state(group=GROUP):
    arrays = history_arrays(N, X, last=[5, 5, 5, 5], cycle=8)
    cols = dict(arrays.columns)
    cols["aad_sum"] = np.array([7.0, 0.0, 10.0, 2.0])  # sum(i * I_i): I = 0011, 0000, 1111, 01
    if group is not None:
        cols[GROUP_COLUMN] = group
    return cols


def test_the_prior_mean_is_the_other_urls_rates_shrunk_to_all_urls_mean():
    nadp = [3 / 14, 1 / 14, 5 / 14, 2 / 12]  # (X + 1)/(n + 10)
    everyone = sum(nadp) / 4
    expected = [
        (nadp[1] + nadp[2] + 10 * everyone) / (2 + 10),
        (nadp[0] + nadp[2] + 10 * everyone) / (2 + 10),
        (nadp[0] + nadp[1] + 10 * everyone) / (2 + 10),
        everyone,  # a group of one: nothing but all URLs' mean
    ]
    got = compute_terminals(_state(), 8, prior=PRIOR, needed=["Gm"])["Gm"]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_the_strength_is_the_method_of_moments_blended_with_all_groups():
    # group 0: rate 6/12 = 0.5, V = 0 + 1 + 1 = 2, K = 3: rho = (2 - 0.75)/(0.25 * 9)
    # group 1: rate 1/2, V = 0, K = 1: rho = (0 - 0.25)/(0.25 * 1) = -1
    # all groups: rho = (2 - 1)/(2.25 + 0.25) = 0.4; a group weighs K/(K + 10)
    rho0 = 3 / 13 * (1.25 / 2.25) + 10 / 13 * 0.4
    rho1 = 1 / 11 * -1.0 + 10 / 11 * 0.4
    b0, b1 = 1 / rho0 - 1, 1 / rho1 - 1
    got = compute_terminals(_state(), 8, prior=PRIOR, needed=["Gb"])["Gb"]
    np.testing.assert_allclose(got, [b0, b0, b0, b1], rtol=1e-12)


def test_the_estimators_take_the_groups_prior():
    t = compute_terminals(_state(), 8, prior=PRIOR, needed=["Gm", "Gb", "NADh", "AADh", "CGh"])
    gm, gb = t["Gm"], t["Gb"]
    np.testing.assert_allclose(t["NADh"], (X + gb * gm) / (N + gb), rtol=1e-12)
    aad = np.array([7 / 10, 0.0, 1.0, 2 / 3])
    m = 3 * N * (N + 1) / (2 * (2 * N + 1))  # AAD's effective observations
    np.testing.assert_allclose(t["AADh"], (m * aad + gb * gm) / (m + gb), rtol=1e-12)
    np.testing.assert_allclose(t["CGh"], -np.log(1 - t["NADh"]), rtol=1e-12)


def test_a_urls_own_evidence_is_never_its_prior():
    before = compute_terminals(_state(), 8, prior=PRIOR, needed=["Gm"])["Gm"]
    state = _state()
    state["X"] = np.array([0, 0, 4, 1])  # URL 0 saw no change instead of 2
    after = compute_terminals(state, 8, prior=PRIOR, needed=["Gm"])["Gm"]
    assert after[0] == pytest.approx(before[0] - (2 / 14) * 10 / 4 / 12)  # only all URLs' mean
    assert after[1] < before[1] and after[2] < before[2]  # its group mates' prior fell


def test_no_group_column_is_one_group_and_codes_need_not_be_dense():
    one = compute_terminals(_state(None), 8, prior=PRIOR, needed=POOLED)
    zeros = compute_terminals(_state(np.zeros(4, dtype=np.int64)), 8, prior=PRIOR, needed=POOLED)
    for name in POOLED:
        np.testing.assert_array_equal(one[name], zeros[name])
    dense = compute_terminals(_state(), 8, prior=PRIOR, needed=POOLED)
    sparse = compute_terminals(_state(GROUP * 10**12 - 7), 8, prior=PRIOR, needed=POOLED)
    for name in POOLED:
        np.testing.assert_allclose(dense[name], sparse[name], rtol=1e-12)


def test_the_functions_match_the_terminals_and_stay_finite_without_observations():
    zero = np.zeros(5)
    group = np.array([0, 0, 1, 1, 1])
    np.testing.assert_allclose(prior_mean(zero, zero, group, 2, 0.5, 100.0), 0.005)
    np.testing.assert_allclose(prior_strength(zero, zero, group, 2, 100.0), 100.0)


def test_the_presets_against_the_hand_computed_terminals():
    state = _state()
    t = compute_terminals(state, 8, prior=PRIOR, needed=["NADh", "AADh"])
    for preset, rate in (("aad+h", t["AADh"]), ("nad+h", t["NADh"])):
        scorer = Scorer.from_spec(preset, prior=PRIOR)
        got = scorer.score(scorer.terminals(state, 8))
        np.testing.assert_allclose(got, 1 - np.exp(-rate * 3), rtol=1e-12)  # t = 8 - 5


def test_a_pooled_scorer_is_scored_as_one_vector(monkeypatch):
    from scrapy_recrawl.core import selection

    scorer = Scorer.from_spec("aad+h", prior=PRIOR)
    assert not selection._blockwise(scorer)  # a group's sums need all its URLs
    cols = {k: np.tile(v, 5000) for k, v in _state().items()}  # 20,000 URLs, 2 groups
    monkeypatch.setattr(selection, "SCORE_BLOCK", 1000)
    rows = np.arange(20_000)
    got = selection._score(scorer, cols, rows, 20_000, 8, 0.0)
    np.testing.assert_array_equal(got, scorer.score(scorer.terminals(cols, 8)))


def test_registered_with_the_core_and_usable_as_presets():
    registry = default_registry()
    assert POOLED_NAMES <= registry.names()
    assert POOLED_NAMES <= registry.prior_names()
    scorer = Scorer.from_spec("aad+h", prior=PRIOR)
    assert scorer.terminals_needed == {"AADh", "t"}
    expr = Scorer.from_spec("1 - exp(-AADh*t)", prior=PRIOR)
    state = _state()
    np.testing.assert_array_equal(
        scorer.score(scorer.terminals(state, 8)), expr.score(expr.terminals(state, 8))
    )


# -- the group column ------------------------------------------------------------------


def test_one_definition_of_a_group_per_kind_of_key():
    assert group_key("https://Docs.Example.org:8080/a/b?q=1") == "docs.example.org"
    assert group_key("OpenTermsArchive/contrib-versions/ASKfm/Privacy Policy.md") == (
        "OpenTermsArchive/contrib-versions/ASKfm"
    )
    assert group_key("README.md") == ""
    codes = group_codes(["http://a/x", "pages/b.md", "http://a/y", "pages/c.md", "http://b/"])
    assert codes.tolist() == [0, 1, 0, 1, 2]
    assert history_groups(None, 3).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="2 page names for 3 pages"):
        history_groups(["a", "b"], 3)


SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "changes"


@pytest.mark.skipif(not (SHARED / "ota_terms_versions.npz").exists(), reason="no shared data")
def test_the_replay_groups_a_shared_history_by_directory():
    path = SHARED / "ota_terms_versions.npz"
    with np.load(path, allow_pickle=False) as data:
        names = [str(p) for p in data["pages"]]
    groups = load_groups(str(path))
    dirs = [n.rpartition("/")[0] for n in names]
    assert len(groups) == len(names) and groups.max() + 1 == len(set(dirs))
    for i in (0, 1, 2, 3, 100):  # same code exactly when same directory
        same = groups == groups[i]
        assert same.tolist() == [d == dirs[i] for d in dirs]
    changes = load_changes(str(path))[:, :60]
    pooled = simulate(changes, "aad+h", groups=groups)
    assert np.array_equal(pooled.state[GROUP_COLUMN], groups)
    alone = simulate(changes, "aad+h")  # one group: another prior, other picks
    assert pooled.changed_fetched.tolist() != alone.changed_fetched.tolist()
    with pytest.raises(ValueError, match="one code per page"):
        simulate(changes, "aad+h", groups=groups[:-1])


def test_a_learners_history_has_the_same_column(tmp_path):
    from scrapy_recrawl.learn.histories import History, load

    csv = tmp_path / "h.csv"
    rows = ["url,cycle,changed"]
    for url in ("http://a.example/1", "http://b.example/1", "http://a.example/2"):
        rows += [f"{url},{c},{int(c == 2)}" for c in (1, 2, 3)]
    csv.write_text("\n".join(rows) + "\n")
    history = load(str(csv))
    hosts = [u.split("/")[2] for u in history.names]
    assert history.groups.tolist() == group_codes(history.names).tolist()
    assert (history.groups[0] == history.groups[1]) == (hosts[0] == hosts[1])
    assert len(set(history.groups.tolist())) == 2
    bare = History(np.zeros((3, 4), dtype=np.uint8), source="matrix")
    assert bare.groups.tolist() == [0, 0, 0]


def _sqlite(tmp_path, request):
    store = SqliteHistoryStore(tmp_path / "history.sqlite3")
    store.open()
    return store


def _redis(tmp_path, request):
    server = request.getfixturevalue("redis_db")
    store = RedisHistoryStore(server.url)  # sharded: ids are not 1, 2, 3 ...
    store.open()
    return store


def _fp(i: int) -> bytes:
    return i.to_bytes(20, "big")


@pytest.mark.parametrize("make", [_sqlite, _redis], ids=["sqlite", "redis"])
def test_the_crawl_groups_urls_by_host_reading_only_new_urls(make, tmp_path, request):
    store = make(tmp_path, request)
    try:
        hosts = ["a.example", "b.example", "a.example", "c.example", "b.example", "a.example"]
        urls = [f"http://{h}/p{i}" for i, h in enumerate(hosts)]
        for cyc in range(3):  # three fetches: two observations each, URL 0 changing
            for i, url in enumerate(urls):
                store.record(Visit(_fp(i), url, float(cyc), 200, changed=(i == 0 and cyc > 0)))
            store.flush()
            store.advance_cycle()
        scorer = Scorer.from_spec("aad+h")
        config = CycleConfig(budget=2, warmup_cycles=0, new_share=0.0)
        index = GroupIndex()
        arrays = store.arrays()
        plan = plan_cycle(arrays, config, scorer, pending_new=0, urls_of=store.urls, groups=index)
        group = arrays.columns[GROUP_COLUMN]
        by_id = dict(zip(store.urls(arrays.ids), group.tolist(), strict=True))
        for u in urls:
            for v in urls:
                assert (by_id[u] == by_id[v]) == (u.split("/")[2] == v.split("/")[2])
        assert index.urls_read == len(urls)
        # URL 0's host mates inherit some of its changes: a.example's URLs rank first
        first = store.urls(plan.selection.ids)
        assert [u.split("/")[2] for u in first] == ["a.example", "a.example"]

        store.record(Visit(_fp(10), "http://d.example/new", 9.0, 200))
        store.record(Visit(_fp(11), "http://a.example/new", 9.0, 200))
        store.flush()
        store.advance_cycle()
        arrays = store.arrays()
        plan_cycle(arrays, config, scorer, pending_new=0, urls_of=store.urls, groups=index)
        assert index.urls_read == len(urls) + 2  # the two new URLs only
        by_id = dict(
            zip(store.urls(arrays.ids), arrays.columns[GROUP_COLUMN].tolist(), strict=True)
        )
        assert by_id["http://a.example/new"] == by_id[urls[0]]
        assert by_id["http://d.example/new"] not in {by_id[u] for u in urls}

        # a scorer without pooled terminals: no column, no URL read
        arrays = store.arrays()
        plan_cycle(arrays, config, Scorer.from_spec("aad+"), pending_new=0, urls_of=store.urls,
                   groups=index)  # fmt: skip
        assert GROUP_COLUMN not in arrays.columns and index.urls_read == len(urls) + 2
    finally:
        store.close()


def test_an_emptied_store_starts_the_cache_afresh():
    index = GroupIndex()
    names = {1: "http://a/1", 2: "http://b/2", 3: "http://a/3"}
    codes = index.codes(np.array([1, 2, 3]), lambda ids: [names[int(i)] for i in ids])
    assert codes.tolist() == [0, 1, 0]
    names = {1: "http://b/1"}  # the store was cleared: id 1 is another URL now
    codes = index.codes(np.array([1]), lambda ids: [names[int(i)] for i in ids])
    assert codes.tolist() == [0] and index.urls_read == 4 and len(index) == 1
    # an id below the highest kept, never seen: merged in order
    index.codes(np.array([1, 5]), lambda ids: [f"http://c/{int(i)}" for i in ids])
    got = index.codes(np.array([1, 3, 5]), lambda ids: [f"http://b/{int(i)}" for i in ids])
    assert got.tolist() == [0, 0, 1] and index.urls_read == 6

    # emptied and refilled past the highest id kept: the cycle counter went back to 0
    index = GroupIndex()
    index.codes(np.array([1, 2]), lambda ids: ["http://a/", "http://b/"], cycle=7)
    got = index.codes(np.array([1, 2, 3]), lambda ids: ["http://c/"] * len(ids), cycle=1)
    assert got.tolist() == [0, 0, 0] and index.urls_read == 5
    got = index.codes(np.array([1, 2, 3, 4]), lambda ids: ["http://d/"] * len(ids), cycle=2)
    assert got.tolist() == [0, 0, 0, 1] and index.urls_read == 6  # id 4 only


def test_the_pooled_terminals_cost_a_few_passes_at_a_million_urls():
    rng = np.random.default_rng(0)
    size = 1_000_000
    n = rng.integers(0, 50, size)
    state = {
        "n": n,
        "X": rng.binomial(n, 0.1),
        "aad_sum": rng.random(size),
        "last_visit_cycle": rng.integers(0, 60, size),
        GROUP_COLUMN: rng.integers(0, 5000, size),
    }
    import time

    t0 = time.perf_counter()
    compute_terminals(state, 60, needed=["AADp", "t"])
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = compute_terminals(state, 60, needed=["AADh", "t"])
    pooled = time.perf_counter() - t0
    assert np.isfinite(out["AADh"]).all()
    assert pooled < max(20 * base, 1.0), (pooled, base)
    assert math.isfinite(pooled)
