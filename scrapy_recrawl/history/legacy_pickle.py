"""Reading the pickles of schema version 3 once, for the migration to version 4, safely.

Schema version 3 stored each URL's request dict and the frontier's entries as
pickles. The migration (``sqlite_schema._v4_requests_as_data``; the Redis store no
longer opens a store that old) re-encodes them as data
(:mod:`~scrapy_recrawl.history.request_codec`). It reads them with an unpickler
that refuses **every** global: no class, function or module can be named, so no
code runs -- only builtin containers and scalars (dict, list, tuple, set, str,
bytes, int, float, bool, None) decode. A value that needs a global (an object in
``meta``) fails and is dropped by the migration, counted in its warning. This is
the only module of the package that imports :mod:`pickle`.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from .request_codec import RequestCodecError, decode_request, encode_request

#: The side table of the loop-time basket classifier (estimate/probes.py): dropped by
#: the migration to version 4, since version 3 kept it as a pickle.
BASKET_MODEL_TABLE = "basket_model"

#: Said once by the migration to version 4 when it drops a pickled basket model.
MODEL_DROPPED = (
    "recrawl: the basket model kept in the history store %s was a pickle (schema "
    "version 3) and is never unpickled: it is dropped; retrain it with `scrapy "
    "recrawl-baskets` (RECRAWL_BASKET_MODEL)"
)

#: Said once by the migration to version 4 when some stored requests were not data.
REQUESTS_DROPPED = (
    "recrawl: %d stored request(s) of the history store %s needed code to be read "
    "(a pickled object, schema version 3) and were dropped: %d URL(s) will be "
    "recrawled as a GET of the URL, %d frontier entr(ies) are gone"
)


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # Every way a pickle names a callable (GLOBAL, STACK_GLOBAL, EXT*) ends here.
        raise pickle.UnpicklingError(f"a global ({module}.{name}) is refused")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("a persistent id is refused")


def restricted_loads(data: bytes) -> Any:
    """Unpickle ``data`` allowing no global at all; ``pickle.UnpicklingError`` (or
    another ``Exception``) when it needs one or is not a pickle."""
    return _NoGlobals(io.BytesIO(bytes(data))).load()


def reencode_request(blob: bytes) -> bytes | None:
    """A stored request as the codec's bytes: already data is kept as it is, a
    version-3 pickle is decoded without globals and re-encoded; None: it cannot be
    (it needs a global, or is not plain data), and is dropped by the caller."""
    try:
        decode_request(blob)
        return bytes(blob)  # written by this release already (a migration run twice)
    except RequestCodecError:
        pass
    try:
        d = restricted_loads(blob)
        return encode_request(_lists(d))
    except Exception:  # noqa: BLE001 -- whatever the old bytes were, they are not kept
        return None


def _lists(value: Any) -> Any:
    # tuples (and sets) unpickled from version 3 become lists, as MessagePack keeps them
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value
