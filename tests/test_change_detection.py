"""Tests of scrapy_recrawl.change: signatures, element diff, simhash, robustness, real pairs.

The hand-made pages below are our own HTML. The real pairs are read in place from
../shared/data/html_pairs (Open Terms Archive snapshots, never copied here).
"""

from __future__ import annotations

import codecs
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from lxml import etree
from scrapy.settings import Settings
from simhash import Simhash

from scrapy_recrawl.change import ChangeDetector, ChangeResult, Signature
from scrapy_recrawl.change._hashes import shingle_simhash
from scrapy_recrawl.change.body import _decoded, as_utf8
from scrapy_recrawl.change.elements import diff as elements_diff
from scrapy_recrawl.change.elements import extract
from scrapy_recrawl.change.shingles import shingle_hashes, text_shingles
from scrapy_recrawl.change.simhash import distance, fingerprint
from scrapy_recrawl.settings import RecrawlSettingError

HTML = "text/html; charset=utf-8"
URL = "https://example.org/terms"
PAIRS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "html_pairs"

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="csrf-token" content="{token}">
  <title>Terms of Service</title>
  <link rel="stylesheet" href="/static/app.{build}.css" integrity="sha384-{build}">
  <style>body {{ color: {color}; }}</style>
  <script nonce="{nonce}">window.__STATE__ = {{"t": "{token}"}};</script>
</head>
<body class="page">
  <!-- rendered at {token} -->
  <div id="clock">Generated {token}</div>
  <header><nav><a href="/">Home</a> <a href="/about">About</a></nav></header>
  <main data-build="{build}">
    <h1>Terms of Service</h1>
    <p>These terms govern your use of the service and explain your rights.</p>
    <p>We may update these terms from time to time and will notify you.</p>
    <p title="contact">Contact us at <a href="mailto:legal@example.org">legal@example.org</a> today.</p>
    <ul>
      <li>Be kind to other members of the community.</li>
      <li>Do not post illegal content of any kind.</li>
      <li>Respect the privacy of other people.</li>
    </ul>
    {extra}
    <form action="/search"><input type="hidden" name="csrf" value="{token}"></form>
    <a href="/help?session={token}" onclick="track('{nonce}')">Help centre</a>
  </main>
