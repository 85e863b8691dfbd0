"""not_modified.kept_headers: the kept copy's headers handed to the spider on a 304."""

from __future__ import annotations

from scrapy.http import Headers

from scrapy_recrawl.history import StoredBody
from scrapy_recrawl.not_modified import kept_headers
from scrapy_recrawl.visit_recorder import _headers_to_dict


def stored(headers):
    return StoredBody(status=200, headers=headers, body=b"<p>a</p>")


def test_as_headers_makes_them():
    raw = {
        "Content-Type": ["text/html; charset=utf-8"],
        "ETag": ['"abc"'],
        "set-cookie": ["a=1", "b=2"],
        "X-Sim-Day": ["0"],
    }
    got, want = kept_headers(stored(raw)), Headers(raw)
    assert type(got) is Headers and got.encoding == want.encoding
    assert dict(got) == dict(want)
    assert got.getlist("Set-Cookie") == [b"a=1", b"b=2"] and got["etag"] == b'"abc"'


def test_the_bytes_the_response_had():
    """The store keeps a value decoded as latin-1: the spider gets its bytes back (Headers
    would encode the text as UTF-8: two bytes for one)."""
    sent = Headers({b"Content-Disposition": [b'attachment; filename="caf\xe9.html"']})
    got = kept_headers(stored(_headers_to_dict(sent)))
    assert got[b"Content-Disposition"] == b'attachment; filename="caf\xe9.html"'


def test_names_equal_but_for_case_are_one_header():
    got = kept_headers(stored({"x-a": ["1"], "X-A": ["2"]}))
    assert got.getlist("X-A") == [b"1", b"2"]


def test_other_values_go_through_headers():
    got = kept_headers(stored({"Age": [3], "X-Note": ["\u20ac"]}))
    assert dict(got) == dict(Headers({"Age": [3], "X-Note": ["\u20ac"]}))


def test_a_value_that_is_not_a_list_goes_through_headers():
    """A store written by hand may hold a header's value as one string."""
    got = kept_headers(stored({"Content-Type": "text/html", "X-A": ["1"]}))
    assert dict(got) == dict(Headers({"Content-Type": "text/html", "X-A": ["1"]}))
    assert got.getlist("Content-Type") == [b"text/html"]
