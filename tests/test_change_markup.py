"""Tests of the vectorised internals of scrapy_recrawl.change: markup read-back, span
hashing, token scrubbing, the fallback for ambiguous names and the two diff paths.

All pages here are our own small HTML snippets.
"""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_recrawl.change import ChangeDetector, ChangeResult, Signature, elements
from scrapy_recrawl.change._diff import key_order
from scrapy_recrawl.change._hashes import value_hashes
from scrapy_recrawl.change.shingles import span_hashes, text_shingles, u64_view, word_hashes
from scrapy_recrawl.change.simhash import fingerprint

HTML = "text/html; charset=utf-8"
URL = "https://example.org/p"


@pytest.fixture(scope="module")
def det() -> ChangeDetector:
    return ChangeDetector()


def sig(det: ChangeDetector, body: str | bytes) -> Signature:
    return det.signature(body.encode() if isinstance(body, str) else body, URL, HTML)


def counts(det: ChangeDetector, old: str | bytes, new: str | bytes) -> tuple[int, int, int, int]:
    r = det.compare(sig(det, old), sig(det, new))
    return r.added, r.removed, r.modified, r.attributes


# -- span hashing ------------------------------------------------------------------------------


def test_span_hashes_depend_on_bytes_only():
    words = [b"a", b"abcdefgh", b"abcdefghi", b"abcdefghijklmnop", b"abcdefghijklmnopq", b"x" * 300]
    data = b" ".join(words) + b" | " + b"  ".join(reversed(words))
    view = u64_view(data)
    starts, lens, pos = [], [], 0
    for w in words:
        starts.append(pos)
        lens.append(len(w))
        pos += len(w) + 1
    pos += 2
    for w in reversed(words):
        starts.append(pos)
        lens.append(len(w))
        pos += len(w) + 2
    h = span_hashes(view, np.array(starts), np.array(lens))
    first, second = h[: len(words)], h[len(words) :][::-1]
    assert np.array_equal(first, second)
    assert len(set(first.tolist())) == len(words)  # prefixes of one another all differ
    raw = span_hashes(view, np.array(starts[:2]), np.array(lens[:2]), mix=False)
    assert int(raw[0]) == ord("a") and int(raw[1]) == int.from_bytes(b"abcdefgh", "little")


def test_span_hashes_do_not_depend_on_the_other_spans():
    data = b"twelve bytes " + b"x" * 40
    view = u64_view(data)
    alone = span_hashes(view, np.array([0]), np.array([12]))
    together = span_hashes(view, np.array([0, 13]), np.array([12, 40]))
    assert alone[0] == together[0]


def test_word_hashes_split_on_whitespace_and_controls():
    h, starts = word_hashes(b"  one\ttwo\n\x0cthree  ")
    assert starts.tolist() == [2, 6, 11]
    again, _ = word_hashes(b"one two three")
    assert np.array_equal(h, again)


# -- visible text --------------------------------------------------------------------------------


def test_words_are_in_reading_order(det):
    s = sig(
        det, "<html><body><p>Hello <b>big</b> wide world, <i>again</i> and again.</p></body></html>"
    )
    text = "Hello big wide world, again and again."
    assert s.simhash == fingerprint(text_shingles(text, det.shingle_size))


def test_entities_and_no_break_spaces(det):
    s = sig(det, "<p>a &lt;b&gt; &amp; c\u00a0d</p>")
    assert s.simhash == fingerprint(text_shingles("a <b> & c\u00a0d", det.shingle_size))
    assert counts(det, "<p>x\u00a0y z</p>", "<p>x y   z</p>") == (0, 0, 0, 0)
    # A control character separates words like a space.
    assert counts(det, b"<p>x\x0cy z</p>", b"<p>x y z</p>") == (0, 0, 0, 0)


def test_element_boundaries_separate_words(det):
    # "<p>a</p><p>b</p>" is two words, never "ab".
    a = sig(det, "<div><p>alpha</p><p>beta</p></div>")
    b = sig(det, "<div><p>alphabeta</p></div>")
    assert a.simhash != b.simhash


# -- attributes and tokens -------------------------------------------------------------------------


def test_tokens_are_left_out_of_attribute_values(det):
    page = '<p><a href="/s/{a}/x?sid={b}&amp;lang=en" class="c">link</a></p>'
    old = page.format(a="3f9a2c1b7d4e5f6071a2", b="Zk2Lp9Qx4Rt7Vw1Yb3Nm5Hc8")
    new = page.format(a="77b0e21c9a8d4f13aa99", b="a8F3kL9mQ2xZ7pW1vB4nR6tY")
    assert counts(det, old, new) == (0, 0, 0, 0)
    # ... but not the text around them.
    other = new.replace("lang=en", "lang=fr")
    assert counts(det, old, other) == (0, 0, 0, 1)
    # A token in visible text is a change.
    assert counts(det, "<p>id 3f9a2c1b7d4e5f6071a2</p>", "<p>id 77b0e21c9a8d4f13aa99</p>") == (
        0,
        0,
        1,
        0,
    )


