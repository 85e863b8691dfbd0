"""Bodies at rest: history.base.compress_body (a window sized to the body)."""

from __future__ import annotations

import os
import zlib

import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit
from scrapy_recrawl.history.base import compress_body


@pytest.mark.parametrize("size", [0, 1, 100, 3_000, 3_800, 5_000, 40_000, 1_000_000])
def test_any_zlib_reader_reads_it(size):
    body = (b"<p>page text %d</p>" * (size // 10 + 1))[:size] + os.urandom(min(size, 64))
    packed = compress_body(body)
    assert zlib.decompress(packed) == body
    assert zlib.decompressobj().decompress(packed) == body  # a streaming reader too


def test_a_page_of_a_few_kb_compresses_as_with_the_default_window():
    page = b"".join(
        b'<li><a href="/page/%d.html">Page %d</a> <span class="t">%d</span></li>\n' % (i, i, i * 7)
        for i in range(60)
    )
    assert 2_000 < len(page) < 8_000
    assert len(compress_body(page)) <= len(zlib.compress(page, 1)) * 1.02


def test_a_store_reads_bodies_of_both_windows(tmp_path):
    """A store written before (the default window) and after read the same way."""
    path = str(tmp_path / "history.sqlite3")
    old_fp, new_fp = b"\x01" * 20, b"\x02" * 20
    body = b"<html><body>" + b"<p>same words</p>" * 200 + b"</body></html>"
    with SqliteHistoryStore(path) as store:
        for fp in (old_fp, new_fp):
            store.record(
                Visit(
                    fingerprint=fp,
                    url=f"https://e.com/{fp[0]}",
                    time=1.0,
                    status=200,
                    body=body,
                    headers={"Content-Type": ["text/html"]},
                )
            )
        store.flush()
        # the row as an older release wrote it: the default window
        rec = store.get(old_fp)
        store.db.execute(
            "UPDATE bodies SET body = ? WHERE url_id = ?", (zlib.compress(body, 1), rec.id)
        )
        store.db.commit()
    with SqliteHistoryStore(path) as store:
        assert store.body(old_fp).body == body
        assert store.body(new_fp).body == body
