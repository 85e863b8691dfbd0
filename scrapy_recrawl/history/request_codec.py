"""Requests as data: ``Request.to_dict()`` dicts to bytes and back, never a pickle.

Every stored request -- each URL's request in a history store (the recrawl is
rebuilt from it), the store's frontier, the Redis scheduler's queues -- goes
through this one codec; what a store keeps (:func:`encode_stored`) is scrubbed of
credentials first (:mod:`.request_scrub`). A store others can write (Redis) must never be a place
to run code from (CWE-502): a pickle read back from it runs whatever it names.

The bytes are **MessagePack**: it tells bytes from str natively (headers, bodies
and cookies are bytes, URLs and callback names str), so nothing is re-encoded
and the round trip is exact, and it is compact and fast (a C extension). Decoding
yields only dicts, lists, str, bytes, ints, floats, bools and None; an extension
type is refused. The decoded dict is then checked as data
(:func:`check_request`): known keys, each of its type; ``_class`` (a Request
subclass) only names a class already imported, never imports a module. A value
that fails raises :class:`RequestCodecError` naming the key at fault.
"""

from __future__ import annotations

import keyword
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from .request_scrub import scrub_request

#: Keys of ``Request.to_dict()`` (Scrapy's ``Request.attributes`` plus the callbacks'
#: names and ``_class``); a subclass named by ``_class`` may add its own attributes.
REQUEST_KEYS = frozenset(
    {
        "url",
        "callback",
        "errback",
        "method",
        "headers",
        "body",
        "cookies",
        "meta",
        "encoding",
        "priority",
        "dont_filter",
        "flags",
        "cb_kwargs",
        "_class",
    }
)

logger = logging.getLogger("scrapy_recrawl.history")

#: Nesting allowed in meta, cb_kwargs and cookies (deeper is not a request's data).
MAX_DEPTH = 32


class RequestCodecError(ValueError):
    """Bytes that are not a stored request, or a request that cannot be stored as data."""


def _refuse_ext(code: int, data: bytes) -> Any:
    raise RequestCodecError(f"a MessagePack extension type ({code}) is not request data")


