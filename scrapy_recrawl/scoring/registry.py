"""The terminal registry: each terminal defined once, and everything that names one reads it.

A :class:`Terminal` (defined in :mod:`~scrapy_recrawl.scoring.terminals`) is a
name, a doc line, how it is computed from the per-URL columns, and who adds
those columns (the store, or a plug-in). The scorer's parser (its symbol
whitelist and its "unknown name" message), the crawl (:func:`compute_terminals`,
through the scorer), the replays, the GP's terminal sets and the docs' table
all read it.

This module knows the core terminals only (:func:`core_registry`: the store's
columns', the policies', the pooled priors'). A plug-in declares its own in the
``terminals`` attribute of its class (:class:`scrapy_recrawl.core.plugins.RecrawlPlugin`);
the layer that loads the plug-ins by path (``RECRAWL_PLUGINS_BASE`` and
``RECRAWL_PLUGINS``), :mod:`scrapy_recrawl.plugin_terminals`, adds them to a copy
(:meth:`TerminalRegistry.register_plugin`). So building a scorer of core terminals
imports neither Scrapy nor a paper's package, and a third-party package adds a
terminal without touching this one.
"""

from __future__ import annotations

import dataclasses
import functools
import keyword
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ..settings import closest
from .parse import RESERVED
from .policies import (
    BURST_TAU,
    NUTCH_DEFAULTS,
    POLICY_TERMINALS,
    burst_tau,
    burst_terminal,
    nutch_parameters,
    nutch_terminal,
)
from .pooled import POOLED_TERMINALS
from .terminals import (
    BUDGET,
    CORE_TERMINALS,
    DEFAULT_PRIOR,
    Terminal,
    check_prior,
    optional_column,
)

__all__ = [
    "Terminal",
    "TerminalRegistry",
    "compute_terminals",
    "core_registry",
    "core_registry_from_settings",
    "optional_column",
]


