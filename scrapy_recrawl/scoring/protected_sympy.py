"""The protected operators of :mod:`.protected` as sympy functions: what the parser
(scoring/parse.py) rewrites divisions, logs, powers, ``Min`` and ``Max`` into, and how
they print. lambdify maps them by name to the numpy functions of
:data:`~.protected._NUMPY_FUNCS`.

A module of its own so that sympy (a quarter of a second to import) is loaded only
by a process that parses an expression, not by every crawl that imports the scoring
package (a preset is compiled from its stored code: scoring/preset_code.py).
"""

from __future__ import annotations

from typing import Any

import sympy


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
