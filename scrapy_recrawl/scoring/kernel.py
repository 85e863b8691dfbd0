"""Fast evaluation of a compiled expression: cache-sized blocks, reused buffers.

:func:`~scrapy_recrawl.scoring.parse.compile_expression` turns an
expression into numpy code with :func:`sympy.lambdify`. Called on whole
arrays that code allocates a fresh array for every operation, and each
protected division or log adds three or four more passes. This module reads
the *same* generated Python expression (its :mod:`ast`, so the operations and
their order are exactly the reference's) and emits a block kernel:

* every operation writes into one of a few preallocated block buffers
  (``out=``), reusing an operand's buffer when the operand is a temporary;
* the whole expression runs over :data:`BLOCK` URLs at a time, so those
  buffers stay in the CPU cache;
* ``pdiv(a, b)`` is ``a / b`` plus a zero test of ``b``, and zeros are
  written only in blocks that have a zero divisor; ``plog(x)`` is ``log(x)``
  plus a ``x > 0`` test, and zeros are written only in blocks with
  ``x <= 0`` (or NaN). Same values as :func:`~.expression.pdiv` and
  :func:`~.expression.plog`, bit for bit (``x / b == x / (b + 0)`` for every
  ``b != 0``; a masked log computes each element as the unmasked one);
* constant sub-expressions are evaluated once, at compile time, by the
  reference code itself.

Anything the translator does not know (an unexpected name or node) makes
:func:`compile_kernel` return None and the caller keeps the reference
function, so the fast path can only be absent, never different. Only float64
inputs take it (integer inputs would follow integer arithmetic in the
reference). ``tests/test_scoring_kernel.py`` checks random expressions bit for
bit against the reference.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: URLs per block: 16 Ki float64 = 128 KiB a buffer; an expression's few
#: buffers and input slices stay in L2.
BLOCK = 1 << 14

_BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "_add",
    ast.Sub: "_sub",
    ast.Mult: "_mul",
    ast.Div: "_div",
}
# ndarray ** python scalar takes these ufuncs (numpy's fast_scalar_power);
# any other exponent is np.power
_POW_FAST: dict[float, str] = {
    0.5: "_sqrt",
    2.0: "_square",
    1.0: "_positive",
    -1.0: "_reciprocal",
}
_UNARY_CALLS = {"exp": "_exp", "abs": "_absolute"}

_NAMESPACE: dict[str, Any] = {
    "_add": np.add,
    "_sub": np.subtract,
    "_mul": np.multiply,
    "_div": np.divide,
    "_neg": np.negative,
    "_pos": np.positive,
    "_sqrt": np.sqrt,
    "_square": np.square,
    "_positive": np.positive,
    "_reciprocal": np.reciprocal,
    "_power": np.power,
    "_exp": np.exp,
    "_absolute": np.absolute,
    "_log": np.log,
    "_eq": np.equal,
    "_gt": np.greater,
    "_not": np.logical_not,
    "_copyto": np.copyto,
    "_minimum": np.minimum,
    "_maximum": np.maximum,
}


class _Unsupported(Exception):
    pass


class Kernel:
    """A block kernel for one expression; :meth:`__call__` scores whole arrays."""

    def __init__(self, fn: Callable[..., None], n_buffers: int, source: str) -> None:
        self._fn = fn
        self.n_buffers = n_buffers
        #: the generated block code (for debugging and tests)
        self.source = source

    def __call__(self, arrays: Sequence[np.ndarray], size: int) -> np.ndarray:
        out = np.empty(size)
        n = min(size, BLOCK)
        bufs = [np.empty(n) for _ in range(self.n_buffers)]
        mask = np.empty(n, dtype=bool)
        fn = self._fn
        with np.errstate(all="ignore"):
            for s in range(0, size, BLOCK):
                e = s + BLOCK
                if e > size:
                    e = size
                    n = e - s
                    bufs = [b[:n] for b in bufs]
                    mask = mask[:n]
                fn(*[a[s:e] for a in arrays], out[s:e], mask, *bufs)
        return out


def compile_kernel(fn: Callable[..., Any], names: Sequence[str]) -> Kernel | None:
    """The block kernel of a lambdify-generated ``fn(*names)``, or None if unsupported."""
    try:
        tree = ast.parse(_source(fn))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0] if tree.body else None
    if (
        not isinstance(func, ast.FunctionDef)
        or len(func.body) != 1
        or not isinstance(func.body[0], ast.Return)
        or func.body[0].value is None
        or [a.arg for a in func.args.args] != list(names)
    ):
        return None
    try:
        return _Translator(fn, list(names)).kernel(func.body[0].value)
    except Exception:  # noqa: BLE001 - _Unsupported, or a constant the reference refuses too
        return None


def _source(fn: Callable[..., Any]) -> str:
    # lambdify registers its generated source with linecache: read it there
    # (inspect.getsource would re-tokenize it to find the function's end)
    entry: Any = linecache.cache.get(fn.__code__.co_filename)  # (size, mtime, lines, name)
    if entry is not None and entry[2]:
        return "".join(entry[2])
    return inspect.getsource(fn)


_CONST_OPS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _literal(node: ast.AST) -> int | float | None:
    """A number, or ``+ - * /`` of numbers (``1/2``), as Python's eval computes it; else None."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _CONST_OPS:
        x = _literal(node.operand)
        return None if x is None else _CONST_OPS[type(node.op)](x)
    if isinstance(node, ast.BinOp) and type(node.op) in _CONST_OPS:
        a, b = _literal(node.left), _literal(node.right)
        if a is None or b is None:
            return None
        return _CONST_OPS[type(node.op)](a, b)
    return None


