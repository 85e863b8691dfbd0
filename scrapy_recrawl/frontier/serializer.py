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

__all__ = [
    "DEFAULT",
    "PICKLING",
    "RequestCodecError",
    "check_round_trip",
    "checked",
    "choose",
    "dumps",
    "loads",
]


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
    allow = get(settings, "RECRAWL_ALLOW_PICKLE")
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
    check_round_trip(serializer, named)
    return checked(serializer)


def _sample() -> dict[str, Any]:
    """A request as Scrapy hands one to the queues: bytes headers and body, meta,
    ``cb_kwargs`` (what scrapy-redis's documented ``json`` cannot encode)."""
    from scrapy import Request

    request = Request(
        "https://example.com/a?b=1",
        method="POST",
        headers={"Accept": "text/html", "X-Sample": ["1", "2"]},
        body=b"q=1",
        meta={"depth": 1},
        cb_kwargs={"page": 2},
        priority=3,
    )
    return request.to_dict()


def check_round_trip(serializer: Any, named: Any) -> None:
    """Refuse, at start-up, a serializer that cannot encode a Scrapy request and read it
    back unchanged: otherwise the first page's links are lost mid-crawl, each with a
    traceback. Raises RecrawlSettingError naming SCHEDULER_SERIALIZER."""
    sample = _sample()
    try:
        back = check_request(serializer.loads(serializer.dumps(sample)))
    except Exception as exc:  # noqa: BLE001 -- any failure of a user's serializer
        raise RecrawlSettingError(
            f"SCHEDULER_SERIALIZER={_name(named)!r} cannot encode a Scrapy request "
            f"({type(exc).__name__}: {exc}); leave it unset (requests as data)"
        ) from None
    if back != sample:
        changed = sorted(k for k in sample if back.get(k) != sample[k])
        raise RecrawlSettingError(
            f"SCHEDULER_SERIALIZER={_name(named)!r} does not read a Scrapy request back "
            f"as it was written (changed: {', '.join(changed) or 'keys'}); leave it unset "
            "(requests as data)"
        )


def _name(named: Any) -> str:
    return named if isinstance(named, str) else getattr(named, "__name__", repr(named))


def checked(serializer: Any) -> Any:
    """``serializer`` whose ``loads`` result is checked as a request dict."""
    return SimpleNamespace(
        __name__=getattr(serializer, "__name__", repr(serializer)),
        dumps=serializer.dumps,
        loads=lambda data: check_request(serializer.loads(data)),
    )