@pytest.mark.parametrize("prefix", [b"", b"/a", b"/en/p?q", b"x" * 9 + b" "])
def test_a_token_is_left_out_wherever_its_digit_is(prefix):
    # values without a digit skip the token scan (a token has one): a digit anywhere,
    # in an 8-byte chunk or in the tail, must still be seen
    for at in range(20):
        one, two = bytearray(b"abcdefghijklmnopqrst"), bytearray(b"ABCDEFGHIJKLMNOPQRST")
        one[at], two[at] = ord("7"), ord("3")
        values = [prefix + bytes(t) + suffix for t in (one, two) for suffix in (b"", b"/b.html")]
        h = value_hashes(values, 0).tolist()
        assert h[0] == h[2] and h[1] == h[3], at  # the token left out
        assert h[0] != h[1]


def test_noise_attributes_by_name(det):
    old = '<p><span data-x="1" onclick="a()" nonce="n1" integrity="i1" ONMOUSEOVER="b">t</span></p>'
    new = '<p><span data-x="1" onclick="c()" nonce="n2" integrity="i2" ONMOUSEOVER="d">t</span></p>'
    assert counts(det, old, new) == (0, 0, 0, 0)
    # data-* values are not attributes but a data part of their own (issue 29), read on
    # elements with text only (on bare wrappers they are page-script state)
    assert counts(det, old, old.replace('data-x="1"', 'data-x="2"')) == (0, 0, 1, 0)
    assert counts(det, old, old.replace('data-x="1"', 'data-x="1" data-v-3f9a')) == (0, 0, 0, 0)
    wrapper = '<div data-x="{}"><p>t</p></div>'
    assert counts(det, wrapper.format(1), wrapper.format(2)) == (0, 0, 0, 0)
    assert counts(det, '<p title="x">t</p>', '<p title="y">t</p>') == (0, 0, 0, 1)
    assert counts(det, '<p integrityx="x">t</p>', '<p integrityx="y">t</p>') == (0, 0, 0, 1)


def test_attribute_order_and_boolean_attributes(det):
    assert counts(det, '<p a="1" b="2">t</p>', '<p b="2" a="1">t</p>') == (0, 0, 0, 0)
    assert counts(det, '<p a="1" b="2">t</p>', '<p a="2" b="1">t</p>') == (0, 0, 0, 1)
    assert counts(det, "<input disabled><p>t</p>", "<input><p>t</p>") == (0, 1, 0, 0)


# -- structure --------------------------------------------------------------------------------


def test_tag_paths(det):
    # Same text under another path: paired by key only when the path is the same.
    assert counts(det, "<div><p>a</p></div>", "<div><p>b</p></div>") == (0, 0, 1, 0)
    assert counts(det, "<div><p>a</p></div>", "<section><p>b</p></section>") == (1, 1, 0, 0)
    # Long and custom tag names (read past the first 8 bytes).
    assert counts(
        det,
        "<blockquote><my-custom-element-name>a</my-custom-element-name></blockquote>",
        "<blockquote><my-custom-element-name>b</my-custom-element-name></blockquote>",
    ) == (0, 0, 1, 0)


def test_same_place_copies_match_first(det):
    old = "<div><ul><li>Same</li></ul><ol><li>Same</li></ol></div>"
    new = "<div><ol><li>Same</li></ol></div>"
    assert counts(det, old, new) == (0, 1, 0, 0)
    assert counts(det, new, old) == (1, 0, 0, 0)


def test_deep_and_self_closing_markup(det):
    deep = "<div>" * 200 + "x" + "</div>" * 200  # (libxml2 stops at a depth of 256)
    assert counts(det, deep, deep.replace("x", "y")) == (0, 0, 1, 0)
    assert counts(det, "<p>a<br>b<img src=x>c</p>", "<p>a<br>b<img src=y>c</p>") == (0, 0, 0, 1)


# -- junk names (hashed as parsed: no serialisation to be ambiguous) ---------------------------


@pytest.mark.parametrize(
    "body",
    [
        '<div a"b=c d<e=f g>h=i><a<b>x</a<b></div>',
        "<p x'y=1 a&b=2>t</p>",
        "<p a=b=c>t</p><p>u</p>",
        "<p>x<svg><![CDATA[ a < b ]]></svg>y</p>",
    ],
)
def test_junk_names_are_signed(det, body):
    a, b = sig(det, body), sig(det, body)
    assert a.kind == "html" and a == b and len(a) > 0
    assert det.compare(a, b) == ChangeResult(False, 0, 0, 0, 0, 0)
    if "<a<b>" in body:
        assert counts(det, body, body.replace(">x<", ">y<")) == (0, 0, 1, 0)


