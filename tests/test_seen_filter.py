"""history/seen_filter.py: a Bloom filter that never says "not seen" for a fingerprint
it was given, and rarely says "maybe" for one it was not."""

from __future__ import annotations

import os

from scrapy_recrawl.history.seen_filter import BITS, SeenFilter


def test_no_fingerprint_given_is_ever_reported_unseen():
    seen = SeenFilter()
    given = [os.urandom(20) for _ in range(100_000)]
    # any bytes a fingerprinter may return: short, equal prefixes, empty
    given += [b"", b"a", b"b", b"ab"] + [b"x" * n for n in range(1, 64)]
    for fp in given:
        seen.add(fp)
    assert all(fp in seen for fp in given)


def test_false_positives_are_rare_at_a_crawls_size():
    seen = SeenFilter()
    for _ in range(200_000):
        seen.add(os.urandom(20))
    others = [os.urandom(20) for _ in range(200_000)]
    rate = sum(fp in seen for fp in others) / len(others)
    # three positions in 2**24 bits: about 4e-5 at 200,000 fingerprints
    assert rate < 1e-3
    assert not any(bytes([i]) * 20 in SeenFilter() for i in range(256))
    assert BITS == 1 << 24
