"""A scorer string to a sympy expression: whitelisted tokens only, protected operators, compiled.

User input is data, never code: the text is checked token by token against the
terminals and functions we know before sympy sees it, and refused with a message
that names the setting and the offending token.
"""

from __future__ import annotations

import functools
import io
import keyword
import re
import tokenize
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from scrapy_recrawl.settings import RecrawlSettingError

from .protected import _NUMPY_FUNCS

if TYPE_CHECKING:
    import sympy

# sympy is imported by the first parse, not with this module: importing it takes a
# quarter of a second, and a crawl whose scorer is a preset never parses (its code is
# stored: scoring/preset_code.py). The token check below needs no sympy.

SETTING = "RECRAWL_SCORER"


class TerminalNames(Protocol):
    """What the parser needs of a terminal registry (scoring/registry.py)."""

    def __contains__(self, name: object) -> bool: ...

    def __iter__(self) -> Iterator[str]: ...

    def suggest(self, name: str) -> str | None:
        """The known terminal closest to ``name``, or None."""
        ...


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


def parse_expr(*args: Any, **kwargs: Any) -> Any:
    """sympy's ``parse_expr`` (imported at the first parse)."""
    from sympy.parsing.sympy_parser import parse_expr as sympy_parse_expr

    return sympy_parse_expr(*args, **kwargs)


def _log(x: Any, *rest: Any, evaluate: bool = False) -> sympy.Expr:
    from .protected_sympy import _PLog

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
    import sympy

    if len(args) != 2:
        raise TypeError("pow takes 2 arguments")
    return sympy.Pow(*args, evaluate=False)


