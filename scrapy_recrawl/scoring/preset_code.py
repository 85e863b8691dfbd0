"""The presets' compiled code, stored: a crawl whose scorer is a preset needs no sympy.

Parsing an expression (scoring/parse.py) imports sympy, a quarter of a second, and
lambdify's code generation takes a tenth more: paid by every crawl process, every
command, though a preset's text never changes. :data:`CODE` holds, for each preset's
expression (scoring/presets.py), the arguments and the returned expression of the
function ``sympy.lambdify`` writes for it; :func:`compiled` executes that code in the
namespace lambdify gives it (numpy's names and the protected operators of
scoring/protected.py), and the block kernel (scoring/kernel.py) is derived from it as
from lambdify's own. tests/test_scoring_presets.py checks every entry against what
lambdify writes with the installed sympy, character for character, and the scores
bit for bit; a preset added or changed without its entry here fails there (the
failure prints the entry), and meanwhile is parsed as any expression is.
"""

from __future__ import annotations

import ast
import itertools
import linecache
from collections.abc import Callable, Container
from typing import Any

import numpy as np

from .protected import _NUMPY_FUNCS

#: a preset's expression -> (argument names, in lambdify's order; the expression the
#: generated function returns)
CODE: dict[str, tuple[tuple[str, ...], str]] = {
    "1 - exp(-CG*t)": (("CG", "t"), "1 - exp((-CG)*t)"),
    "1 - exp(-NAD*t)": (("NAD", "t"), "1 - exp((-NAD)*t)"),
    "1 - exp(-SAD*t)": (("SAD", "t"), "1 - exp((-SAD)*t)"),
    "1 - exp(-AAD*t)": (("AAD", "t"), "1 - exp((-AAD)*t)"),
    "1 - exp(-GAD*t)": (("GAD", "t"), "1 - exp((-GAD)*t)"),
    "t": (("t",), "t"),
    "t*X": (("X", "t"), "X*t"),
    "CG": (("CG",), "CG"),
    "1 - exp(-CGp*t)": (("CGp", "t"), "1 - exp((-CGp)*t)"),
    "1 - exp(-NADp*t)": (("NADp", "t"), "1 - exp((-NADp)*t)"),
    "1 - exp(-SADp*t)": (("SADp", "t"), "1 - exp((-SADp)*t)"),
    "1 - exp(-AADp*t)": (("AADp", "t"), "1 - exp((-AADp)*t)"),
    "1 - exp(-GADp*t)": (("GADp", "t"), "1 - exp((-GADp)*t)"),
    "1 - exp(-AADh*t)": (("AADh", "t"), "1 - exp((-AADh)*t)"),
    "1 - exp(-NADh*t)": (("NADh", "t"), "1 - exp((-NADh)*t)"),
    "due": (("due",), "due"),
    "t/nutch_interval": (("nutch_interval", "t"), "_PDiv(t, nutch_interval)"),
    "CGp*(t + 4*burst)": (("CGp", "burst", "t"), "CGp*(4*burst + t)"),
    "t*chogm_f": (("chogm_f", "t"), "chogm_f*t"),
    "t*lc_f": (("lc_f", "t"), "lc_f*t"),
    "(1 - exp(-AADp*t) + (1 - exp(-Q*t)))/2": (
        ("AADp", "Q", "t"),
        "_PDiv(-exp((-AADp)*t) - exp((-Q)*t) + 1 + 1, 2)",
    ),
}

_counter = itertools.count()


def source(args: tuple[str, ...], body: str) -> str:
    """The function lambdify writes for ``args`` and ``body``."""
    return f"def _lambdifygenerated({', '.join(args)}):\n    return {body}\n"


def _namespace(args: tuple[str, ...], body: str) -> dict[str, Any]:
    """What lambdify(modules=[_NUMPY_FUNCS, "numpy"]) executes its code in, for the names
    ``body`` reads: numpy's (``I`` is 1j), the protected operators over them. Looked up
    name by name: lambdify's ``from numpy import *`` loads numpy.f2py and 170 other
    modules, ~0.1 s, for names a preset never calls."""
    namespace: dict[str, Any] = {"numpy": np, "I": 1j}
    for node in ast.walk(ast.parse(body, mode="eval")):
        if isinstance(node, ast.Name) and node.id not in args:
            if node.id in _NUMPY_FUNCS:
                namespace[node.id] = _NUMPY_FUNCS[node.id]
            elif node.id in np.__all__:
                namespace[node.id] = getattr(np, node.id)
    return namespace


def compiled(
    expression: str, terminals: Container[str]
) -> tuple[Callable[..., Any], tuple[str, ...], str | None] | None:
    """The stored code of ``expression`` as (numpy function, argument names, the bare
    terminal it is or None), or None: not a preset's expression, or one naming a
    terminal that ``terminals`` lacks (the parser then says which)."""
    entry = CODE.get(expression)
    if entry is None or not all(name in terminals for name in entry[0]):
        return None
    args, body = entry
    text = source(args, body)
    # registered with linecache as lambdify registers its own: the kernel reads it there
    filename = f"<recrawl-preset-{next(_counter)}>"
    namespace = _namespace(args, body)
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - our own stored code
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    symbol = body if body in args else None
    return namespace["_lambdifygenerated"], args, symbol
