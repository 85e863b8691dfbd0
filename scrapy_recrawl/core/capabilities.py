"""The check of a plug-in class against what it declares, run once when it is loaded.

As pluggy checks each hook implementation against its specification when it is
registered: a plug-in class says which plug-in API version it targets
(``api_version``) and which capabilities it offers (``capabilities``, names of
:data:`scrapy_recrawl.core.plugins.PLUGIN_CAPABILITIES`); :func:`problems` compares the
class with the protocols behind those names and returns one line per mistake,
each naming the class and the method or capability at fault:

* a declared capability's method missing, or not callable the way the crawl calls
  it (:func:`inspect.signature`: the crawl's positional arguments must bind);
* a public method whose name is a near miss of a capability's method
  (:mod:`difflib`: ``colums`` for ``columns``), declared or not -- a typo the
  crawl would otherwise never call; helper methods of other names are fine;
* every method of a capability present but the capability not declared (the crawl
  calls only what is declared);
* no ``api_version``, or one this package does not speak; an unknown capability
  name; ``selects`` disagreeing with the ``selector`` declaration.

Pure Python (:mod:`inspect`, :mod:`difflib`): the protocols are handed in, so this
module knows no capability and imports neither Scrapy nor the rest of the package.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

#: how close a method name must be to a capability's to be taken for a typo of it
#: (difflib's ratio: ``colums``/``columns`` 0.92, ``pop_due``/``pop_dues`` 0.93;
#: ``cap``/``map`` 0.67 is not one)
NEAR_MISS = 0.8


def qualname(cls: Any) -> str:
    """``module.Class``: how a problem names the plug-in (as RECRAWL_PLUGINS does)."""
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def protocol_members(protocol: type) -> dict[str, inspect.Signature]:
    """The methods a protocol class defines itself (not ``object``'s), with the
    signature the crawl calls them by (``self`` / ``cls`` left out)."""
    out: dict[str, inspect.Signature] = {}
    for name, value in vars(protocol).items():
        if name.startswith("_"):
            continue
        func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if not inspect.isfunction(func):
            continue
        sig = inspect.signature(func)
        params = list(sig.parameters.values())
        if not isinstance(value, staticmethod) and params:
            params = params[1:]  # self / cls
        out[name] = sig.replace(parameters=params)
    return out


def is_classmethod(protocol: type, name: str) -> bool:
    return isinstance(inspect.getattr_static(protocol, name), (classmethod, staticmethod))


def _describe(name: str, sig: inspect.Signature) -> str:
    args = ", ".join(p.name for p in sig.parameters.values())
    return f"{name}({args})"


def _bindable(cls: type, name: str, call: inspect.Signature, *, on_class: bool) -> str | None:
    """Why ``cls.name`` cannot take the crawl's call ``call`` (None: it can)."""
    static = inspect.getattr_static(cls, name)
    if on_class and not isinstance(static, (classmethod, staticmethod)):
        return "is not a classmethod"
    attr = getattr(cls, name)
    if not callable(attr):
        return "is not a method"
    try:
        sig = inspect.signature(attr)
    except (TypeError, ValueError):
        return None  # a builtin or C method: nothing to check it against
    args: list[Any] = [None] * len(call.parameters)
    # a plain function looked up on the class still wants its instance first
    if not isinstance(static, (classmethod, staticmethod)) and inspect.isfunction(attr):
        args.insert(0, None)
    try:
        sig.bind(*args)
    except TypeError:
        return f"has the signature {sig}"
    return None


def problems(
    cls: Any,
    base: type,
    capabilities: Mapping[str, type],
    versions: Collection[str],
    *,
    attributes: Collection[str] = (),
    selector: str | None = None,
) -> list[str]:
    """What is wrong with the plug-in class ``cls``: one line each (empty: nothing).

    ``base``: the protocol of every plug-in class (its classmethods are checked as the
    capabilities' methods are); ``attributes``: the class attributes every plug-in
    must have; ``capabilities``: capability name -> protocol;
    ``versions``: the API versions this package speaks; ``selector``: the capability
    whose declaration ``cls.selects`` must agree with (None: not checked).
    """
    name = qualname(cls)
    out: list[str] = []
    say = out.append
    if not isinstance(cls, type):
        return [f"plug-in {name} is not a class"]

    spoken = ", ".join(repr(v) for v in sorted(versions))
    version = getattr(cls, "api_version", None)
    if version is None:
        say(f"plug-in {name} declares no api_version (this scrapy-recrawl speaks {spoken})")
    elif version not in versions:
        say(
            f"plug-in {name} targets plug-in API version {version!r}; this scrapy-recrawl "
            f"speaks {spoken}"
        )

    for attribute in attributes:
        if not hasattr(cls, attribute):
            say(f"plug-in {name} lacks the class attribute {attribute!r}")

    raw = getattr(cls, "capabilities", None)
    declared: list[str] = []
    meant: set[str] = set()  # known names an unknown one is a typo of: said with it
    if raw is None:
        # what its methods would offer: the declaration to write, so none goes uncalled
        offers = sorted(
            cap
            for cap, proto in capabilities.items()
            if (wanted := protocol_members(proto)) and all(hasattr(cls, m) for m in wanted)
        )
        fix = (
            f"it has the methods of {', '.join(map(repr, offers))}, never called without "
            f"capabilities = frozenset({{{', '.join(map(repr, offers))}}})"
            if offers
            else f"capabilities = () when it offers none of {', '.join(sorted(capabilities))}"
        )
        say(f"plug-in {name} declares no capabilities ({fix})")
    elif isinstance(raw, str) or not all(isinstance(c, str) for c in raw):
        say(f"plug-in {name}: capabilities must be a collection of names, not {raw!r}")
        raw = None  # unreadable: nothing more is said of what it declares
    else:
        for cap in raw:
            if cap in capabilities:
                declared.append(cap)
                continue
            close = difflib.get_close_matches(cap, list(capabilities), n=1)
            meant.update(close)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            say(
                f"plug-in {name} declares the unknown capability {cap!r}{hint}; known: "
                f"{', '.join(sorted(capabilities))}"
            )

    members = {cap: protocol_members(proto) for cap, proto in capabilities.items()}
    every = {m for ms in members.values() for m in ms} | set(protocol_members(base))
    every |= set(getattr(base, "__annotations__", {}))
    public = [
        m
        for m in dir(cls)
        if not m.startswith("_") and m not in every and callable(getattr(cls, m, None))
    ]
    # near misses, each told once, against the member it is closest to
    missed: dict[str, str] = {}
    for m in public:
        close = difflib.get_close_matches(m, sorted(every), n=1, cutoff=NEAR_MISS)
        if close:
            missed[close[0]] = m

    def check(cap: str | None, proto: type, wanted: Mapping[str, inspect.Signature]) -> None:
        where = "" if cap is None else f" of the {cap!r} capability"
        for member, call in wanted.items():
            if not hasattr(cls, member):
                typo = missed.pop(member, None)
                hint = f"; it has {typo}(): a misspelling?" if typo else ""
                say(f"plug-in {name} lacks {_describe(member, call)}{where}{hint}")
                continue
            why = _bindable(cls, member, call, on_class=is_classmethod(proto, member))
            if why is not None:
                say(
                    f"plug-in {name}: {member}(){where} {why}; the crawl calls "
                    f"{_describe(member, call)}"
                )

    check(None, base, protocol_members(base))
    for cap in declared:
        check(cap, capabilities[cap], members[cap])
    for cap, wanted in members.items():
        if cap in declared or cap in meant or raw is None or not wanted:
            continue
        if all(hasattr(cls, m) for m in wanted):
            say(
                f"plug-in {name} has {', '.join(f'{m}()' for m in wanted)} but does not "
                f"declare {cap!r} in its capabilities: the crawl never calls them"
            )
    for member, typo in sorted(missed.items()):
        owner = next((c for c, ms in members.items() if member in ms), None)
        where = "" if owner is None else f" of the {owner!r} capability"
        say(f"plug-in {name}: {typo}() looks like a misspelling of {member}(){where}")

    if selector is not None and raw is not None and selector in capabilities:
        selects = bool(getattr(cls, "selects", False))
        if selects != (selector in declared):
            say(
                f"plug-in {name}: selects = {selects} but {selector!r} is "
                f"{'not ' if selects else ''}in its capabilities; they must agree"
            )
    return out


def check_all(classes: Collection[Any], check: Callable[[Any], list[str]]) -> list[str]:
    """The problems of several classes, in order (a class listed twice said once)."""
    seen: set[int] = set()
    out: list[str] = []
    for cls in classes:
        if id(cls) not in seen:
            seen.add(id(cls))
            out.extend(check(cls))
    return out