class TerminalRegistry:
    """The terminals a scorer may use, in registration order (the core's, then each
    plug-in's in the settings' order)."""

    def __init__(self, terminals: Iterable[Terminal] = ()) -> None:
        self._terminals: dict[str, Terminal] = {}
        for t in terminals:
            self.register(t)

    def register(self, terminal: Terminal) -> None:
        """Add ``terminal``; a duplicate, a reserved or a non-identifier name: ValueError."""
        if not isinstance(terminal, Terminal):
            raise ValueError(f"{terminal!r} is not a scoring.registry.Terminal")
        name = terminal.name
        # RESERVED: a function's name, or one sympy's parser calls
        if not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED:
            raise ValueError(f"terminal name {name!r}: not a usable symbol")
        known = self._terminals.get(name)
        if known is not None and known != terminal:
            raise ValueError(
                f"terminal {name!r} is defined twice ({known.provider or 'the core'} and "
                f"{terminal.provider or 'the core'})"
            )
        self._terminals[name] = terminal

    def register_plugin(self, provider: str, terminals: Iterable[Any]) -> None:
        """Add the terminals a plug-in declares, each stamped with ``provider`` (the path
        it was listed under); ValueError naming the first one that is no :class:`Terminal`
        or cannot be registered (:meth:`register`)."""
        for terminal in terminals:
            if not isinstance(terminal, Terminal):
                raise ValueError(
                    f"{provider}.terminals holds {terminal!r}; expected "
                    "scrapy_recrawl.scoring.registry.Terminal objects"
                )
            self.register(dataclasses.replace(terminal, provider=provider))

    def copy(self) -> TerminalRegistry:
        """A registry of the same terminals, to add others to (a shared one stays as it is)."""
        return TerminalRegistry(self._terminals.values())

    def __contains__(self, name: object) -> bool:
        return name in self._terminals

    def __iter__(self) -> Iterator[str]:
        return iter(self._terminals)

    def __len__(self) -> int:
        return len(self._terminals)

    def __repr__(self) -> str:
        return f"<TerminalRegistry {', '.join(self._terminals)}>"

    def get(self, name: str) -> Terminal:
        """The terminal ``name``; ValueError with :meth:`unknown`'s message if there is none."""
        try:
            return self._terminals[name]
        except KeyError:
            raise ValueError(self.unknown(name)) from None

    def names(self) -> frozenset[str]:
        return frozenset(self._terminals)

    def prior_names(self) -> frozenset[str]:
        """The terminals that depend on RECRAWL_PRIOR."""
        return frozenset(n for n, t in self._terminals.items() if t.uses_prior)

    def clock_names(self) -> frozenset[str]:
        """The terminals that need the wall clock (``now``)."""
        return frozenset(n for n, t in self._terminals.items() if t.needs_now)

    def providers(self, names: Iterable[str]) -> dict[str, str]:
        """``{terminal: plug-in path}`` for those of ``names`` a plug-in adds."""
        return {
            n: t.provider
            for n in names
            if (t := self._terminals.get(n)) is not None and t.provider is not None
        }

    def suggest(self, name: str) -> str | None:
        """The known terminal closest to ``name`` (same letters in another case first,
        then :func:`~scrapy_recrawl.settings.closest`), or None."""
        same = [n for n in self._terminals if n.lower() == name.lower()]
        return same[0] if same else closest(name, self._terminals)

    def unknown(self, name: str) -> str:
        """The message for an unknown terminal: the closest known one, then all of them."""
        close = self.suggest(name)
        hint = f" (did you mean {close!r}?)" if close else ""
        return f"unknown terminal {name!r}{hint}; known: {', '.join(self._terminals)}"

    def compute(
        self,
        state: Mapping[str, np.ndarray],
        cycle: int,
        now: float | None = None,
        prior: tuple[float, float] | None = None,
        needed: Iterable[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """:func:`compute_terminals` with this registry's terminals."""
        if needed is None:
            clock = frozenset() if now is not None else self.clock_names()
            budgeted = BUDGET in state  # a cycle's (core/selection.py: with_budget)
            want = [
                n
                for n, t in self._terminals.items()
                if n not in clock and (budgeted or not t.needs_budget)
            ]
        else:
            wanted = set(needed)
            unknown = sorted(wanted - self._terminals.keys())
            if unknown:
                raise ValueError(self.unknown(unknown[0]))
            want = [n for n in self._terminals if n in wanted]
        a, b = DEFAULT_PRIOR if prior is None else check_prior(prior)
        cache: dict[str, np.ndarray] = {}
        terminals = self._terminals

        def get(name: str) -> np.ndarray:
            if name not in cache:
                cache[name] = terminals[name].compute(state, cycle, now, a, b, get)
            return cache[name]

        return {name: get(name) for name in want}

    def markdown_table(self) -> str:
        """The docs' table of terminals (docs/scorers.md holds exactly this)."""
        rows = ["| terminal | meaning | columns from |", "|---|---|---|"]
        for t in self._terminals.values():
            source = f"`{t.provider}`" if t.provider else "the history store"
            doc = t.doc.replace("|", "\\|")
            rows.append(f"| `{t.name}` | {doc} | {source} |")
        return "\n".join(rows) + "\n"


# ------------------------------------------------------------------ the core's


def _core(nutch: Mapping[str, float] | None, burst: float | None) -> TerminalRegistry:
    made = {"nutch_interval": nutch_terminal(nutch), "burst": burst_terminal(burst)}
    policies = [made.get(t.name, t) for t in POLICY_TERMINALS]
    return TerminalRegistry((*CORE_TERMINALS, *policies, *POOLED_TERMINALS))


@functools.lru_cache(maxsize=1)
def _default_core() -> TerminalRegistry:
    return _core(None, None)


def core_registry(
    nutch: Mapping[str, float] | None = None, burst: float | None = None
) -> TerminalRegistry:
    """The core terminals: the store's columns', the policies' (scoring/policies.py) and
    the pooled priors' (scoring/pooled.py); no plug-in's. ``nutch``: RECRAWL_NUTCH_*'s
    numbers for ``nutch_interval`` (None: Nutch's defaults); ``burst``:
    RECRAWL_BURST_TAU for ``burst`` (None: its default).

    With both None it is shared (cached): treat it as read-only, :meth:`~TerminalRegistry.copy`
    it to add a plug-in's terminals."""
    if nutch is None and burst is None:
        return _default_core()
    return _core(nutch, burst)


def core_registry_from_settings(settings: Any) -> TerminalRegistry:
    """:func:`core_registry` with these settings' RECRAWL_NUTCH_* and RECRAWL_BURST_TAU,
    each checked (RecrawlSettingError naming it; ``settings`` None: the defaults).

    The plug-ins' terminals are not here: the layer that loads the plug-ins adds them
    (:func:`scrapy_recrawl.plugin_terminals.registry_from_settings`)."""
    # checked whatever the scorer: start-up fails early
    nutch, tau = nutch_parameters(settings), burst_tau(settings)
    if nutch == NUTCH_DEFAULTS and tau == BURST_TAU:
        return _default_core()
    return _core(nutch, tau)


def compute_terminals(
    state: Mapping[str, np.ndarray],
    cycle: int,
    now: float | None = None,
    prior: tuple[float, float] | None = None,
    needed: Iterable[str] | None = None,
    registry: TerminalRegistry | None = None,
) -> dict[str, np.ndarray]:
    """Terminals (float64 arrays over URLs) from the store's per-URL state.

    ``state`` has ``n``, ``X``, ``sad``, ``aad_sum``, ``gad`` (history/state.py),
    ``last_visit_cycle``, ``last_visit_time`` (unix seconds) and optionally
    ``D``, ``A``, ``R``, ``M`` and the columns plug-ins add. ``cycle`` is the
    current cycle, ``now`` the current unix time (for the terminals that need
    the clock). ``prior`` is ``(a, b)`` for the ``...p`` terminals (None:
    :data:`~scrapy_recrawl.scoring.terminals.DEFAULT_PRIOR`). Only the terminals
    in ``needed`` are computed (None: all of the registry's, except those needing
    ``now`` when it is None and those needing the cycle's budget when ``state`` has no
    :data:`~scrapy_recrawl.scoring.terminals.BUDGET` entry). ``registry``: :func:`core_registry`
    if None (a scorer's :meth:`~scrapy_recrawl.scoring.Scorer.terminals` passes its own).
    """
    reg = core_registry() if registry is None else registry
    return reg.compute(state, cycle, now, prior=prior, needed=needed)