def encode_request(d: Mapping[str, Any]) -> bytes:
    """The bytes of a ``Request.to_dict()`` dict; :class:`RequestCodecError` when some
    value is not plain data (an object in ``meta``, a set, ...), naming its key."""
    check_request(d)
    try:
        return msgpack.packb(d, use_bin_type=True, strict_types=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise RequestCodecError(
            f"the request of {d.get('url')!r} is not plain data: {exc}"
        ) from None


def decode_request(data: bytes) -> dict[str, Any]:
    """The request dict stored as ``data``, checked (:func:`check_request`)."""
    try:
        d = msgpack.unpackb(
            bytes(data), raw=False, strict_map_key=False, ext_hook=_refuse_ext, use_list=True
        )
    except RequestCodecError:
        raise
    except Exception as exc:  # noqa: BLE001 -- msgpack's errors (ExtraData, FormatError, ...)
        raise RequestCodecError(f"not a stored request ({type(exc).__name__}: {exc})") from None
    return check_request(d)


def decode_stored(data: bytes, where: str) -> dict[str, Any] | None:
    """:func:`decode_request`, or None and a warning naming ``where`` (the store and
    key) when the stored value is not a request: it is skipped, never run."""
    try:
        return decode_request(data)
    except RequestCodecError as exc:
        logger.warning("recrawl: %s is not a stored request, skipped: %s", where, exc)
        return None


def decode_stored_many(
    blobs: list[bytes | None], where: Callable[[int], str]
) -> list[dict[str, Any] | None]:
    """:func:`decode_stored` of each of ``blobs`` (None stays None): the same dicts and
    the same warnings (``where(i)`` names the ``i``-th value, made only for one that
    is skipped), at a fraction of the cost per value of calling it for each (a
    cycle's picks: ~500,000 at 10M URLs): one bound unpacker, the common request
    checked at once (:func:`_plainly_a_request`), the rest by :func:`decode_stored`."""
    unpackb = msgpack.unpackb
    plain = _plainly_a_request
    share = _share_strings
    out: list[dict[str, Any] | None] = []
    append = out.append
    for i, blob in enumerate(blobs):
        if blob is None:
            append(None)
            continue
        try:
            d = unpackb(blob, raw=False, strict_map_key=False, ext_hook=_refuse_ext)
        except Exception:  # noqa: BLE001 -- said, and skipped, by decode_stored below
            d = None
        if not plain(d):
            d = decode_stored(blob, where(i))
        if d is not None:
            share(d)
        append(d)
    return out


#: The str values of a request most requests repeat, each its one object (and None,
#: so that a missing callback needs no test): bounded, the values come from a store.
_SHARED: dict[str | None, str | None] = {None: None}
_SHARED_MAX = 4096


def _share_strings(d: dict[str, Any]) -> None:
    """Put in ``d`` the one object of its method, encoding, callback and errback values:
    MessagePack makes a new str for every value it reads (its map keys it interns), and
    a cycle's ~500,000 requests would each hold their own "GET", "utf-8" and "parse"
    (~160 B a request, 80 MB at 10M URLs). A str is immutable: the dicts are equal,
    and as much each caller's own as before. ``d`` passed :func:`check_request`: those
    four are str or None."""
    shared = _SHARED
    try:
        d["method"] = shared[d["method"]]
        d["encoding"] = shared[d["encoding"]]
        d["callback"] = shared[d["callback"]]
        d["errback"] = shared[d["errback"]]
    except KeyError:  # a value not seen yet, or a key the request does not have
        for key in ("method", "encoding", "callback", "errback"):
            value = d.get(key)
            if type(value) is str and (value in shared or len(shared) < _SHARED_MAX):
                d[key] = shared.setdefault(value, value)


_encode_warned = False


def encode_stored(d: Mapping[str, Any]) -> bytes | None:
    """:func:`encode_request` of the request scrubbed of what is never kept at rest
    (:func:`~.request_scrub.scrub_request`: credentials, cookies), or None (the caller
    keeps what it had) when the request is not plain data; said once per process, as
    it is usually every request of a kind."""
    global _encode_warned
    try:
        return encode_request(scrub_request(d))
    except RequestCodecError as exc:
        if not _encode_warned:
            _encode_warned = True
            logger.warning(
                "recrawl: cannot store %s for later recrawls (%s); a recrawl of such a URL "
                "reuses its last storable request, or is a GET of its URL (stored requests "
                "hold only plain data: docs/distributed.md)",
                d.get("url"),
                exc,
            )
        return None


#: Values taken as plain data at once by :func:`_plainly_data` (exact types, as
#: MessagePack decodes them).
_SCALARS = frozenset({type(None), bool, int, float, str, bytes})

#: Method names already checked (a spider has a few callbacks: each is checked once).
_METHOD_NAMES: set[str] = set()


def _plainly_data(value: Any) -> bool:
    """Whether ``value`` is at once seen to be plain data: a scalar, or a map or list
    of scalars (a map's keys str). Anything else (deeper, another type) is for
    :func:`check_request`'s full walk, which may still accept it. A str subclass is a
    str, as the walk has it: a CrawlSpider's ``link_text`` in meta is lxml's (every
    link a CrawlSpider follows went through the walk before)."""
    kind = type(value)
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str or (type(v) not in _SCALARS and not isinstance(v, str)):
                return False
        return True
    if kind is list:
        for v in value:
            if type(v) not in _SCALARS and not isinstance(v, str):
                return False
        return True
    return kind in _SCALARS or isinstance(value, str)


def _plainly_a_request(d: Any) -> bool:
    """Whether ``d`` is at once seen to pass :func:`check_request`: the common request
    (no ``_class``, known keys, exact types, shallow meta), checked with a few type
    tests instead of the full walk (a cycle decodes ~500,000 requests at 10M URLs).
    False says nothing: the full check decides."""
    if type(d) is not dict or not REQUEST_KEYS.issuperset(d) or "_class" in d:
        return False
    get = d.get
    if type(get("url")) is not str:
        return False
    for key in ("callback", "errback"):
        name = get(key)
        if name is not None and (type(name) is not str or name not in _METHOD_NAMES):
            return False
    if (
        type(get("method", "")) is not str
        or type(get("encoding", "")) is not str
        or type(get("body", b"")) is not bytes
        or type(get("priority", 0)) is not int
        or type(get("dont_filter", False)) is not bool
    ):
        return False
    headers = get("headers")
    if headers is not None:
        if type(headers) is not dict:
            return False
        for name, values in headers.items():
            if type(name) not in (bytes, str) or type(values) is not list:
                return False
            for v in values:
                if type(v) not in (bytes, str):
                    return False
    flags = get("flags")
    if flags:
        if type(flags) is not list:
            return False
        for f in flags:
            if type(f) is not str:
                return False
    elif flags is not None and type(flags) is not list:
        return False
    for key in ("meta", "cb_kwargs"):
        value = get(key)
        if value is not None and (type(value) is not dict or not _plainly_data(value)):
            return False
    cookies = get("cookies")
    return cookies is None or (type(cookies) in (dict, list) and _plainly_data(cookies))


def check_request(d: Any) -> dict[str, Any]:
    """``d`` if it is a request dict made only of data, else :class:`RequestCodecError`."""
    if _plainly_a_request(d):
        return d  # type: ignore[no-any-return]
    return _check_request_fully(d)


def _check_request_fully(d: Any) -> dict[str, Any]:
    """:func:`check_request`'s walk of every key and value (what the quick look,
    :func:`_plainly_a_request`, must never be more lenient than)."""
    if not isinstance(d, dict):
        raise RequestCodecError(f"a stored request is a map, not {type(d).__name__}")
    allowed = REQUEST_KEYS
    if "_class" in d:
        allowed = allowed | frozenset(_request_class(d["_class"]).attributes)
    for key in d:
        if not isinstance(key, str) or key not in allowed:
            raise RequestCodecError(f"unknown key {key!r} in a stored request")
    url = d.get("url")
    if not isinstance(url, str):
        raise RequestCodecError(f"'url' of a stored request is {type(url).__name__}, not str")
    for key in ("callback", "errback"):
        _check_method_name(key, d.get(key))
    for key, types in (
        ("method", str),
        ("encoding", str),
        ("body", bytes),
        ("priority", int),
        ("dont_filter", bool),
    ):
        if key in d and not isinstance(d[key], types):
            raise RequestCodecError(
                f"{key!r} of the stored request of {url!r}: not {types.__name__}"
            )
    if "priority" in d and isinstance(d["priority"], bool):
        raise RequestCodecError(f"'priority' of the stored request of {url!r}: not int")
    headers = d.get("headers")
    if headers is not None:
        if not isinstance(headers, dict):
            raise RequestCodecError(f"'headers' of the stored request of {url!r}: not a map")
        for name, values in headers.items():
            if not isinstance(name, (bytes, str)) or not (
                isinstance(values, list) and all(isinstance(v, (bytes, str)) for v in values)
            ):
                raise RequestCodecError(
                    f"'headers' of the stored request of {url!r}: {name!r} is not bytes -> "
                    "list of bytes"
                )
    flags = d.get("flags")
    if flags is not None and not (
        isinstance(flags, list) and all(isinstance(f, str) for f in flags)
    ):
        raise RequestCodecError(f"'flags' of the stored request of {url!r}: not a list of str")
    for key in ("meta", "cb_kwargs"):
        value = d.get(key)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise RequestCodecError(
                f"{key!r} of the stored request of {url!r}: not a str-keyed map"
            )
        _check_plain(value, f"{key!r} of the stored request of {url!r}", 0)
    if d.get("cookies") is not None:
        if not isinstance(d["cookies"], (dict, list)):
            raise RequestCodecError(
                f"'cookies' of the stored request of {url!r}: not a map or list"
            )
        _check_plain(d["cookies"], f"'cookies' of the stored request of {url!r}", 0)
    return d


def _check_method_name(key: str, name: Any) -> None:
    # a spider method's name: getattr(spider, name) must not reach dunders or anything else
    if name is None:
        return
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or keyword.iskeyword(name)
        or name.startswith("__")
    ):
        raise RequestCodecError(f"{key!r} of a stored request is not a method name: {name!r}")
    if type(name) is str and len(_METHOD_NAMES) < 1024:  # bounded: names from a store
        _METHOD_NAMES.add(name)


