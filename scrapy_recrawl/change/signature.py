"""What is kept of one response and what a comparison returns: :class:`Signature` (its
versioned bytes), :class:`ChangeResult`, and :class:`Ignore` (the learned boilerplate a
comparison leaves out, :func:`leave_out`). Values only: the detector
(:mod:`.detector`) makes and compares them."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bow import Bag

_U64 = np.uint64
_LE_U64 = np.dtype("<u8")


def _empty() -> np.ndarray:
    return np.zeros(0, dtype=_U64)


def _frozen_u64(a: Any) -> np.ndarray:
    arr = np.array(a, dtype=_U64, copy=True).reshape(-1)
    arr.flags.writeable = False
    return arr


#: the element arrays of a signature without elements (read-only, shared by all of them)
_NO_ELEMENTS = _frozen_u64(())


class SignatureVersionError(ValueError):
    """A stored signature from another version of the hashing: sign the page again."""


@dataclass(frozen=True, eq=False)
class Signature:
    """What is remembered of one response, to compare with the next one.

    ``keys``, ``texts`` and ``attrs`` are the element signature: one uint64
    per element (tag-path hash, own-text hash, attributes hash), sorted by key
    and in document order within a key; empty for ``kind == "bytes"``. The
    page's data parts (``<meta content>``, JSON script leaves, ``data-*``
    values; :mod:`.elements`) are entries too, with ``attrs`` 0.
    Arrays are read-only. Serialise with :meth:`to_bytes` (no pickle).
    """

    kind: str  #: "html" or "bytes"
    content_hash: bytes  #: xxh3-128 of the raw body (always present)
    simhash: int | None  #: unsigned 64-bit simhash of the visible text (html only)
    keys: np.ndarray = field(default_factory=_empty)
    texts: np.ndarray = field(default_factory=_empty)
    attrs: np.ndarray = field(default_factory=_empty)
    #: the version's bag of words (paper 004): in memory only, never in to_bytes/__eq__;
    #: set when the detector keeps bags (RECRAWL_CHANGE_TEST = "chi2", the D* terminals)
    bag: Bag | None = field(default=None, repr=False, compare=False)
    #: a hash of the signing rules it was made under (:attr:`ChangeDetector.rules`:
    #: RECRAWL_IGNORE_XPATHS, the shingle size, the parse limit); None: unknown (a
    #: signature built by hand), taken as made under the comparing detector's rules
    rules: int | None = None

    _MAGIC = b"RCSG"
    #: 5: the data parts (``<meta content>``, JSON-LD / ``__NEXT_DATA__`` / other JSON
    #: script leaves, ``data-*`` attributes of elements with text, the text past the
    #: parser's depth limit) are entries of their own, and pages are parsed past 256
    #: nesting levels (same layout, other hashes: a version-4 signature is made again);
    #: 4: the rules hash, and the text of a ``<time datetime>`` is not read (the
    #: attribute is the date; the text, "3 hours ago", moves every day);
    #: 3: text and attribute values hashed as parsed (version 2 hashed the XML
    #: serialisation, with ``&amp;`` etc.; version 1 older hashing). Older
    #: versions raise :class:`SignatureVersionError` (the middleware then signs
    #: the stored body again).
    _VERSION = 5
    #: "deferred": only the content hash of a body kept in the store; the full
    #: signature is made from that stored body if a later visit differs
    _KINDS = ("html", "bytes", "deferred")

    def __post_init__(self) -> None:
        if self.kind not in self._KINDS:
            raise ValueError(
                f"Signature.kind must be 'html', 'bytes' or 'deferred', not {self.kind!r}"
            )
        if not isinstance(self.content_hash, bytes) or not 0 < len(self.content_hash) < 256:
            raise ValueError("Signature.content_hash must be 1..255 bytes")
        if self.simhash is not None and not 0 <= self.simhash < 1 << 64:
            raise ValueError("Signature.simhash must be an unsigned 64-bit integer or None")
        if self.rules is not None and not 0 <= self.rules < 1 << 64:
            raise ValueError("Signature.rules must be an unsigned 64-bit integer or None")
        for name in ("keys", "texts", "attrs"):
            object.__setattr__(self, name, _frozen_u64(getattr(self, name)))
        if not len(self.keys) == len(self.texts) == len(self.attrs):
            raise ValueError("Signature.keys, texts and attrs must have the same length")

    @classmethod
    def of_page(
        cls,
        content_hash: bytes,
        simhash: int,
        keys: np.ndarray,
        texts: np.ndarray,
        attrs: np.ndarray,
        bag: Bag | None,
        rules: int,
    ) -> Signature:
        """An HTML signature of arrays the detector has just made (``_walk.sign``: uint64,
        one dimension, the same length, read-only and referenced nowhere else): the
        same object the constructor makes, without its checks and copies (a page's
        signature is made on every changed response)."""
        return cls._made(
            kind="html",
            content_hash=content_hash,
            simhash=simhash,
            keys=keys,
            texts=texts,
            attrs=attrs,
            bag=bag,
            rules=rules,
        )

    @classmethod
    def deferred_of(cls, content_hash: bytes) -> Signature:
        """A deferred signature (content hash only): the constructor's object without its
        checks and three new empty arrays (every first fetch of a kept body makes one)."""
        if not isinstance(content_hash, bytes) or not 0 < len(content_hash) < 256:
            raise ValueError("Signature.content_hash must be 1..255 bytes")
        return cls._made(
            kind="deferred",
            content_hash=content_hash,
            simhash=None,
            keys=_NO_ELEMENTS,
            texts=_NO_ELEMENTS,
            attrs=_NO_ELEMENTS,
            bag=None,
            rules=None,
        )

    @classmethod
    def _made(cls, **fields: Any) -> Signature:
        """The object of ``fields`` (every field), as the constructor would make it once
        its checks and copies passed: for the callers above, whose values need neither."""
        sig = object.__new__(cls)
        sig.__dict__.update(fields)
        return sig

    def __len__(self) -> int:
        """Number of elements in the element signature."""
        return len(self.keys)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Signature):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.content_hash == other.content_hash
            and self.simhash == other.simhash
            and self.rules == other.rules
            and np.array_equal(self.keys, other.keys)
            and np.array_equal(self.texts, other.texts)
            and np.array_equal(self.attrs, other.attrs)
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.content_hash, self.simhash, len(self.keys)))

    def to_bytes(self) -> bytes:
        """Versioned little-endian binary form.

        Layout (versions 4 and 5): ``b"RCSG"``, version u8, kind u8 (0 html, 1 bytes,
        2 deferred), flags u8 (bit 0: simhash present, bit 1: rules present), hash
        length u8, the content hash, the simhash as u64 if present, the rules hash as
        u64 if present, element count u32, then keys, texts and attrs as ``count``
        u64 each. 24 bytes per element.
        """
        has_sim = self.simhash is not None
        has_rules = self.rules is not None
        head = struct.pack(
            "<4sBBBB",
            self._MAGIC,
            self._VERSION,
            self._KINDS.index(self.kind),
            (1 if has_sim else 0) | (2 if has_rules else 0),
            len(self.content_hash),
        )
        parts = [head, self.content_hash]
        if has_sim:
            parts.append(struct.pack("<Q", self.simhash))
        if has_rules:
            parts.append(struct.pack("<Q", self.rules))
        parts.append(struct.pack("<I", len(self.keys)))
        if len(self.keys):  # none: a deferred or bytes signature, no arrays to write
            parts.extend(
                a.astype(_LE_U64, copy=False).tobytes() for a in (self.keys, self.texts, self.attrs)
            )
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> Signature:
        """Inverse of :meth:`to_bytes`; ``ValueError`` on anything else."""
        data = bytes(data)
        try:
            magic, version, kind, flags, hlen = struct.unpack_from("<4sBBBB", data, 0)
        except struct.error:
            raise ValueError("not a Signature: too short") from None
        if magic != cls._MAGIC:
            raise ValueError("not a Signature: bad magic")
        if version != cls._VERSION:
            raise SignatureVersionError(
                f"Signature version {version}, this scrapy-recrawl reads {cls._VERSION}"
            )
        if kind >= len(cls._KINDS):
            raise ValueError(f"bad Signature kind {kind}")
        pos = 8
        content_hash = data[pos : pos + hlen]
        pos += hlen
        try:
            simhash = rules = None
            if flags & 1:
                (simhash,) = struct.unpack_from("<Q", data, pos)
                pos += 8
            if flags & 2:
                (rules,) = struct.unpack_from("<Q", data, pos)
                pos += 8
            (count,) = struct.unpack_from("<I", data, pos)
            pos += 4
        except struct.error:
            raise ValueError("truncated Signature") from None
        if len(content_hash) != hlen or len(data) != pos + 24 * count:
            raise ValueError("truncated or oversized Signature")
        arrays = np.frombuffer(data, dtype=_LE_U64, count=3 * count, offset=pos).reshape(3, count)
        return cls(
            cls._KINDS[kind], content_hash, simhash, arrays[0], arrays[1], arrays[2], rules=rules
        )


@dataclass(frozen=True)
class Ignore:
    """What a comparison leaves out (the learned boilerplate, change/boilerplate.py):
    element keys (sorted uint64) whose elements are dropped (``text``) or compared
    without their attributes (``attrs``)."""

    text: np.ndarray
    attrs: np.ndarray

    def __bool__(self) -> bool:
        return bool(self.text.size or self.attrs.size)


@dataclass(frozen=True)
class ChangeResult:
    """Outcome of :meth:`ChangeDetector.compare` (see the module docstring for the rule)."""

    changed: bool
    distance: int  #: simhash Hamming distance (0 unless both sides are HTML)
    added: int
    removed: int
    modified: int  #: elements whose own text changed
    attributes: int  #: elements whose (non-noise) attributes changed

    @property
    def element_changes(self) -> int:
        """``added + removed + modified + attributes``."""
        return self.added + self.removed + self.modified + self.attributes


_UNCHANGED = ChangeResult(False, 0, 0, 0, 0, 0)


def _members(keys: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Which of ``keys`` are in ``sorted_set`` (both uint64; the set sorted, distinct)."""
    if sorted_set.size == 0 or keys.size == 0:
        return np.zeros(keys.size, dtype=bool)
    at = np.searchsorted(sorted_set, keys)
    at[at == sorted_set.size] = 0
    return sorted_set[at] == keys


_Triple = tuple[np.ndarray, np.ndarray, np.ndarray]


def leave_out(sig: _Triple, ignore: Ignore) -> tuple[_Triple, bool]:
    """``sig`` without its text-volatile elements and with the attribute-volatile ones'
    attributes blanked; and whether any text-volatile element was there."""
    keys, texts, attrs = sig
    drop = _members(keys, ignore.text)
    blank = _members(keys, ignore.attrs)
    dropped = bool(drop.any())
    if not dropped and not blank.any():
        return sig, False
    if blank.any():
        attrs = np.where(blank, np.uint64(0), attrs)
    if dropped:
        keep = ~drop
        keys, texts, attrs = keys[keep], texts[keep], attrs[keep]
    return (keys, texts, attrs), dropped
