"""Bodies at rest: history.base.compress_body / decompress_body (ISA-L where installed,
zlib otherwise: zlib streams both ways)."""

from __future__ import annotations

import os
import zlib

import pytest

from scrapy_recrawl.history import SqliteHistoryStore, Visit, base
from scrapy_recrawl.history.base import compress_body, decompress_body


@pytest.fixture(params=["isal", "zlib"])
def library(request, monkeypatch):
    """Each test with ISA-L (the dependency on the common platforms) and without it."""
    if request.param == "zlib":
        monkeypatch.setattr(base, "isal_zlib", None)
    elif base.isal_zlib is None:
        pytest.skip("isal is not installed on this platform")
    return request.param


@pytest.mark.parametrize("size", [0, 1, 100, 3_000, 3_800, 5_000, 40_000, 1_000_000])
def test_any_zlib_reader_reads_it(size, library):
    body = (b"<p>page text %d</p>" * (size // 10 + 1))[:size] + os.urandom(min(size, 64))
    packed = compress_body(body)
    assert zlib.decompress(packed) == body
    assert zlib.decompressobj().decompress(packed) == body  # a streaming reader too
    assert decompress_body(packed) == body


def test_what_zlib_wrote_is_read(library):
    body = b"<p>" + b"an older release's body " * 100 + b"</p>"
    assert decompress_body(zlib.compress(body, 1)) == body
    assert decompress_body(zlib.compress(body, 9)) == body


def test_a_damaged_body_is_zlib_error(library):
    packed = bytearray(compress_body(b"<p>" + b"text " * 500 + b"</p>"))
    packed[len(packed) // 2 :] = b"\x00" * (len(packed) - len(packed) // 2)
    with pytest.raises(zlib.error):
        decompress_body(bytes(packed))
    with pytest.raises(zlib.error):
        decompress_body(b"not a zlib stream")


def test_a_page_of_a_few_kb_compresses_as_zlib_level_1(library):
    page = b"".join(
        b'<li><a href="/page/%d.html">Page %d</a> <span class="t">%d</span></li>\n' % (i, i, i * 7)
        for i in range(60)
    )
    assert 2_000 < len(page) < 8_000
    assert len(compress_body(page)) <= len(zlib.compress(page, 1)) * 1.02


def test_a_store_reads_bodies_of_both_releases(tmp_path, library):
    """A store written before (zlib's default window) and after read the same way."""
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