def _check_plain(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise RequestCodecError(f"{where}: nested deeper than {MAX_DEPTH}")
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(item, where, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, (str, bytes, int, float, bool)) and k is not None:
                raise RequestCodecError(f"{where}: a key of type {type(k).__name__}")
            _check_plain(v, where, depth + 1)
        return
    raise RequestCodecError(f"{where}: a {type(value).__name__} is not plain data")


#: the module and name of Scrapy's Request, the class every stored ``_class`` must be
_SCRAPY_REQUEST = ("scrapy.http.request", "Request")


def _request_class(path: Any) -> Any:
    """The Request subclass ``path`` names, if its module is already imported: a
    stored value never makes us import a module (an import runs its code). Scrapy's
    own Request is found the same way, among the modules already imported (this
    codec is plain data and imports no Scrapy): a Request subclass can only exist once
    Scrapy's request module is imported, so a process without it has none to name."""
    if not isinstance(path, str) or "." not in path:
        raise RequestCodecError(f"'_class' of a stored request is not a class path: {path!r}")
    module_name, _, name = path.rpartition(".")
    module = sys.modules.get(module_name)
    cls = getattr(module, name, None) if module is not None and name.isidentifier() else None
    scrapy_module = sys.modules.get(_SCRAPY_REQUEST[0])
    request = getattr(scrapy_module, _SCRAPY_REQUEST[1], None)
    if not (isinstance(cls, type) and isinstance(request, type) and issubclass(cls, request)):
        raise RequestCodecError(
            f"'_class' of a stored request is not a Request class already imported: {path!r}"
        )
    return cls
