"""From a ``RECRAWL_SCORER`` value to a vectorised numpy scoring function.

User input is data, never code. An expression string is first split with
Python's :mod:`tokenize` and every token is checked against a whitelist
(terminal names, ``log exp pow sqrt Abs Min Max``, decimal numbers,
``+ - * / ** ^ ( ) ,``); only then does sympy's parser see it, with empty
builtins and a dictionary holding exactly those names. Anything else
(attribute access, unknown names, ``__import__``, ``lambda``, strings,
subscripts, keywords) is refused with a :class:`RecrawlSettingError` that
names the setting and the offending token.

The expression is parsed unevaluated (so ``X/X`` is not simplified to 1),
rewritten so that every division and ``log`` is *protected* as GP4C defines
them (Santos et al. 2015 sec. 4.2.1: 0 outside the domain), and compiled once
with :func:`sympy.lambdify` to numpy. :func:`pdiv` and :func:`plog` are the
definitions the GP engine uses too, so an evolved expression scores
identically in the crawl. Scores that are NaN or infinite rank last.

On float64 terminals (what :func:`compute_terminals` gives) scoring runs the
block kernel that :mod:`scrapy_recrawl.scoring.kernel` derives from that
generated code: the same operations in the same order, bit for bit, without
a full-size temporary per operation.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from scrapy_recrawl.scoring.kernel import Kernel, compile_kernel
from scrapy_recrawl.scoring.presets import PRESETS
from scrapy_recrawl.scoring.terminals import check_prior, prior_from_settings
from scrapy_recrawl.settings import DEFAULTS, RecrawlSettingError, closest, get

from . import preset_code
from .parse import SETTING, compile_expression, parse_expression
from .registry import (
    TerminalRegistry,
    compute_terminals,
    core_registry,
    core_registry_from_settings,
)
from .topk import CHUNK, _chunks, _length, top_k_indices


class _Compiled(NamedTuple):
    """A scorer string compiled: its numpy function and block kernel, and the sympy
    expressions it came from (None for a preset compiled from its stored code: parsed
    only when asked for, :meth:`ExpressionScorer.sympy_expr`)."""

    sympy_expr: Any
    fn: Any
    args: tuple[str, ...]
    protected: Any
    kernel: Kernel | None
    #: the terminal the expression is, bare (its score is that column), or None
    symbol: str | None


# A scorer string parsed and compiled (to numpy, then to its block kernel) once per
# process: the add-on's start-up check, the scheduler and the middleware all build a
# scorer from RECRAWL_SCORER. Keyed by the text and the registry's names (all a parse
# depends on); bounded, as a GP builds many. A preset's expression is compiled from
# its stored code (scoring/preset_code.py), without sympy, unless ``parse`` is set.
_PARSED: dict[tuple[str, frozenset[str], bool], _Compiled] = {}
_PARSED_MAX = 256


def _parsed(
    expression: str, setting: str, registry: TerminalRegistry, parse: bool = False
) -> _Compiled:
    key = (expression, registry.names(), parse)
    hit = _PARSED.get(key)
    if hit is None:
        stored = None if parse else preset_code.compiled(expression, registry)
        if stored is not None:
            fn, args, symbol = stored
            hit = _Compiled(None, fn, args, None, compile_kernel(fn, args), symbol)
        else:
            sympy_expr = parse_expression(expression, setting, registry=registry)
            fn, args, protected = compile_expression(sympy_expr)
            symbol = str(protected) if protected.is_Symbol else None
            hit = _Compiled(sympy_expr, fn, args, protected, compile_kernel(fn, args), symbol)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = hit
    return hit


logger = logging.getLogger(__name__)

# a name, maybe with the "+" of the smoothed presets: what a preset looks like
_NAME_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+*$")


def _unknown_preset(spec: str, setting: str) -> RecrawlSettingError:
    near = closest(spec.lower(), PRESETS)
    hint = f" did you mean {near!r}?" if near else ""
    return RecrawlSettingError(
        f"{setting}={spec!r}: unknown preset;{hint} presets: {', '.join(PRESETS)} "
        "(or an expression over the terminals, docs/scorers.md)"
    )


class Scorer:
    """Scores every URL from its terminals; ``top_k`` picks the ones to fetch.

    Build one with :meth:`from_spec` (or :meth:`from_settings`). Subclasses:
    :class:`ExpressionScorer` (formulas and presets) and :class:`RandomScorer`.
    """

    #: preset name, or ``"expression"`` / ``"file:<path>"``
    name: str
    #: the formula as the user wrote it (or the preset's)
    expression: str
    #: terminal names :meth:`score` reads (pass as ``needed`` to compute_terminals)
    terminals_needed: frozenset[str]
    #: pseudo-counts for the ``...p`` terminals (None: the default prior)
    prior: tuple[float, float] | None
    #: metadata of a JSON scorer file (empty otherwise)
    metadata: dict[str, Any]
    #: the terminals it was parsed against, and computes its own with (a crawl's: the
    #: core's and its plug-ins', scrapy_recrawl/plugin_terminals.py); None: the core's
    registry: TerminalRegistry | None = None

    def score(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        """One float64 score per URL (higher = fetch sooner)."""
        raise NotImplementedError

    def top_k(self, terminals: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        """Indices of the ``k`` URLs to fetch, best first (NaN/inf scores last)."""
        return top_k_indices(self.score(terminals), k)

    def score_state(
        self, state: Mapping[str, np.ndarray], cycle: int, now: float | None = None
    ) -> np.ndarray:
        """Scores straight from the store's state arrays (computes only the terminals needed)."""
        return self.score(self.terminals(state, cycle, now))

    def top_k_state(
        self, state: Mapping[str, np.ndarray], cycle: int, k: int, now: float | None = None
    ) -> np.ndarray:
        """:meth:`top_k` straight from the store's state arrays (what the scheduler calls)."""
        return top_k_indices(self.score_state(state, cycle, now), k)

    def terminals(
        self, state: Mapping[str, np.ndarray], cycle: int, now: float | None = None
    ) -> dict[str, np.ndarray]:
        """The terminals this scorer needs, from the store's state arrays."""
        return compute_terminals(
            state,
            cycle,
            now,
            prior=self.prior,
            needed=self.terminals_needed,
            registry=self.registry,
        )

    def __str__(self) -> str:
        return self.expression

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.expression}>"

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        prior: tuple[float, float] | list[float] | None = None,
        seed: int = 0,
        setting: str = SETTING,
        registry: TerminalRegistry | None = None,
    ) -> Scorer:
        """A preset name, a path to a ``recrawl-evolve`` JSON file, or an expression.

        ``prior`` is RECRAWL_PRIOR (used by the ``...p`` terminals), ``seed``
        is RECRAWL_SEED (used by ``rand``), ``registry`` the terminals it may use
        (None: the core's, :func:`~scrapy_recrawl.scoring.registry.core_registry`;
        :func:`scrapy_recrawl.plugin_terminals.registry_from_settings` gives a crawl's,
        its plug-ins' too). Bad input raises :class:`RecrawlSettingError` naming ``setting``.
        """
        if not isinstance(spec, str):
            raise RecrawlSettingError(
                f"{setting}={spec!r}: expected a preset name, an expression or a JSON file path"
            )
        checked_prior = None if prior is None else check_prior(prior)
        key = spec.strip()
        preset = PRESETS.get(key.lower())
        if preset is not None:
            if preset.expression is None:
                return RandomScorer(seed=seed, registry=registry)
            return ExpressionScorer(
                preset.expression,
                name=preset.name,
                prior=checked_prior,
                setting=setting,
                registry=registry,
            )
        if key.lower().endswith(".json") or (os.sep in key and os.path.isfile(key)):
            return cls._from_file(
                key, prior=checked_prior, seed=seed, setting=setting, registry=registry
            )
        try:
            return ExpressionScorer(
                key, name="expression", prior=checked_prior, setting=setting, registry=registry
            )
        except RecrawlSettingError:
            # A lone name that is no terminal was meant as a preset ("aad++", "nad_plus"):
            # say so with the presets, not with the list of terminals.
            if _NAME_LIKE.match(key):
                raise _unknown_preset(key, setting) from None
            raise

    @classmethod
    def _from_file(
        cls,
        path: str,
        *,
        prior: tuple[float, float] | None,
        seed: int,
        setting: str,
        registry: TerminalRegistry | None,
    ) -> Scorer:
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except OSError as exc:
            raise RecrawlSettingError(
                f"{setting}={path!r}: cannot read scorer file ({exc})"
            ) from None
        except ValueError as exc:
            raise RecrawlSettingError(f"{setting}={path!r}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("expression"), str):
            raise RecrawlSettingError(
                f"{setting}={path!r}: scorer file must be a JSON object with a string key 'expression'"
            )
        file_prior = data.get("prior")
        if prior is None and file_prior is not None:
            prior = check_prior(file_prior, setting=f"{setting} ({path}: 'prior')")
        inner = ExpressionScorer(
            data["expression"],
            name=f"file:{path}",
            prior=prior,
            setting=f"{setting} ({path})",
            registry=registry,
        )
        inner.metadata = {k: v for k, v in data.items() if k != "expression"}
        return inner

    @classmethod
    def from_settings(
        cls, settings: Mapping[str, Any] | Any, registry: TerminalRegistry | None = None
    ) -> Scorer:
        """Build from RECRAWL_SCORER, RECRAWL_PRIOR and RECRAWL_SEED over ``registry``'s
        terminals (None: the core's with these settings' RECRAWL_NUTCH_* and
        RECRAWL_BURST_TAU). A crawl's scorer, whose terminals include those of the
        plug-ins RECRAWL_PLUGINS_BASE and RECRAWL_PLUGINS list, is
        :func:`scrapy_recrawl.plugin_terminals.scorer_from_settings`."""
        spec = get(
            settings, "RECRAWL_SCORER", str, expect="a preset name, an expression or a JSON path"
        )
        prior = prior_from_settings(settings)
        seed = get(settings, "RECRAWL_SEED", int, expect="an integer")
        if registry is None:
            registry = core_registry_from_settings(settings)  # RECRAWL_NUTCH_* checked there
        scorer = cls.from_spec(spec, prior=prior, seed=seed, registry=registry)
        check_window(scorer, spec, get(settings, "RECRAWL_WINDOW", int, expect="1..5"))
        _warn_related(scorer, spec, settings)
        return scorer


def window_needed(terminals: Iterable[str]) -> int:
    """The largest ``i`` of the ``C_i`` / ``D_i`` among ``terminals`` (0: none)."""
    return max(
        (int(n[1:]) for n in terminals if len(n) == 2 and n[0] in "CD" and n[1].isdigit()),
        default=0,
    )


def _warn_related(scorer: Scorer, spec: str, settings: Mapping[str, Any] | Any) -> None:
    """Q means what it meant when evolved only with the same related-page settings."""
    evolved = scorer.metadata.get("related")
    if "Q" not in scorer.terminals_needed or not isinstance(evolved, dict):
        return
    for name, value in evolved.items():
        if name.startswith("RECRAWL_") and name in DEFAULTS:
            here = get(settings, name)  # "20" from the command line is 20
            if here != value:
                logger.warning(
                    "RECRAWL_SCORER=%r was evolved with %s=%r, this crawl has %r: its Q "
                    "terminal will weigh related pages differently",
                    spec,
                    name,
                    value,
                    here,
                )


def check_window(scorer: Scorer, spec: str, window: int) -> None:
    """Refuse a scorer whose C_i / D_i need more than RECRAWL_WINDOW = ``window`` visits.

    The window keeps the last ``window`` observations, so a C_i / D_i beyond it is
    NaN all crawl long and the expression would not score what it scored when it
    was written or evolved (a ``recrawl-evolve`` file records its ``window``).
    """
    needed = window_needed(scorer.terminals_needed)
    if needed <= window:
        return
    evolved = scorer.metadata.get("window")
    told = f" (the file was evolved with a window of {evolved})" if evolved else ""
    raise RecrawlSettingError(
        f"RECRAWL_SCORER={spec!r} uses C{needed}/D{needed}{told} but RECRAWL_WINDOW={window}: "
        f"those terminals would be NaN in this crawl; set RECRAWL_WINDOW = "
        f"{max(needed, evolved or 0)} (at most 5)"
    )


class ExpressionScorer(Scorer):
    """A compiled sympy expression over the terminals (presets and user formulas)."""

    def __init__(
        self,
        expression: str,
        *,
        name: str = "expression",
        prior: tuple[float, float] | None = None,
        setting: str = SETTING,
        registry: TerminalRegistry | None = None,
    ) -> None:
        self.name = name
        self.expression = expression.strip()
        self.prior = prior
        self.metadata = {}
        reg = core_registry() if registry is None else registry
        self.registry = reg
        self._setting = setting
        self._compiled = _parsed(self.expression, setting, reg)
        self._fn, self._args = self._compiled.fn, self._compiled.args
        #: the block kernel (None: the expression is a constant or a bare terminal, or
        #: uses something the kernel translator does not know)
        self.kernel = self._compiled.kernel
        self._symbol = self._compiled.symbol
        # a constant expression still needs one column: it tells how many URLs to score
        self.terminals_needed = frozenset(self._args) or frozenset({"n"})
        self.uses_prior = bool(self.terminals_needed & reg.prior_names())

    @property
    def sympy_expr(self) -> Any:
        """The expression as sympy parsed it (unevaluated, not yet protected)."""
        return self._sympy().sympy_expr

    @property
    def protected_expr(self) -> Any:
        """:attr:`sympy_expr` with its divisions, logs and powers protected (what is compiled)."""
        return self._sympy().protected

    def _sympy(self) -> _Compiled:
        if self._compiled.sympy_expr is None:  # a preset compiled from its stored code
            assert self.registry is not None
            self._compiled = _parsed(self.expression, self._setting, self.registry, parse=True)
        return self._compiled

    def score(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        missing = [a for a in self._args if a not in terminals]
        if missing:
            raise KeyError(f"scorer {self.expression!r} needs terminal(s) {missing}")
        size = _length(terminals)
        arrays = [np.asarray(terminals[a]) for a in self._args]
        if all(a.dtype == np.float64 and a.shape == (size,) for a in arrays):
            # float64 columns (what compute_terminals gives): the fast paths
            if self.kernel is not None:
                return self.kernel(arrays, size)
            if self._symbol is not None:
                return arrays[0].copy()
        return self._score_reference(arrays, size)

    def top_k(self, terminals: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        if self._symbol is not None and self._symbol in terminals:
            column = np.asarray(terminals[self._symbol])
            if column.dtype == np.float64 and column.shape == (_length(terminals),):
                # a bare terminal is its own score: select on it, no copy
                # (top_k_indices never writes to its input)
                return top_k_indices(column, k)
        return top_k_indices(self.score(terminals), k)

    def top_k_state(
        self, state: Mapping[str, np.ndarray], cycle: int, k: int, now: float | None = None
    ) -> np.ndarray:
        return self.top_k(self.terminals(state, cycle, now), k)

    def score_reference(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        """:meth:`score` through the lambdify function only (what the kernel must equal)."""
        size = _length(terminals)
        return self._score_reference([np.asarray(terminals[a]) for a in self._args], size)

    def _score_reference(self, arrays: list[np.ndarray], size: int) -> np.ndarray:
        if size <= CHUNK:
            return self._eval(arrays, size)
        out = np.empty(size)
        for s, e in _chunks(size):
            out[s:e] = self._eval([a[s:e] for a in arrays], e - s)
        return out

    def _eval(self, arrays: list[np.ndarray], size: int) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = np.asarray(self._fn(*arrays), dtype=np.float64)
        if out.shape != (size,):
            out = np.broadcast_to(out, (size,)).copy()
        return out


class RandomScorer(Scorer):
    """``rand``: a fresh seeded random score per URL at every call."""

    def __init__(self, seed: int = 0, registry: TerminalRegistry | None = None) -> None:
        self.name = "rand"
        self.registry = core_registry() if registry is None else registry
        self.seed = int(seed)
        self.expression = f"rand(seed={self.seed})"
        self.prior = None
        self.metadata = {}
        self.terminals_needed = frozenset({"n"})  # only to know how many URLs there are
        self._rng = np.random.default_rng(self.seed)

    def score(self, terminals: Mapping[str, np.ndarray]) -> np.ndarray:
        return self._rng.random(_length(terminals))

    def score_state(
        self, state: Mapping[str, np.ndarray], cycle: int, now: float | None = None
    ) -> np.ndarray:
        return self._rng.random(int(np.shape(state["n"])[0]))


def score_expression(
    expression: str, terminals: Mapping[str, np.ndarray], setting: str = SETTING
) -> np.ndarray:
    """Score once with an expression string (convenience; compiles every call)."""
    return ExpressionScorer(expression, setting=setting).score(terminals)
