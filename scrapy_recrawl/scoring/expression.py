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

import io
import json
import keyword
import logging
import os
import re
import tokenize
from collections.abc import Callable, Iterable, Mapping
from functools import reduce
from typing import Any

import numpy as np
import sympy
from sympy.parsing.sympy_parser import auto_number, parse_expr

from scrapy_recrawl.scoring.kernel import compile_kernel
from scrapy_recrawl.scoring.presets import PRESETS
from scrapy_recrawl.scoring.terminals import (
    PRIOR_TERMINALS,
    TERMINALS,
    check_prior,
    compute_terminals,
)
from scrapy_recrawl.settings import RecrawlSettingError

logger = logging.getLogger(__name__)

SETTING = "RECRAWL_SCORER"

#: Functions an expression may call (name -> arity, None = 2 or more).
FUNCTIONS: dict[str, int | None] = {
    "log": 1,
    "exp": 1,
    "pow": 2,
    "sqrt": 1,
    "Abs": 1,
    "Min": None,
    "Max": None,
}
_OPERATORS = frozenset({"+", "-", "*", "/", "**", "^", "(", ")", ","})
_DECIMAL = re.compile(r"^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


# --------------------------------------------------------------------------
# protected operators (the one definition, shared with the GP engine)


def pdiv(a: Any, b: Any) -> np.ndarray:
    """Protected division: ``a / b``, and 0 where ``b == 0`` (GP4C)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    zero = b == 0
    # divide by 1 where b == 0, then zero those: ~2x faster than divide(where=)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.divide(a, b + zero)
    return np.where(zero, 0.0, out)


def plog(x: Any) -> np.ndarray:
    """Protected natural log: ``log(x)`` for ``x > 0``, else 0 (NaN too) (GP4C)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros(x.shape)
    np.log(x, out=out, where=x > 0)
    return out


def _ppow(a: Any, b: Any) -> np.ndarray:
    # float power: overflow gives inf (ranks last) instead of a Python
    # OverflowError or an endless big-integer power like 10**10**10
    base = np.asarray(a, dtype=np.float64)
    if np.ndim(b) == 0:
        # ndarray ** scalar takes numpy's fast paths (0.5 -> sqrt, 2 -> square, ...)
        return base ** float(b)
    return np.power(base, np.asarray(b, dtype=np.float64))


def _fmin(*args: Any) -> Any:
    return reduce(np.minimum, args)


def _fmax(*args: Any) -> Any:
    return reduce(np.maximum, args)


class _PDiv(sympy.Function):
    nargs = 2

    def _sympystr(self, printer: Any) -> str:
        return f"pdiv({printer._print(self.args[0])}, {printer._print(self.args[1])})"


class _PLog(sympy.Function):
    nargs = 1

    def _sympystr(self, printer: Any) -> str:
        return f"plog({printer._print(self.args[0])})"


class _PPow(sympy.Function):
    nargs = 2

    def _sympystr(self, printer: Any) -> str:
        return f"({printer._print(self.args[0])})**({printer._print(self.args[1])})"


class _FMin(sympy.Function):
    pass


class _FMax(sympy.Function):
    pass


_NUMPY_FUNCS: dict[str, Callable[..., Any]] = {
    "_PDiv": pdiv,
    "_PLog": plog,
    "_PPow": _ppow,
    "_FMin": _fmin,
    "_FMax": _fmax,
}


def _pow(a: Any, b: Any, **_: Any) -> sympy.Expr:
    return sympy.Pow(a, b, evaluate=False)


def _log(x: Any, *rest: Any, evaluate: bool = False) -> sympy.Expr:
    if rest:
        raise TypeError("log takes 1 argument (natural log)")
    return _PLog(x)


def _nary(cls: type[sympy.Function], name: str) -> Callable[..., sympy.Expr]:
    def make(*args: Any, evaluate: bool = False) -> sympy.Expr:
        if len(args) < 2:
            raise TypeError(f"{name} takes 2 or more arguments")
        return cls(*args)

    return make


def _unary(fn: Callable[..., sympy.Expr], name: str) -> Callable[..., sympy.Expr]:
    def make(*args: Any, evaluate: bool = False) -> sympy.Expr:
        if len(args) != 1:
            raise TypeError(f"{name} takes 1 argument")
        return fn(args[0], evaluate=False)

    return make


def _pow_checked(*args: Any, evaluate: bool = False) -> sympy.Expr:
    if len(args) != 2:
        raise TypeError("pow takes 2 arguments")
    return _pow(*args)


_SYMBOLS: dict[str, sympy.Symbol] = {name: sympy.Symbol(name) for name in TERMINALS}
_LOCALS: dict[str, Any] = {
    **_SYMBOLS,
    "log": _log,
    "exp": _unary(sympy.exp, "exp"),
    "pow": _pow_checked,
    "sqrt": _unary(
        lambda x, evaluate=False: sympy.Pow(x, sympy.Rational(1, 2), evaluate=False), "sqrt"
    ),
    "Abs": _unary(sympy.Abs, "Abs"),
    "Min": _nary(_FMin, "Min"),
    "Max": _nary(_FMax, "Max"),
}
_GLOBALS: dict[str, Any] = {
    "__builtins__": {},
    "Integer": sympy.Integer,
    "Float": sympy.Float,
    "Rational": sympy.Rational,
    "Add": sympy.Add,
    "Mul": sympy.Mul,
    "Pow": sympy.Pow,
}


def _refuse(text: str, problem: str, setting: str) -> RecrawlSettingError:
    return RecrawlSettingError(f"{setting}={text!r}: {problem}")


def _check_tokens(text: str, setting: str) -> str:
    """Validate every token against the whitelist; returns the text with ``^`` as ``**``."""
    if not text.strip():
        raise _refuse(text, "empty expression", setting)
    if "\n" in text.strip() or "\r" in text:
        raise _refuse(text, "expression must be on one line", setting)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        raise _refuse(text, f"cannot tokenize ({exc})", setting) from None
    out: list[str] = []
    allowed_names = ", ".join([*TERMINALS, *FUNCTIONS])
    for tok in tokens:
        kind, s = tok.type, tok.string
        if kind in (
            tokenize.NEWLINE,
            tokenize.NL,
            tokenize.ENDMARKER,
            tokenize.INDENT,
            tokenize.DEDENT,
        ):
            continue
        if kind == tokenize.NAME:
            if s in TERMINALS or s in FUNCTIONS:
                out.append(s)
                continue
            what = "keyword" if keyword.iskeyword(s) else "unknown name"
            raise _refuse(
                text, f"{what} {s!r} is not allowed; allowed names: {allowed_names}", setting
            )
        if kind == tokenize.NUMBER:
            if not _DECIMAL.match(s):
                raise _refuse(text, f"number {s!r} is not allowed (decimal numbers only)", setting)
            out.append(s)
            continue
        if kind == tokenize.OP and s in _OPERATORS:
            out.append("**" if s == "^" else s)
            continue
        if kind == tokenize.OP and s == ".":
            raise _refuse(text, "token '.' is not allowed (attribute access)", setting)
        raise _refuse(
            text,
            f"token {s!r} is not allowed; allowed operators: + - * / ** ^ ( ) ,",
            setting,
        )
    return " ".join(out)


def _is_negative_number(e: sympy.Basic) -> bool:
    return bool(e.is_Number and e < 0)


def _power(base: sympy.Expr, exp: sympy.Expr) -> sympy.Expr:
    # the float power of _PPow: 10^-1000000000 is pdiv(1, inf) = 0, not a
    # Python integer power that never ends (same values as ** for float64 arrays)
    return base if exp == 1 else _PPow(base, exp)


def _protect(e: sympy.Basic) -> sympy.Basic:
    """Rewrite divisions (``Pow`` with a negative constant exponent) as ``_PDiv``, powers as ``_PPow``."""
    if e.is_Atom:
        return e
    if e.is_Mul:
        num: list[sympy.Basic] = []
        den: list[sympy.Basic] = []
        for f in e.args:
            if f.is_Pow and _is_negative_number(f.exp):
                den.append(_power(_protect(f.base), -f.exp))
            else:
                num.append(_protect(f))
        if den:
            top = (
                sympy.Mul(*num, evaluate=False)
                if len(num) > 1
                else (num[0] if num else sympy.Integer(1))
            )
            bottom = sympy.Mul(*den, evaluate=False) if len(den) > 1 else den[0]
            return _PDiv(top, bottom)
        return sympy.Mul(*num, evaluate=False)
    if e.is_Pow and _is_negative_number(e.exp):
        return _PDiv(sympy.Integer(1), _power(_protect(e.base), -e.exp))
    args = [_protect(a) for a in e.args]
    if e.is_Pow:
        return _PPow(*args)
    if isinstance(e, sympy.Add):
        return e.func(*args, evaluate=False)
    return e.func(*args)


def parse_expression(text: str, setting: str = SETTING) -> sympy.Expr:
    """Parse a whitelisted expression string (unevaluated, not yet protected)."""
    if not isinstance(text, str):
        raise RecrawlSettingError(f"{setting}={text!r}: expected a string")
    clean = _check_tokens(text, setting)
    try:
        expr = parse_expr(
            clean,
            local_dict=dict(_LOCALS),
            global_dict=dict(_GLOBALS),
            transformations=(auto_number,),
            evaluate=False,
        )
    except TypeError as exc:
        raise _refuse(text, str(exc), setting) from None
    except Exception as exc:  # SyntaxError, TokenError, ...
        raise _refuse(
            text, f"not a valid expression ({type(exc).__name__}: {exc})", setting
        ) from None
    if not isinstance(expr, sympy.Expr):
        raise _refuse(text, "not an arithmetic expression", setting)
    return expr


def compile_expression(
    expr: sympy.Expr,
) -> tuple[Callable[..., Any], tuple[str, ...], sympy.Expr]:
    """Protect and lambdify ``expr``; returns (numpy function, argument names, protected expr)."""
    protected = _protect(expr)
    names = tuple(sorted(str(s) for s in protected.free_symbols))
    fn = sympy.lambdify(
        [_SYMBOLS[n] for n in names], protected, modules=[_NUMPY_FUNCS, "numpy"], cse=False
    )
    return fn, names, protected


def expression_size(expr: sympy.Basic) -> int:
    """Nodes of the expression tree (functions, operators, symbols and constants)."""
    return sum(1 for _ in sympy.preorder_traversal(expr))


# --------------------------------------------------------------------------
# scorers


#: URLs evaluated per block: the expression's temporaries stay in the CPU cache
#: (numexpr's trick, with plain numpy), about 2x faster than whole arrays at 1M.
CHUNK = 1 << 15


def _chunks(size: int) -> list[tuple[int, int]]:
    return [(s, min(s + CHUNK, size)) for s in range(0, size, CHUNK)]


def _length(terminals: Mapping[str, np.ndarray]) -> int:
    for v in terminals.values():
        return int(np.shape(v)[0])
    raise ValueError("no terminal arrays given: cannot tell how many URLs to score")


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first; NaN/inf rank last.

    One selection over all scores, then a sort of the ``k`` chosen only.
    Ties are broken arbitrarily but deterministically (same scores, same order).
    """
    s = np.asarray(scores, dtype=np.float64)
    size = s.shape[0]
    k = int(k)
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    # the common case first: no non-finite score near the top, no copy
    idx = _sampled_top(s, k, sanitized=False) if k < size else None
    if idx is None:
        bad = ~np.isfinite(s)
        if bad.any():
            s = s.copy()
            s[bad] = -np.inf
        if k >= size:
            return np.argsort(-s)
        idx = _select_top(s, k)
    return idx[np.argsort(-s[idx])]


_SAMPLE = 1 << 14


def _select_top(s: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of ``s`` (finite or -inf; any order)."""
    idx = _sampled_top(s, k, sanitized=True)
    if idx is not None:
        return idx
    size = s.shape[0]
    return np.argpartition(s, size - k)[size - k :]


def _sampled_top(s: np.ndarray, k: int, sanitized: bool) -> np.ndarray | None:
    """Indices of the k largest values of ``s`` through a sampled pivot, or None.

    Scores of real crawls are full of ties (integer terminals; most pages at
    exactly 0), on which numpy's introselect is several times slower, up to
    20x when the k-th value is shared by most URLs. So: take a pivot from a
    strided sample, a little below the k-th value; the URLs above it are a
    small candidate set for ``argpartition``; when the pivot *is* the k-th
    value (a big tie block), take everything above it plus the first tied
    URLs by index (scanning only as far as needed). None if the sample misled
    (the caller does a full ``argpartition``), or, when ``s`` is not
    ``sanitized`` (NaN/inf not yet replaced by -inf), if a non-finite value
    could matter: in the sample or among the candidates. So this returns the
    same indices, in the same order, with or without sanitizing first.
    """
    size = s.shape[0]
    if size < 8 * _SAMPLE:
        return None
    sample = s[:: size // _SAMPLE]
    if not sanitized and not np.isfinite(sample).all():
        return None
    m = sample.shape[0]
    above_in_sample = min(m - 1, int(1.25 * k * m / size) + 16)
    j = m - 1 - above_in_sample
    sample = np.partition(sample, j)
    pivot = sample[j]
    above = np.flatnonzero(s > pivot)  # NaN never; +inf checked below
    n_above = above.shape[0]
    if k <= n_above <= max(4 * k, size // 4):
        values = s[above]
        if not sanitized and not np.isfinite(values).all():
            return None
        part = np.argpartition(values, n_above - k)[n_above - k :]
        return above[part]
    if n_above < k:
        if not sanitized and not np.isfinite(s[above]).all():
            return None
        # the sample's share of ties tells how far to scan for the first ones
        share = np.count_nonzero(sample == pivot) / m
        tied = _first_equal(s, pivot, k - n_above, share)
        if tied is not None:
            return np.concatenate((above, tied))
    return None


def _first_equal(s: np.ndarray, value: float, count: int, share: float) -> np.ndarray | None:
    """The ``count`` smallest indices where ``s == value`` (None if fewer)."""
    size = s.shape[0]
    span = size if share <= 0 else min(size, int(count / share * 1.1) + 4096)
    tied = np.flatnonzero(s[:span] == value)
    if tied.shape[0] < count and span < size:
        tied = np.concatenate((tied, np.flatnonzero(s[span:] == value) + span))
    if tied.shape[0] < count:
        return None
    return tied[:count]


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
        return compute_terminals(state, cycle, now, prior=self.prior, needed=self.terminals_needed)

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
    ) -> Scorer:
        """A preset name, a path to a ``recrawl-evolve`` JSON file, or an expression.

        ``prior`` is RECRAWL_PRIOR (used by the ``...p`` terminals), ``seed``
        is RECRAWL_SEED (used by ``rand``). Bad input raises
        :class:`RecrawlSettingError` naming ``setting``.
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
                return RandomScorer(seed=seed)
            return ExpressionScorer(
                preset.expression, name=preset.name, prior=checked_prior, setting=setting
            )
        if key.lower().endswith(".json") or (os.sep in key and os.path.isfile(key)):
            return cls._from_file(key, prior=checked_prior, seed=seed, setting=setting)
        return ExpressionScorer(key, name="expression", prior=checked_prior, setting=setting)

    @classmethod
    def _from_file(
        cls, path: str, *, prior: tuple[float, float] | None, seed: int, setting: str
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
            data["expression"], name=f"file:{path}", prior=prior, setting=f"{setting} ({path})"
        )
        inner.metadata = {k: v for k, v in data.items() if k != "expression"}
        return inner

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | Any) -> Scorer:
        """Build from RECRAWL_SCORER, RECRAWL_PRIOR and RECRAWL_SEED."""
        from scrapy_recrawl.settings import get

        spec = get(
            settings, "RECRAWL_SCORER", str, expect="a preset name, an expression or a JSON path"
        )
        prior = settings.get("RECRAWL_PRIOR") if settings is not None else None
        if isinstance(prior, str):  # -s RECRAWL_PRIOR=0.5,1
            try:
                prior = tuple(float(x) for x in prior.replace("(", "").replace(")", "").split(","))
            except ValueError:
                pass
        if prior is not None:
            prior = check_prior(prior)
        seed = get(settings, "RECRAWL_SEED", int, expect="an integer")
        scorer = cls.from_spec(spec, prior=prior, seed=seed)
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
    from scrapy_recrawl.settings import DEFAULTS

    evolved = getattr(scorer, "metadata", {}).get("related")
    if "Q" not in getattr(scorer, "terminals_needed", ()) or not isinstance(evolved, dict):
        return
    for name, value in evolved.items():
        if name.startswith("RECRAWL_") and name in DEFAULTS:
            here = settings.get(name, DEFAULTS[name]) if settings is not None else DEFAULTS[name]
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
    needed = window_needed(getattr(scorer, "terminals_needed", ()))
    if needed <= window:
        return
    evolved = getattr(scorer, "metadata", {}).get("window")
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
    ) -> None:
        self.name = name
        self.expression = expression.strip()
        self.prior = prior
        self.metadata = {}
        self.sympy_expr = parse_expression(self.expression, setting)
        self._fn, self._args, self.protected_expr = compile_expression(self.sympy_expr)
        #: the block kernel (None: the expression is a constant or a bare terminal,
        #: or uses something the kernel translator does not know)
        self.kernel = compile_kernel(self._fn, self._args)
        self._symbol = str(self.protected_expr) if self.protected_expr.is_Symbol else None
        # a constant expression still needs one column: it tells how many URLs to score
        self.terminals_needed = frozenset(self._args) or frozenset({"n"})
        self.uses_prior = bool(self.terminals_needed & PRIOR_TERMINALS)

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

    def __init__(self, seed: int = 0) -> None:
        self.name = "rand"
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