class _Translator:
    """Post-order walk of the return expression, emitting one line per operation."""

    def __init__(self, fn: Callable[..., Any], names: list[str]) -> None:
        self.ref_globals = fn.__globals__  # the reference namespace, for constants
        self.args = {name: f"a{i}" for i, name in enumerate(names)}
        self.lines: list[str] = []
        self.consts: list[Any] = []
        self.free: list[str] = []
        self.n_buffers = 0
        self._const_nodes: dict[int, bool] = {}

    # values: ("in", name) | ("tmp", name) | ("const", python object)

    def kernel(self, root: ast.expr) -> Kernel | None:
        if self._is_const(root):
            return None  # a constant score: the reference broadcasts it
        if isinstance(root, ast.Name):
            return None  # a bare terminal: nothing to evaluate
        value = self.visit(root, dest="out")
        if value != ("tmp", "out"):
            raise _Unsupported("root did not land in out")
        params = [*self.args.values(), "out", "m", *[f"b{i}" for i in range(self.n_buffers)]]
        body = "\n".join(f"    {line}" for line in self.lines)
        source = f"def _kernel({', '.join(params)}):\n{body}\n"
        namespace = dict(_NAMESPACE)
        namespace["_c"] = tuple(self.consts)
        exec(compile(source, "<scrapy_recrawl.scoring.kernel>", "exec"), namespace)  # noqa: S102
        return Kernel(namespace["_kernel"], self.n_buffers, source)

    # ---------------------------------------------------------------- helpers

    def _is_const(self, node: ast.AST) -> bool:
        """No terminal below ``node`` (memoised: linear in the tree, not quadratic)."""
        key = id(node)
        known = self._const_nodes.get(key)
        if known is None:
            if isinstance(node, ast.Name):
                known = node.id not in self.args
            else:
                # no short-circuit: every child gets memoised on the way
                known = all([self._is_const(c) for c in ast.iter_child_nodes(node)])
            self._const_nodes[key] = known
        return known

    def _const(self, node: ast.expr) -> tuple[str, Any]:
        value = _literal(node)
        if value is not None:
            return ("const", value)
        if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(node)):
            # a Python integer power can take for ever (10**10**10): leave it
            # to the reference, which computes it only when scoring
            raise _Unsupported("constant integer power")
        code = compile(ast.Expression(body=node), "<constant>", "eval")
        with np.errstate(all="ignore"):
            value = eval(code, self.ref_globals)  # noqa: S307 - generated by lambdify
        return ("const", value)

    def _ref(self, value: tuple[str, Any]) -> str:
        kind, v = value
        if kind == "const":
            self.consts.append(v)
            return f"_c[{len(self.consts) - 1}]"
        return v

    def _dest(self, operands: list[tuple[str, Any]], dest: str | None) -> str:
        """Where an operation writes: ``dest``, an operand temporary, or a free buffer."""
        temps = [v for kind, v in operands if kind == "tmp" and v != "out"]
        if dest is not None:
            self.free.extend(temps)
            return dest
        if temps:
            self.free.extend(temps[1:])
            return temps[0]
        if self.free:
            return self.free.pop()
        self.n_buffers += 1
        return f"b{self.n_buffers - 1}"

    def _emit(self, ufunc: str, operands: list[tuple[str, Any]], dest: str | None) -> tuple:
        refs = [self._ref(v) for v in operands]
        target = self._dest(operands, dest)
        self.lines.append(f"{ufunc}({', '.join(refs)}, out={target})")
        return ("tmp", target)

    # ---------------------------------------------------------------- visit

    def visit(self, node: ast.expr, dest: str | None = None) -> tuple[str, Any]:
        if self._is_const(node):
            return self._const(node)
        if isinstance(node, ast.Name):
            return ("in", self.args[node.id])
        if isinstance(node, ast.BinOp):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(node.op, ast.Pow):
                return self._pow(left, right, dest)
            ufunc = _BINOPS.get(type(node.op))
            if ufunc is None:
                raise _Unsupported(type(node.op).__name__)
            return self._emit(ufunc, [left, right], dest)
        if isinstance(node, ast.UnaryOp):
            ops = {ast.USub: "_neg", ast.UAdd: "_pos"}
            if type(node.op) not in ops:
                raise _Unsupported(type(node.op).__name__)
            return self._emit(ops[type(node.op)], [self.visit(node.operand)], dest)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            return self._call(node.func.id, node.args, dest)
        raise _Unsupported(type(node).__name__)

    def _call(self, name: str, args: list[ast.expr], dest: str | None) -> tuple[str, Any]:
        if any(isinstance(a, ast.Starred) for a in args):
            raise _Unsupported("starred")
        if name in _UNARY_CALLS and len(args) == 1:
            return self._emit(_UNARY_CALLS[name], [self.visit(args[0])], dest)
        if name == "_PDiv" and len(args) == 2:
            return self._pdiv(self.visit(args[0]), self.visit(args[1]), dest)
        if name == "_PLog" and len(args) == 1:
            return self._plog(self.visit(args[0]), dest)
        if name == "_PPow" and len(args) == 2:
            return self._pow(self.visit(args[0]), self.visit(args[1]), dest)
        if name in ("_FMin", "_FMax") and len(args) >= 2:
            ufunc = "_minimum" if name == "_FMin" else "_maximum"
            acc = self.visit(args[0])
            for i, a in enumerate(args[1:], start=2):
                acc = self._emit(ufunc, [acc, self.visit(a)], dest if i == len(args) else None)
            return acc
        raise _Unsupported(name)

    def _pow(self, base: tuple, exponent: tuple, dest: str | None) -> tuple[str, Any]:
        # the reference: float64 base ** float(exponent) for a constant exponent
        # (numpy's fast paths), np.power otherwise
        if exponent[0] == "const" and np.ndim(exponent[1]) == 0:
            c = float(exponent[1])
            if c == 0.0:
                target = self._dest([base], dest)
                self.lines.append(f"{target}.fill(1.0)")
                return ("tmp", target)
            if c in _POW_FAST:
                return self._emit(_POW_FAST[c], [base], dest)
            return self._emit("_power", [base, ("const", c)], dest)
        if base[0] == "const":
            base = ("const", np.float64(base[1]))
        return self._emit("_power", [base, exponent], dest)

    def _pdiv(self, a: tuple, b: tuple, dest: str | None) -> tuple[str, Any]:
        if b[0] == "const":
            if np.ndim(b[1]) != 0:
                raise _Unsupported("array constant")
            if float(b[1]) == 0.0:
                target = self._dest([a], dest)
                self.lines.append(f"{target}.fill(0.0)")
                return ("tmp", target)
            return self._emit("_div", [a, ("const", np.float64(b[1]))], dest)
        if a[0] == "const":
            a = ("const", np.float64(a[1]))
        rb = self._ref(b)
        self.lines.append(f"_eq({rb}, 0.0, out=m)")
        value = self._emit("_div", [a, ("tmp" if b[0] == "tmp" else "in", rb)], dest)
        self.lines.append(f"if m.any(): _copyto({value[1]}, 0.0, where=m)")
        return value

    def _plog(self, x: tuple, dest: str | None) -> tuple[str, Any]:
        rx = self._ref(x)
        self.lines.append(f"_gt({rx}, 0.0, out=m)")
        value = self._emit("_log", [(x[0], rx)], dest)
        t = value[1]
        self.lines.append(f"if not m.all(): _not(m, out=m); _copyto({t}, 0.0, where=m)")
        return value