</body>
</html>
"""

NOISE_A = dict(
    token="a8F3kL9mQ2xZ7pW1vB4nR6tY", build="3f9a2c1b7d4e5f60", nonce="n0nceAAA1", color="#111"
)
NOISE_B = dict(
    token="Zk2Lp9Qx4Rt7Vw1Yb3Nm5Hc8", build="77b0e21c9a8d4f13", nonce="n0nceBBB2", color="#222"
)


def page(extra: str = "", noise: dict | None = None, **replace: str) -> bytes:
    html = PAGE.format(extra=extra, **(noise or NOISE_A))
    for old, new in replace.items():
        old = old.replace("_", " ")
        assert old in html, old
        html = html.replace(old, new)
    return html.encode("utf-8")


@pytest.fixture(scope="module")
def det() -> ChangeDetector:
    return ChangeDetector()


def diff(det: ChangeDetector, old: bytes, new: bytes, ctype: str | None = HTML) -> ChangeResult:
    return det.compare(det.signature(old, URL, ctype), det.signature(new, URL, ctype))


def counts(r: ChangeResult) -> tuple[int, int, int, int]:
    return r.added, r.removed, r.modified, r.attributes


# -- exact element counts ------------------------------------------------------------------


def test_identical_and_first_visit(det):
    sig = det.signature(page(), URL, HTML)
    assert det.compare(None, sig) == ChangeResult(False, 0, 0, 0, 0, 0)
    assert det.compare(sig, det.signature(page(), URL, HTML)) == ChangeResult(False, 0, 0, 0, 0, 0)
    assert sig.kind == "html" and 0 <= sig.simhash < 2**64 and len(sig) > 5


def test_element_added(det):
    r = diff(det, page(), page(extra="<p>A brand new paragraph about refunds.</p>"))
    assert counts(r) == (1, 0, 0, 0) and r.changed


def test_element_removed(det):
    r = diff(det, page(), page(**{"<li>Respect the privacy of other people.</li>": ""}))
    assert counts(r) == (0, 1, 0, 0) and r.changed


def test_element_modified(det):
    r = diff(det, page(), page(**{"notify you": "email you"}))
    assert counts(r) == (0, 0, 1, 0) and r.changed


def test_attribute_change_is_flagged_without_text_change(det):
    r = diff(det, page(), page(**{'href="/about"': 'href="/about/"'}))
    assert counts(r) == (0, 0, 0, 1) and r.changed and r.distance == 0


def test_text_and_attribute_change_on_one_element(det):
    r = diff(det, page(), page(**{'<p title="contact">Contact us': '<p title="reach">Write to us'}))
    assert counts(r) == (0, 0, 1, 1)


def test_insertion_does_not_shift_later_siblings(det):
    new = page(**{"<li>Be kind": "<li>Report abuse to moderators.</li><li>Be kind"})
    assert counts(diff(det, page(), new)) == (1, 0, 0, 0)


def test_repeated_identical_siblings_are_matched_one_for_one(det):
    old = page(extra="<ol><li>Same</li><li>Same</li><li>Same</li></ol>")
    new = page(extra="<ol><li>Same</li><li>Same</li></ol>")
    assert counts(diff(det, old, new)) == (0, 1, 0, 0)
    assert counts(diff(det, new, old)) == (1, 0, 0, 0)


def test_moved_element_with_same_text_is_not_a_change(det):
    # Wrapping content in a new container changes tag paths, not content.
    new = page(**{"<ul>": "<section><ul>", "</ul>": "</ul></section>"})
    r = diff(det, page(), new)
    assert counts(r) == (0, 0, 0, 0) and not r.changed


# -- noise -----------------------------------------------------------------------------------


def without_clock(noise: dict) -> bytes:
    """The page with its one visible volatile part (a timestamp) left out."""
    return page(noise=noise, **{f'<div id="clock">Generated {noise["token"]}</div>': ""})


def test_volatile_markup_is_not_counted(det):
    # script/style contents, comments, nonce, integrity, data-*, on*, <link>/<meta>,
    # tokens in URLs and hidden inputs: all differ between NOISE_A and NOISE_B.
    r = diff(det, without_clock(NOISE_A), without_clock(NOISE_B))
    assert counts(r) == (0, 0, 0, 0) and r.distance == 0 and not r.changed
    # ... while the visible timestamp is a (small) change.
    assert counts(diff(det, page(), page(noise=NOISE_B))) == (0, 0, 1, 0)


def test_ignore_xpaths_removes_elements_attributes_and_text():
    det = ChangeDetector(ignore_xpaths=["//div[@id='clock']", "//p/@title", "//h1/text()"])
    old = page()
    new = page(noise=NOISE_B, **{'title="contact"': 'title="other"', "<h1>Terms": "<h1>Conditions"})
    r = diff(det, old, new)
    assert counts(r) == (0, 0, 0, 0) and not r.changed
    # The clock's tail text and the other elements are kept.
    assert counts(diff(det, old, page(**{"notify you": "email you"}))) == (0, 0, 1, 0)


def test_whitespace_and_reindentation_are_not_changes(det):
    old = page()
    new = old.replace(b"\n    <p>", b"\n\n\t\t<p>  ").replace(b"your use", b"your\n   use")
    assert counts(diff(det, old, new)) == (0, 0, 0, 0)


def test_token_scrubbing_keeps_meaningful_url_changes(det):
    # slugs and UUIDs are not tokens; a changed mailto is a change.
    for a, b in [
        ('href="/about"', 'href="/privacy-policy-2024-update"'),
        ('href="/about"', 'href="/doc/297a385f-b3bd-4ecd-9466-7d9ad55371ce"'),
        ("mailto:legal@example.org", "mailto:legal@example.com"),
    ]:
        assert diff(det, page(), page(**{a: b})).attributes == 1, b


# -- simhash -----------------------------------------------------------------------------------


def test_simhash_distance_zero_for_identical_text(det):
    old = without_clock(NOISE_A)
    new = without_clock(NOISE_B).replace(b'<body class="page">', b'<body class="page v2"><div>')
    a, b = det.signature(old, URL, HTML), det.signature(new, URL, HTML)
    assert a.simhash == b.simhash
    assert det.compare(a, b).distance == 0


def test_simhash_distance_large_for_rewritten_text(det):
    words = " ".join(f"word{i}" for i in range(400))
    other = " ".join(f"term{i}" for i in range(400))
    a = det.signature(f"<html><body><p>{words}</p></body></html>".encode(), URL, HTML)
    b = det.signature(f"<html><body><p>{other}</p></body></html>".encode(), URL, HTML)
    r = det.compare(a, b)
    assert r.distance >= 10 and r.changed


def test_fingerprint_matches_the_simhash_package():
    text = "the quick brown fox jumps over the lazy dog and the quick brown fox sleeps " * 5
    words = text.split()
    shingles = text_shingles(text, 4)
    assert len(shingles) == len(words) - 3
    # The package, fed the shingle strings, with our hash of each as its digest.
    digest = {}
    features = Counter()
    for i in range(len(words) - 3):
        s = " ".join(words[i : i + 4])
        features[s] += 1
        digest[s.encode()] = int(text_shingles(s, 4)[0]).to_bytes(8, "big")
    ref = Simhash(dict(features), hashfunc=lambda b: digest.get(b, bytes(8)))
    assert fingerprint(shingles) == ref.value
    assert distance(ref.value, ref.value ^ 0b1011) == 3
    assert fingerprint(np.zeros(0, dtype=np.uint64)) == 0


# -- the change rule ---------------------------------------------------------------------------


def test_thresholds():
    old, new = page(), page(**{"notify you": "email you"})
    strict = ChangeDetector(min_element_changes=2, simhash_distance=64)
    r = diff(strict, old, new)
    assert r.modified == 1 and not r.changed
    # 0 turns a criterion into "any byte change".
    assert diff(
        ChangeDetector(simhash_distance=0, min_element_changes=99), page(), page(noise=NOISE_B)
    ).changed


@pytest.mark.parametrize("thresholds", [(3, 1), (64, 2), (0, 99), (1, 0)])
def test_the_compiled_compare_is_the_rule_read_from_the_diff(thresholds):
    # compare's common case is one compiled call: the same result as the rule (module
    # docstring) made of the element diff and the simhash distance, read back from a
    # stored signature too
    max_distance, min_changes = thresholds
    det = ChangeDetector(simhash_distance=max_distance, min_element_changes=min_changes)
    versions = [
        page(),
        page(noise=NOISE_B),
        page(**{"notify you": "email you"}),
        page(extra="<p>One more paragraph of text, with words enough to move shingles.</p>"),
        b"<html><body></body></html>",
    ]
    sigs = [det.signature(v, URL, HTML) for v in versions]
    sigs.append(Signature.from_bytes(sigs[2].to_bytes()))
    for old in sigs:
        for new in sigs:
            if old.content_hash == new.content_hash:
                continue
            dist = distance(old.simhash, new.simhash)
            counts = elements_diff(
                (old.keys, old.texts, old.attrs), (new.keys, new.texts, new.attrs)
            )
            changed = dist >= max_distance or sum(counts) >= min_changes
            got = det.compare(old, new)
            assert got == ChangeResult(changed, dist, *counts)
            assert repr(got) == repr(ChangeResult(changed, dist, *counts))


# -- signature storage ------------------------------------------------------------------------


def test_signature_round_trip(det):
    sig = det.signature(page(), URL, HTML)
    data = sig.to_bytes()
    assert data[:4] == b"RCSG" and len(data) < 100 + 24 * len(sig)
    back = Signature.from_bytes(data)
    assert back == sig and hash(back) == hash(sig)
    assert (
        det.compare(back, det.signature(page(**{"notify you": "email you"}), URL, HTML)).modified
        == 1
    )
    raw = det.signature(b'{"a": 1}', URL, "application/json")
    assert Signature.from_bytes(raw.to_bytes()) == raw and raw.simhash is None
    assert not sig.keys.flags.writeable


@pytest.mark.parametrize(
    "data", [b"", b"RCSG", b"XXXX\x01\x00\x00\x10" + bytes(30), b"RCSG\x09\x00\x00\x10"]
)
def test_signature_from_bad_bytes(data):
    with pytest.raises(ValueError):
        Signature.from_bytes(data)


def test_signature_truncated(det):
    data = det.signature(page(), URL, HTML).to_bytes()
    with pytest.raises(ValueError):
        Signature.from_bytes(data[:-3])


# -- non-HTML and bad input: never crash -------------------------------------------------------


def test_non_html_is_compared_by_hash(det):
    for ctype, a, b in [
        ("application/json", b'{"a": 1}', b'{"a": 2}'),
        ("application/pdf", b"%PDF-1.7 aaa", b"%PDF-1.7 bbb"),
        ("image/png", b"\x89PNG\r\n\x1a\nxx", b"\x89PNG\r\n\x1a\nyy"),
        (None, b'{"a": 1}', b'{"a": 2}'),
    ]:
        sa, sb = det.signature(a, URL, ctype), det.signature(b, URL, ctype)
        assert sa.kind == sb.kind == "bytes" and len(sa) == 0
        assert det.compare(sa, sb) == ChangeResult(True, 0, 0, 0, 0, 0)
        assert not det.compare(sa, det.signature(a, URL, ctype)).changed


def test_binary_junk_labelled_html(det):
    rng = np.random.default_rng(7)
    junk = rng.integers(0, 256, 20000, dtype=np.uint8).tobytes()
    assert det.signature(junk, URL, HTML).kind == "bytes"
    assert det.signature(b"%PDF-1.4\n" + junk, URL, HTML).kind == "bytes"
    # junk without NUL bytes gets parsed, and must not crash either
    printable = bytes(b % 200 + 40 for b in junk)
    sig = det.signature(printable, URL, HTML)
    assert sig.kind == "html"
    det.compare(sig, det.signature(printable[::-1], URL, HTML))


def test_undecodable_and_mislabelled_encodings(det):
    bad = b"<html><body><p>caf\xe9 \xff\xfe cr\xc3\xa8me</p></body></html>"
    for ctype in (HTML, "text/html; charset=no-such-charset", "text/html; charset=utf-16", None):
        sig = det.signature(bad, URL, ctype)
        assert sig.kind == "html"
    # The same text in windows-1252 and in UTF-8 is the same page.
    text = "<html><body><p>Données personnelles – café</p></body></html>"
    a = det.signature(text.encode("cp1252"), URL, "text/html; charset=windows-1252")
    b = det.signature(text.encode("utf-8"), URL, HTML)
    meta = det.signature(
        text.replace("<body>", '<head><meta charset="latin-1"></head><body>').encode("cp1252"),
        URL,
        "text/html",
    )
    r = det.compare(a, b)
    assert a.simhash == b.simhash == meta.simhash and counts(r) == (0, 0, 0, 0) and not r.changed
    bom = det.signature(b"\xff\xfe" + text.encode("utf-16-le"), URL, "text/html")
    assert bom.simhash == b.simhash


def test_the_utf8_shortcut_decodes_as_every_case_does():
    # as_utf8 passes a body through when its header says UTF-8 and it has no BOM,
    # without reading it: the same bytes as the general path, whatever the header
    text = "<html><head>{}</head><body><p>Données – café</p></body></html>"
    bodies = [
        text.format("").encode(),
        text.format('<meta charset="latin-1">').encode("cp1252"),
        text.format('<meta charset="utf-8">').encode("cp1252"),
        codecs.BOM_UTF8 + text.format("").encode(),
        codecs.BOM_UTF16_LE + text.format("").encode("utf-16-le"),
        codecs.BOM_UTF32_BE + text.format("").encode("utf-32-be"),
        b"<p>caf\xe9 \xff\xfe</p>",
        b"",
    ]
    types = [
        None,
        "",
        "text/html",
        HTML,
        "text/html; charset=UTF-8",
        'text/html; charset="utf-8"',
        "text/html; charset=utf8",
        "text/html;charset=utf-16",
        "text/html; charset=windows-1252",
        "text/html; charset=no-such-charset",
        "text/html; charset=utf-7",
        'text/html; note="charset=latin-1"; charset=utf-8',
    ]
    for ctype in types:
        for body in bodies:
            assert as_utf8(body, ctype) == _decoded(body, ctype), (ctype, body[:20])


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   \n ",
        b"<",
        b"<html>",
        b"<html><body><div><p>unclosed <b>bold <i>x</div></p><table><td>cell",
        b"no markup at all, just words",
        b"<p>" * 5000 + b"deep",
        b"<html><body>" + b"<p>" + "é".encode("utf-16-le") + b"</p></body></html>",
        b'<html><body><a href="&#0;&#xD800;">x</a>\x00\x01</body></html>',
    ],
)
def test_malformed_bodies_do_not_crash(det, body):
    sig = det.signature(body, URL, HTML)
    assert sig.kind in ("html", "bytes")
    assert det.compare(sig, det.signature(body, URL, HTML)) == ChangeResult(False, 0, 0, 0, 0, 0)
    det.compare(sig, det.signature(page(), URL, HTML))
    assert Signature.from_bytes(sig.to_bytes()) == sig


def test_oversized_bodies_are_hash_only():
    det = ChangeDetector(max_parse_bytes=1000)
    assert det.signature(page(), URL, HTML).kind == "bytes"
    assert det.signature(page()[:900], URL, HTML).kind == "html"


def test_sniffing_without_content_type(det):
    assert det.signature(page(), URL, None).kind == "html"
    assert det.signature(b"plain words", "https://e.org/a.txt", None).kind == "bytes"


# -- settings -------------------------------------------------------------------------------


def test_from_settings_defaults_and_scrapy_settings():
    d = ChangeDetector.from_settings({})
    assert (d.shingle_size, d.simhash_distance, d.min_element_changes) == (4, 3, 1)
    assert d.ignore_xpaths == () and d.max_parse_bytes == 5 * 1024 * 1024
    s = Settings({"RECRAWL_SHINGLE_SIZE": "5", "RECRAWL_IGNORE_XPATHS": ["//footer"]})
    d = ChangeDetector.from_settings(s)
    assert d.shingle_size == 5 and d.ignore_xpaths == ("//footer",)
    d = ChangeDetector.from_settings({"RECRAWL_IGNORE_XPATHS": "//div[contains(@class, 'ad')]"})
    assert d.ignore_xpaths == ("//div[contains(@class, 'ad')]",)


@pytest.mark.parametrize(
    "name, value",
    [
        ("RECRAWL_SHINGLE_SIZE", 0),
        ("RECRAWL_SHINGLE_SIZE", "four"),
        ("RECRAWL_SIMHASH_DISTANCE", 65),
        ("RECRAWL_SIMHASH_DISTANCE", True),
        ("RECRAWL_MIN_ELEMENT_CHANGES", -1),
        ("RECRAWL_MAX_PARSE_BYTES", 1.5),
        ("RECRAWL_IGNORE_XPATHS", 42),
        ("RECRAWL_IGNORE_XPATHS", [""]),
    ],
)
def test_bad_settings_name_the_setting(name, value):
    with pytest.raises(RecrawlSettingError, match=name):
        ChangeDetector.from_settings({name: value})


@pytest.mark.parametrize("xpath", ["//div[", "//p[nosuchfn()]", "$undefined"])
def test_bad_xpath_names_setting_and_xpath(xpath):
    with pytest.raises(RecrawlSettingError) as err:
        ChangeDetector.from_settings({"RECRAWL_IGNORE_XPATHS": ["//footer", xpath]})
    assert "RECRAWL_IGNORE_XPATHS" in str(err.value) and xpath in str(err.value)


# -- real pairs ------------------------------------------------------------------------------


def _pairs() -> list[dict]:
    manifest = PAIRS / "manifest.json"
    if not manifest.is_file():
        pytest.skip(
            f"shared HTML pairs not found at {PAIRS.resolve()} (needs ../shared/data beside the repo)"
        )
    return json.loads(manifest.read_text())["pairs"]


@pytest.fixture(scope="module")
def real(det):
    out = []
    for p in _pairs():
        d = PAIRS / p["id"]
        old, new = (d / "old.html").read_bytes(), (d / "new.html").read_bytes()
        out.append(
            (
                p,
                old,
                new,
                det.signature(old, p["source_url"], "text/html"),
                det.signature(new, p["source_url"], "text/html"),
            )
        )
    return out


@pytest.mark.shared_data
def test_signature_simhash_is_the_package_rule_on_real_pages(det, real):
    # The detector fuses shingling and the simhash in C; it must equal the
    # numpy shingles + fingerprint (checked against the package above).
    for _, old, new, *_ in real[:20]:
        for body in (old, new):
            words = extract(etree.fromstring(body, det._parser())).words
            assert len(words) > 50
            for size in (1, 2, 4, 9):
                assert shingle_simhash(words, size) == fingerprint(shingle_hashes(words, size))
    few = np.array([5, 7], dtype=np.uint64)  # fewer words than the shingle size
    assert shingle_simhash(few, 4) == fingerprint(shingle_hashes(few, 4))
    assert shingle_simhash(np.zeros(0, dtype=np.uint64), 4) == 0


@pytest.mark.shared_data
def test_real_pairs_recall_and_noise(det, real):
    flagged = Counter()
    for p, _, _, a, b in real:
        flagged[p["label"], det.compare(a, b).changed] += 1
    text_changed = flagged["text_changed", True] + flagged["text_changed", False]
    markup_only = flagged["markup_only", True] + flagged["markup_only", False]
    assert text_changed == 99 and markup_only == 35
    assert flagged["text_changed", True] / text_changed >= 0.9
    assert flagged["markup_only", False] / markup_only >= 0.6


@pytest.mark.shared_data
def test_real_pages_never_changed_against_themselves(det, real):
    for p, old, new, a, b in real:
        for sig, body in ((a, old), (b, new)):
            again = det.signature(body, p["source_url"], "text/html")
            assert again == sig
            assert det.compare(sig, again) == ChangeResult(False, 0, 0, 0, 0, 0), p["id"]
            # Same content, different bytes object and different noise hash: still same elements.
            assert (
                det.compare(
                    Signature("html", b"x" * 16, sig.simhash, sig.keys, sig.texts, sig.attrs), sig
                ).changed
                is False
            )


@pytest.mark.shared_data
def test_real_pages_round_trip_and_kind(real):
    for p, _, _, a, b in real:
        assert a.kind == b.kind == "html", p["id"]
        assert Signature.from_bytes(b.to_bytes()) == b


def test_identical_body_reuses_the_previous_signature_without_parsing():
    det = ChangeDetector()
    body = b"<html><body><p>one two three four five six</p></body></html>"
    first = det.signature(body, "https://example.com/", "text/html")
    again = det.signature(body, "https://example.com/", "text/html", previous=first)
    assert again is first
    other = det.signature(body + b"<p>x</p>", "https://example.com/", "text/html", previous=first)
    assert other is not first and other.content_hash != first.content_hash