def test_noise_elements_keep_their_tails_and_join_words(det):
    # As a reader sees it: the script is gone, "ab" is one word, "c" stays.
    with_script = sig(det, "<div><p>a<script>x()</script>b</p><style>p{}</style>c</div>")
    plain = sig(det, "<div><p>ab</p>c</div>")
    assert with_script.simhash == plain.simhash
    assert det.compare(with_script, plain).element_changes == 0


# -- the diff ----------------------------------------------------------------------------------


def _reference_diff(old, new) -> tuple[int, int, int, int]:
    """The diff rules of elements.py written plainly (slow), to check the compiled one."""
    (ok, ot, oa), (nk, nt, na) = ([list(map(int, a)) for a in side] for side in (old, new))

    def unmatched(old_ids, new_ids, old_left, new_left):
        # the n-th copy of an id on one side matches the n-th on the other
        waiting: dict[int, list[int]] = {}
        for j in new_left:
            waiting.setdefault(new_ids[j], []).append(j)
        kept_old, taken = [], set()
        for i in old_left:
            copies = waiting.get(old_ids[i])
            if copies:
                taken.add(copies.pop(0))
            else:
                kept_old.append(i)
        return kept_old, [j for j in new_left if j not in taken]

    ident_o = [(t, a) for t, a in zip(ot, oa, strict=True)]
    ident_n = [(t, a) for t, a in zip(nt, na, strict=True)]
    lo, ln = unmatched(
        list(zip(ident_o, ok, strict=True)),
        list(zip(ident_n, nk, strict=True)),
        range(len(ok)),
        range(len(nk)),
    )
    lo, ln = unmatched(ident_o, ident_n, lo, ln)
    by_key: dict[int, list[int]] = {}
    for j in ln:
        by_key.setdefault(nk[j], []).append(j)
    pairs = modified = attributes = 0
    for i in lo:
        same = by_key.get(ok[i])
        if same:
            j = same.pop(0)
            pairs += 1
            modified += ot[i] != nt[j]
            attributes += oa[i] != na[j]
    return len(ln) - pairs, len(lo) - pairs, modified, attributes


def test_compiled_diff_follows_the_rules():
    rng = np.random.default_rng(3)

    def arrays(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keys = np.sort(rng.integers(0, 5, m).astype(np.uint64))
        return (
            keys,
            rng.integers(0, 4, m).astype(np.uint64),
            rng.integers(0, 3, m).astype(np.uint64),
        )

    def edited(side: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        # mostly the same page: whole keys alike on both sides (matched key by key)
        keys, texts, attrs = (a.copy() for a in side)
        for _ in range(int(rng.integers(0, 3))):
            if keys.size:
                at = int(rng.integers(0, keys.size))
                texts[at] = rng.integers(0, 4)
        keep = rng.random(keys.size) > 0.05
        return keys[keep], texts[keep], attrs[keep]

    for trial in range(3000):
        old = arrays(int(rng.integers(0, 40)))
        new = arrays(int(rng.integers(0, 40))) if trial % 3 else edited(old)
        got = elements.diff(old, new)
        assert got == _reference_diff(old, new)
        added, removed, _, _ = got
        # added - removed is the difference in size, whatever is paired.
        assert added - removed == len(new[0]) - len(old[0])


@pytest.mark.parametrize(
    "kind", ["few", "mixed", "repeated", "one-bucket", "descending", "all-equal"]
)
def test_the_sort_of_a_signature_is_stable_by_key(kind):
    # sign() sorts its entries by key, the walk's order kept within a key: by buckets of
    # the top bits and an insertion pass, the merge sort past 8 moves per entry
    rng = np.random.default_rng(7)
    keys = {
        "few": rng.integers(0, 2**64, 40, dtype=np.uint64),
        "mixed": rng.integers(0, 2**64, 5000, dtype=np.uint64),
        "repeated": rng.integers(0, 2**64, 300, dtype=np.uint64)[rng.integers(0, 300, 6000)],
        "one-bucket": rng.integers(0, 2**40, 3000, dtype=np.uint64),  # top bits all 0
        "descending": np.sort(rng.integers(0, 2**64, 3000, dtype=np.uint64))[::-1].copy(),
        "all-equal": np.full(500, 2**63 + 5, dtype=np.uint64),
    }[kind]
    assert key_order(keys) == np.argsort(keys, kind="stable").tolist()


def test_old_signature_versions_are_refused(det):
    data = bytearray(sig(det, "<p>x</p>").to_bytes())
    data[4] = 1
    with pytest.raises(ValueError, match="version"):
        Signature.from_bytes(bytes(data))
