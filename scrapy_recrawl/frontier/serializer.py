"""The Redis scheduler's queue serializer: requests as data, never a pickle.

scrapy-redis's queues call ``serializer.dumps(Request.to_dict())`` and
``request_from_dict(serializer.loads(bytes))``, and its default serializer (when
``SCHEDULER_SERIALIZER`` is unset) is a pickle: anyone who can write one value to
the shared Redis runs code in every crawler that pops it (CWE-502).
RedisRecrawlScheduler's default is this module instead -- the history store's own
codec (:mod:`scrapy_recrawl.history.request_codec`) -- and whatever serializer is
named, what it loads is checked as request data (:func:`checked`). A serializer
that pickles is refused at start-up unless ``RECRAWL_ALLOW_PICKLE`` is True
(:func:`choose`; docs/distributed.md).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from ..history.request_codec import RequestCodecError, check_request, decode_request, encode_request
from ..settings import RecrawlSettingError, get

#: The serializer RedisRecrawlScheduler uses when SCHEDULER_SERIALIZER is unset.
DEFAULT = "scrapy_recrawl.frontier.serializer"

#: Modules whose ``loads`` unpickles (or otherwise runs what it reads).
PICKLING = frozenset(
    {"pickle", "_pickle", "cPickle", "scrapy_redis.picklecompat", "dill", "cloudpickle", "marshal"}
)

__all__ = ["DEFAULT", "PICKLING", "RequestCodecError", "checked", "choose", "dumps", "loads"]


def dumps(obj: dict[str, Any]) -> bytes:
    return encode_request(obj)


def loads(data: bytes) -> dict[str, Any]:
    return decode_request(data)


def pickles(serializer: Any) -> bool:
    """Whether ``serializer`` (a module or object with loads/dumps) unpickles."""
    names = {getattr(serializer, "__name__", None)}
    loads_ = getattr(serializer, "loads", None)
    names.add(getattr(loads_, "__module__", None))
    return bool(names & PICKLING) or any(
        isinstance(n, str) and n.split(".")[0] in {"pickle", "dill", "cloudpickle"} for n in names
    )


def choose(settings: Any) -> Any:
    """The queues' serializer: ``SCHEDULER_SERIALIZER`` (a module path or an object with
    ``loads``/``dumps``), this module when unset; a pickling one only with
    ``RECRAWL_ALLOW_PICKLE = True``. Whatever it is, what it loads is checked as data."""
    allow = get(settings, "RECRAWL_ALLOW_PICKLE", bool)
    named = settings.get("SCHEDULER_SERIALIZER") or DEFAULT
    serializer = named
    if isinstance(named, str):
        try:
            serializer = importlib.import_module(named)
        except ImportError as exc:
            raise RecrawlSettingError(
                f"SCHEDULER_SERIALIZER={named!r}: cannot import it ({exc})"
            ) from None
    if not callable(getattr(serializer, "loads", None)) or not callable(
        getattr(serializer, "dumps", None)
    ):
        raise RecrawlSettingError(
            f"SCHEDULER_SERIALIZER={named!r}: expected a module with loads() and dumps()"
        )
    if serializer is importlib.import_module(__name__):
        return serializer
    if pickles(serializer) and not allow:
        raise RecrawlSettingError(
            f"SCHEDULER_SERIALIZER={named!r} unpickles what it reads from Redis: anyone who "
            "can write to that Redis would run code in every crawler (CWE-502). Leave "
            "SCHEDULER_SERIALIZER unset (requests as data), or set RECRAWL_ALLOW_PICKLE = True "
            "if only trusted processes can ever write to it"
        )
    return checked(serializer)


def checked(serializer: Any) -> Any:
    """``serializer`` whose ``loads`` result is checked as a request dict."""
    return SimpleNamespace(
        __name__=getattr(serializer, "__name__", repr(serializer)),
        dumps=serializer.dumps,
        loads=lambda data: check_request(serializer.loads(data)),
    )
