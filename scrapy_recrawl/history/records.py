"""Plain-data encodings for what plug-ins keep in a store's side storage.

Side storage holds bytes, never pickles: a store that others can write (Redis)
is never a place to run code from. Two encodings serve every plug-in and every
backend, and the schema migrations:

* a **list** of byte strings, each prefixed by its length (u32 little-endian),
  newest first: what :meth:`HistoryStore.side_push` keeps;
* a **record**, a flat mapping of field names to None, int, float, str or
  bytes, tagged by type (:func:`pack_record` / :func:`unpack_record`).

Also here: the change window of each URL, decoded from the packed int a record
keeps (``cwin``: history/state.py, push_window), which both backends answer
:meth:`HistoryStore.change_window` with; and computed from a visit log, which the
migration to schema version 7 packs into each SQLite row.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

import numpy as np

_LEN = struct.Struct("<I")
_NAME = struct.Struct("<B")
_INT = struct.Struct("<q")
_FLOAT = struct.Struct("<d")
_TAGS = {type(None): 0, int: 1, float: 2, bytes: 3, str: 4}

RecordValue = None | int | float | bytes | str


class RecordError(ValueError):
    """Bytes that are not a record or a list of this module's encoding."""


def pack_list(items: Iterable[bytes]) -> bytes:
    return b"".join(_LEN.pack(len(item)) + item for item in items)


def unpack_list(data: bytes | None) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    data = data or b""
    while pos < len(data):
        if pos + 4 > len(data):
            raise RecordError("a truncated list in side storage")
        (n,) = _LEN.unpack_from(data, pos)
        if pos + 4 + n > len(data):
            raise RecordError("a truncated list in side storage")
        out.append(bytes(data[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return out


def pack_record(fields: Mapping[str, RecordValue]) -> bytes:
    out = [_LEN.pack(len(fields))]
    for name, value in fields.items():
        key = name.encode()
        tag = _TAGS.get(type(value))
        if tag is None and isinstance(value, (np.integer, bool)):
            value, tag = int(value), 1
        elif tag is None and isinstance(value, np.floating):
            value, tag = float(value), 2
        elif tag is None and isinstance(value, (bytearray, memoryview)):
            value, tag = bytes(value), 3
        if tag is None or len(key) > 255:
            raise RecordError(f"field {name!r}: {type(value).__name__} cannot go in a record")
        out += [_NAME.pack(len(key)), key, bytes([tag])]
        if tag == 1:
            out.append(_INT.pack(value))  # type: ignore[arg-type]
        elif tag == 2:
            out.append(_FLOAT.pack(value))  # type: ignore[arg-type]
        elif tag in (3, 4):
            raw = value.encode() if isinstance(value, str) else value
            assert isinstance(raw, bytes)
            out += [_LEN.pack(len(raw)), raw]
    return b"".join(out)  # type: ignore[arg-type]


def unpack_record(data: bytes) -> dict[str, RecordValue]:
    try:
        (count,) = _LEN.unpack_from(data, 0)
        pos, out = 4, {}
        for _ in range(count):
            (n,) = _NAME.unpack_from(data, pos)
            name = data[pos + 1 : pos + 1 + n].decode()
            tag = data[pos + 1 + n]
            pos += 2 + n
            value: RecordValue
            if tag == 0:
                value = None
            elif tag == 1:
                (value,) = _INT.unpack_from(data, pos)
                pos += 8
            elif tag == 2:
                (value,) = _FLOAT.unpack_from(data, pos)
                pos += 8
            elif tag in (3, 4):
                (size,) = _LEN.unpack_from(data, pos)
                raw = bytes(data[pos + 4 : pos + 4 + size])
                if len(raw) != size:
                    raise RecordError("a truncated record in side storage")
                value = raw.decode() if tag == 4 else raw
                pos += 4 + size
            else:
                raise RecordError(f"unknown field type {tag} in a side-storage record")
            out[name] = value
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise RecordError(f"not a side-storage record: {exc}") from None
    return out


def window_from_log(
    ids: np.ndarray, url_id: np.ndarray, changed: np.ndarray, window: int
) -> np.ndarray:
    """The last ``window`` change observations of the URLs ``ids`` from a visit log
    (oldest first; ``changed`` -1 = not an observation): ``[len(ids), window]``
    of 1/0, newest first, NaN where there is none."""
    out = np.full((len(ids), window), np.nan)
    obs = np.asarray(changed) >= 0
    u, ch = np.asarray(url_id)[obs], np.asarray(changed)[obs].astype(np.float64)
    if u.size == 0:
        return out
    # newest first per URL: stable sort on url of the reversed log
    rev = np.arange(u.size)[::-1]
    order = rev[np.argsort(u[rev], kind="stable")]
    su, sc = u[order], ch[order]
    start = np.searchsorted(su, su, side="left")
    rank = np.arange(su.size) - start
    keep = rank < window
    row_of = {int(v): r for r, v in enumerate(np.asarray(ids))}
    rows = np.fromiter((row_of.get(int(v), -1) for v in su[keep]), np.int64, int(keep.sum()))
    ok = rows >= 0
    out[rows[ok], rank[keep][ok]] = sc[keep][ok]
    return out


def window_from_bits(cwin: np.ndarray, window: int) -> np.ndarray:
    """``[len(cwin), window]`` of 1/0, newest first, NaN where there is none, from each
    URL's packed window (count * 32 + indicators, newest in bit 0)."""
    cw = np.asarray(cwin, dtype=np.int64)
    count, bits = cw >> 5, cw & 31
    out = np.full((len(cw), window), np.nan)
    for i in range(window):
        out[:, i] = np.where(count > i, (bits >> i) & 1, np.nan)
    return out


def pack_window(win: np.ndarray) -> np.ndarray:
    """Each row of ``[urls, <= 5]`` (1/0 newest first, NaN after the last one) packed as
    :func:`window_from_bits` reads it."""
    seen = ~np.isnan(win)
    count = seen.sum(axis=1).astype(np.int64)
    weights = np.int64(1) << np.arange(win.shape[1], dtype=np.int64)
    bits = (np.where(seen, win, 0).astype(np.int64) * weights).sum(axis=1)
    return count << 5 | bits


def check_table(table: str) -> str:
    """A side-storage table name: a plug-in's namespace, ``[a-z][a-z0-9_]{0,39}``."""
    ok = (
        isinstance(table, str)
        and 0 < len(table) <= 40
        and table[0].isascii()
        and table[0].islower()
        and all(c.isascii() and (c.islower() or c.isdigit() or c == "_") for c in table)
    )
    if not ok:
        raise ValueError(f"side-storage table {table!r}: expected [a-z][a-z0-9_]{{0,39}}")
    return table