@functools.cache
def _function_locals() -> dict[str, Any]:
    """The functions an expression may call, as the parser builds them (FUNCTIONS' names)."""
    import sympy

    from .protected_sympy import _FMax, _FMin

    return {
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


#: The sympy classes the parser's generated code calls (its globals, with no builtins).
_SYMPY_GLOBALS = ("Integer", "Float", "Rational", "Add", "Mul", "Pow")


@functools.cache
def _globals() -> dict[str, Any]:
    import sympy

    return {"__builtins__": {}, **{name: getattr(sympy, name) for name in _SYMPY_GLOBALS}}


#: Names a terminal may not take: the functions, and what sympy's parser calls.
RESERVED: frozenset[str] = frozenset(FUNCTIONS) | frozenset({"__builtins__", *_SYMPY_GLOBALS})


def _refuse(text: str, problem: str, setting: str) -> RecrawlSettingError:
    return RecrawlSettingError(f"{setting}={text!r}: {problem}")


def _unknown_name(name: str, registry: TerminalNames) -> str:
    """One line: what ``name`` is not, the closest terminal (or function in another
    case: ``abs``), then every name allowed."""
    if keyword.iskeyword(name):
        what, close = "keyword", None
    else:
        same_function = [f for f in FUNCTIONS if f.lower() == name.lower()]
        what, close = "unknown name", same_function[0] if same_function else registry.suggest(name)
    hint = f" (did you mean {close!r}?)" if close else ""
    return (
        f"{what} {name!r} is not allowed{hint}; terminals: {', '.join(registry)}; "
        f"functions: {', '.join(FUNCTIONS)}"
    )


#: Bounds on what a scorer string may be, so any one is compiled or refused within a
#: second: a GP winner of the papers' largest depth (10) prints to at most ~6,000
#: tokens and 20 levels of parentheses; literals are the GP's constants (0.001 .. 1000)
#: or a user's weights. ``1e999999`` once hung start-up for minutes.
MAX_TOKENS = 8000
MAX_CHARS = 16 * MAX_TOKENS  # checked before tokenizing: the bound is on time
MAX_NESTING = 64
MAX_LITERAL = Decimal("1e12")
MIN_LITERAL = Decimal("1e-12")
MAX_LITERAL_CHARS = 32

# tokens that carry no expression (the end of the line)
_LAYOUT = frozenset(
    {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT}
)


def _magnitude(s: str) -> int | None:
    """The power of ten of a decimal literal's first significant digit (``s`` is in
    ``10**m .. 10**(m+1)``), read from its digits and exponent as text; None for a zero.

    No arbitrary-precision arithmetic: ``1e-999999999`` is one int() of a short string
    (the literal's length is bounded first), where Decimal would round it to zero or
    overflow, and sympy would then spend minutes on it."""
    mantissa, _, exponent = s.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return None
    return int(exponent or "0") + len(digits) - 1 - len(fraction)


_MIN_MAGNITUDE = MIN_LITERAL.adjusted()  # -12
_MAX_MAGNITUDE = MAX_LITERAL.adjusted()  # 12


def _check_literal(text: str, s: str, setting: str) -> str:
    """Refuse a literal out of bounds; returns the text to parse in its place (a zero
    as ``0``: ``0e-999999999`` is a zero that sympy would spend minutes on)."""
    refusal = _refuse(
        text,
        f"number {s!r} is out of bounds (a literal is 0 or between {MIN_LITERAL:g} and "
        f"{MAX_LITERAL:g}, at most {MAX_LITERAL_CHARS} characters)",
        setting,
    )
    if len(s) > MAX_LITERAL_CHARS:  # first: it bounds the exponent's digits
        raise refusal
    magnitude = _magnitude(s)
    if magnitude is None:
        return s if "e" not in s.lower() else "0"
    if not _MIN_MAGNITUDE <= magnitude <= _MAX_MAGNITUDE:
        raise refusal
    # within a power of ten of the bounds: an exponent of two digits, so the exact
    # comparison is cheap (copy_abs: no rounding to the context's 28 digits)
    if not MIN_LITERAL <= Decimal(s).copy_abs() <= MAX_LITERAL:
        raise refusal
    return s


def _check_tokens(text: str, setting: str, registry: TerminalNames) -> str:
    """Validate every token against the whitelist; returns the text with ``^`` as ``**``."""
    if not text.strip():
        raise _refuse(text, "empty expression", setting)
    if "\n" in text.strip() or "\r" in text:
        raise _refuse(text, "expression must be on one line", setting)
    short = f"{text[:60]}..."  # what a refusal for size quotes
    if len(text) > MAX_CHARS:
        raise _refuse(
            short, f"expression too long ({len(text)} characters; at most {MAX_CHARS})", setting
        )
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        raise _refuse(text, f"cannot tokenize ({exc})", setting) from None
    if len(tokens) > MAX_TOKENS:
        raise _refuse(
            short, f"expression too long ({len(tokens)} tokens; at most {MAX_TOKENS})", setting
        )
    out: list[str] = []
    depth = 0
    for tok in tokens:
        kind, s = tok.type, tok.string
        if kind in _LAYOUT:
            continue
        if kind == tokenize.NAME:
            if s in registry or s in FUNCTIONS:
                out.append(s)
                continue
            raise _refuse(text, _unknown_name(s, registry), setting)
        if kind == tokenize.NUMBER:
            if not _DECIMAL.match(s):
                raise _refuse(text, f"number {s!r} is not allowed (decimal numbers only)", setting)
            out.append(_check_literal(text, s, setting))
            continue
        if kind == tokenize.OP and s in _OPERATORS:
            depth += (s == "(") - (s == ")")
            if depth > MAX_NESTING:
                raise _refuse(
                    short,
                    f"expression nested too deeply (more than {MAX_NESTING} parentheses)",
                    setting,
                )
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
    from .protected_sympy import _PPow

    # the float power of _PPow: 10^-1000000000 is pdiv(1, inf) = 0, not a
    # Python integer power that never ends (same values as ** for float64 arrays)
    return base if exp == 1 else _PPow(base, exp)


def _protect(e: sympy.Basic) -> sympy.Basic:
    """Rewrite divisions (``Pow`` with a negative constant exponent) as ``_PDiv``, powers as ``_PPow``."""
    import sympy

    from .protected_sympy import _PDiv, _PPow

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


def parse_expression(text: str, setting: str = SETTING, *, registry: TerminalNames) -> sympy.Expr:
    """Parse a whitelisted expression string (unevaluated, not yet protected); the
    terminals it may name are the ``registry``'s
    (:func:`~scrapy_recrawl.scoring.registry.core_registry`: the core's)."""
    if not isinstance(text, str):
        raise RecrawlSettingError(f"{setting}={text!r}: expected a string")
    clean = _check_tokens(text, setting, registry)
    import sympy
    from sympy.parsing.sympy_parser import auto_number

    symbols = {name: sympy.Symbol(name) for name in registry}  # none RESERVED: register()
    try:
        expr = parse_expr(
            clean,
            local_dict={**symbols, **_function_locals()},
            global_dict=dict(_globals()),
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
    import sympy

    protected = _protect(expr)
    names = tuple(sorted(str(s) for s in protected.free_symbols))
    fn = sympy.lambdify(
        [sympy.Symbol(n) for n in names], protected, modules=[_NUMPY_FUNCS, "numpy"], cse=False
    )
    return fn, names, protected
