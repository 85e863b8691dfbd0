"""GP4C's genetic programming: expression trees, their operators, and their evaluation.

Santos et al. 2013 sec. 4 and 2015 sec. 4.1-4.2 (``../shared/papers/000``,
``002``). An *individual* is a tree of functions ``+ - * / log pow exp`` over
terminals (the page features of the terminal registry,
:mod:`scrapy_recrawl.scoring.registry`, with the plug-ins' of
:mod:`scrapy_recrawl.plugin_terminals`, and
the constants 0.001 0.01 0.1 0.5 1 10 100 1000). Division, ``log`` and
``pow`` are the scorer's protected definitions
(:func:`~scrapy_recrawl.scoring.pdiv`, :func:`~scrapy_recrawl.scoring.plog`
and its protected power), so a tree scores what its printed expression scores
once ``RECRAWL_SCORER`` parses it.

Trees are immutable nested tuples, which makes them hashable (fitness caching
by canonical expression) and cheap to share between generations:

* a terminal is its name (``"X"``), a constant a float (``0.5``);
* a function node is ``(op, child)`` or ``(op, left, right)``.

Depth follows lil-gp / Koza: a lone terminal has depth 0, so ``max_depth=10``
allows 11 levels. :func:`to_expression` prints a tree as a string that sympy
and :meth:`Scorer.from_spec <scrapy_recrawl.scoring.Scorer.from_spec>` parse.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Union

import numpy as np

from scrapy_recrawl.plugin_terminals import default_registry
from scrapy_recrawl.scoring import (
    pdiv,
    plog,
    ppow,  # the scorer's protected power
)
from scrapy_recrawl.scoring.presets import PRESETS
from scrapy_recrawl.scoring.registry import TerminalRegistry

Tree = Union[str, float, tuple]  # noqa: UP007 -- a recursive alias, readable in 3.10

#: GP4C's functions, name -> arity (Santos et al. 2015 sec. 4.2.1).
FUNCTIONS: dict[str, int] = {"+": 2, "-": 2, "*": 2, "/": 2, "log": 1, "pow": 2, "exp": 1}
#: GP4C's constants.
CONSTANTS: tuple[float, ...] = (0.001, 0.01, 0.1, 0.5, 1.0, 10.0, 100.0, 1000.0)
#: The papers' basic features (Santos et al. 2013).
BASIC_TERMINALS: tuple[str, ...] = ("n", "X", "t")
#: The 2015 paper's estimators, and this package's smoothed ones (the prior).
ESTIMATOR_TERMINALS: tuple[str, ...] = ("CG", "NAD", "SAD", "AAD", "GAD")
SMOOTHED_TERMINALS: tuple[str, ...] = ("CGp", "NADp", "SADp", "AADp", "GADp")
#: Content terminals: only where the history records change magnitudes.
CONTENT_TERMINALS: tuple[str, ...] = ("D", "A", "R", "M")
#: Paper 004's window terminals at the default window (RECRAWL_WINDOW = 3): the
#: change indicators of the last 3 observations and the distances 1..3 visits
#: back (on change matrices D_i = max(C_1..C_i), see content/window.py).
WINDOW_TERMINALS: tuple[str, ...] = ("C1", "C2", "C3", "D1", "D2", "D3")
#: Paper 004's related pages: ``Q``, the experts' recent change evidence weighted by
#: their cross-correlation (content/related.py). PopulationReplay keeps, per group of
#: individuals that fetched the same URLs, the observation log and related-page index
#: simulate_content keeps, and evaluates Q trees per URL (slower than the others).
RELATED_TERMINALS: tuple[str, ...] = ("Q",)
TERMINAL_SETS: dict[str, tuple[str, ...]] = {
    "basic": BASIC_TERMINALS,
    "all": BASIC_TERMINALS + ESTIMATOR_TERMINALS + SMOOTHED_TERMINALS,
    # ``all`` plus paper 004's terminals: the window (PopulationReplay keeps it as
    # state columns) and Q (kept per group of individuals)
    "window": BASIC_TERMINALS
    + ESTIMATOR_TERMINALS
    + SMOOTHED_TERMINALS
    + WINDOW_TERMINALS
    + RELATED_TERMINALS,
}

_BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": pdiv,
    "pow": ppow,
}
_UNARY_OPS: dict[str, Callable[[Any], Any]] = {"log": plog, "exp": np.exp}


def replayed(registry: TerminalRegistry | None = None) -> tuple[str, ...]:
    """The terminals the replay gives: the registry's (None: the built-in ones) but those
    that need the wall clock (``hours``, and ``due``, which also needs a basket model).
    Paper 004's window terminals C1..C5 / D1..D5 (PopulationReplay's ``window``) and
    its related-pages terminal Q (PopulationReplay's ``related``) are replayed."""
    reg = default_registry() if registry is None else registry
    clock = reg.clock_names()
    return tuple(n for n in reg if n not in clock)


def uses_related(terminals: Iterable[str]) -> bool:
    """Whether the terminals include paper 004's related-pages terminal ``Q``."""
    return "Q" in set(terminals)


def window_of(terminals: Iterable[str]) -> int:
    """The replay window the terminals need: 0 without ``C*`` / ``D*``, else at least
    RECRAWL_WINDOW's default (3) and at least the largest index used (``C5`` -> 5).

    Terminals beyond the window are NaN, in the replay as in a crawl."""
    used = [int(n[1:]) for n in terminals if len(n) == 2 and n[0] in "CD" and n[1].isdigit()]
    return max(3, *used) if used else 0


def registry_terminals(registry: TerminalRegistry | None = None) -> tuple[str, ...]:
    """The ``registry`` set: ``all``, then every other terminal of the registry the replay
    gives from a change matrix (the store's columns: no plug-in's, no wall clock, no
    change magnitude), in the registry's order. A terminal registered in scoring/ (the
    policies', the pooled priors') joins the GP's set without a change here; it is
    evaluated per URL unless it is one of the core's (population.py: ``_class_local``)."""
    reg = default_registry() if registry is None else registry
    base = TERMINAL_SETS["all"]
    clock = reg.clock_names()
    extra = [
        n
        for n in reg
        if n not in base
        and n not in clock
        and n not in CONTENT_TERMINALS
        and not reg.providers((n,))
    ]
    return base + tuple(extra)


def terminal_set(
    spec: str, *, content: bool = False, registry: TerminalRegistry | None = None
) -> tuple[str, ...]:
    """``basic``, ``all`` (plus D A R M when ``content``), ``window`` (``all`` + C1..C3
    D1..D3 + Q, paper 004), ``registry`` (:func:`registry_terminals`) or a comma list of
    terminal names (of ``registry``; None: the default one)."""
    key = spec.strip()
    if key.lower() == "registry":
        return registry_terminals(registry)
    if key.lower() in TERMINAL_SETS:
        names = TERMINAL_SETS[key.lower()]
        return names + CONTENT_TERMINALS if content and key.lower() in ("all", "window") else names
    names = tuple(dict.fromkeys(s.strip() for s in key.split(",") if s.strip()))
    registry = default_registry() if registry is None else registry
    known = replayed(registry)
    bad = [s for s in names if s not in known]
    if not names or bad:
        hints = []
        for s in bad:
            if s in registry:  # needs the clock
                hints.append(f"{s!r} needs the wall clock, which the replay has not")
            elif (close := registry.suggest(s)) in known:
                hints.append(f"did you mean {close!r} for {s!r}?")
        hint = f" ({'; '.join(hints)})" if hints else ""
        raise ValueError(
            f"--terminals={spec!r}: expected 'basic', 'all', 'window', 'registry' or a comma list "
            "of terminal names "
            f"({', '.join(known)}); unknown: {', '.join(bad) or '(empty)'}{hint}"
        )
    if not content and set(names) & set(CONTENT_TERMINALS):
        raise ValueError(
            f"--terminals={spec!r}: the content terminals D, A, R, M need change magnitudes, "
            "which this history does not have"
        )
    return names


# --------------------------------------------------------------------------- shape


def depth(tree: Tree) -> int:
    """Longest root-to-leaf path in edges (a lone terminal: 0)."""
    if not isinstance(tree, tuple):
        return 0
    return 1 + max(depth(c) for c in tree[1:])


def size(tree: Tree) -> int:
    """Number of nodes."""
    if not isinstance(tree, tuple):
        return 1
    return 1 + sum(size(c) for c in tree[1:])


def nodes(
    tree: Tree, path: tuple[int, ...] = (), level: int = 0
) -> list[tuple[tuple[int, ...], int]]:
    """Every node as ``(path, level)``, preorder; ``path`` indexes children (1-based, as in the tuple)."""
    out = [(path, level)]
    if isinstance(tree, tuple):
        for i, child in enumerate(tree[1:], start=1):
            out.extend(nodes(child, (*path, i), level + 1))
    return out


def subtree(tree: Tree, path: Sequence[int]) -> Tree:
    for i in path:
        tree = tree[i]  # type: ignore[index]
    return tree


def replace(tree: Tree, path: Sequence[int], new: Tree) -> Tree:
    """A copy of ``tree`` with the node at ``path`` replaced by ``new``."""
    if not path:
        return new
    assert isinstance(tree, tuple)
    i = path[0]
    return (*tree[:i], replace(tree[i], path[1:], new), *tree[i + 1 :])


def terminals_used(tree: Tree) -> frozenset[str]:
    if isinstance(tree, str):
        return frozenset((tree,))
    if isinstance(tree, tuple):
        return frozenset().union(*(terminals_used(c) for c in tree[1:]))
    return frozenset()


# --------------------------------------------------------------------------- printing


def _const(value: float) -> str:
    return f"{value:g}" if value >= 1 else repr(float(value))


def _fmt(tree: Tree) -> str:
    if isinstance(tree, str):
        return tree
    if not isinstance(tree, tuple):
        return _const(float(tree))
    op = tree[0]
    if op in ("log", "exp"):
        return f"{op}({_fmt(tree[1])})"
    if op == "pow":
        return f"pow({_fmt(tree[1])}, {_fmt(tree[2])})"
    return f"({_fmt(tree[1])} {op} {_fmt(tree[2])})"


def to_expression(tree: Tree) -> str:
    """The tree as a fully parenthesised expression (``RECRAWL_SCORER`` and sympy parse it)."""
    text = _fmt(tree)
    if isinstance(tree, tuple) and tree[0] in _BINARY_OPS and tree[0] != "pow":
        text = text[1:-1]
    elif isinstance(tree, str) and tree.lower() in PRESETS:
        # a lone ``CG`` / ``NAD`` ... would be read back as the preset of that name
        # (``1 - exp(-CG*t)``): parenthesised, it is the terminal
        text = f"({text})"
    return text


# --------------------------------------------------------------------------- evaluation


class Interner:
    """Hash-consing of subtrees: equal subtrees get one integer id.

    Lets a whole population be evaluated with one memo per cycle, so a subtree
    shared by many individuals (crossover copies them around) is computed once.
    """

    def __init__(self) -> None:
        self._ids: dict[Tree, int] = {}
        #: id -> ("v", name) | ("c", value) | (op, child ids ...)
        self.nodes: list[tuple] = []

    def intern(self, tree: Tree) -> int:
        found = self._ids.get(tree)
        if found is not None:
            return found
        if isinstance(tree, str):
            node: tuple = ("v", tree)
        elif isinstance(tree, tuple):
            node = (tree[0], *(self.intern(c) for c in tree[1:]))
        else:
            node = ("c", float(tree))
        ident = len(self.nodes)
        self.nodes.append(node)
        self._ids[tree] = ident
        return ident

    def evaluate(self, ident: int, terms: Mapping[str, np.ndarray], memo: dict[int, Any]) -> Any:
        """Value of node ``ident`` over ``terms`` (memoised in ``memo``; errors silenced by the caller)."""
        value = memo.get(ident)
        if value is not None:
            return value
        node = self.nodes[ident]
        op = node[0]
        if op == "v":
            value = terms[node[1]]
        elif op == "c":
            value = node[1]
        elif op in _UNARY_OPS:
            value = _UNARY_OPS[op](self.evaluate(node[1], terms, memo))
        else:
            value = _BINARY_OPS[op](
                self.evaluate(node[1], terms, memo), self.evaluate(node[2], terms, memo)
            )
        memo[ident] = value
        return value


def evaluate(tree: Tree, terms: Mapping[str, np.ndarray]) -> np.ndarray:
    """Scores of ``tree`` over terminal arrays (float64, one per URL)."""
    size_ = int(np.shape(next(iter(terms.values())))[0])
    interner = Interner()
    with np.errstate(all="ignore"):
        out = np.asarray(interner.evaluate(interner.intern(tree), terms, {}), dtype=np.float64)
    if out.shape != (size_,):
        out = np.broadcast_to(out, (size_,)).copy()
    return out


# --------------------------------------------------------------------------- creation


def random_tree(
    rng: random.Random,
    terminals: Sequence[str],
    max_depth: int,
    *,
    full: bool,
    function_root: bool = True,
) -> Tree:
    """Koza's *full* (every branch to ``max_depth``) or *grow* method.

    With ``function_root`` (the initial population) the root is a function, as
    in Koza's grow; replacement mutation passes False, so a leaf may come out.
    """
    leaves: list[Tree] = [*terminals, *CONSTANTS]
    funcs = list(FUNCTIONS)
    if max_depth <= 0:
        return rng.choice(leaves)
    if not full and not function_root and rng.random() < len(leaves) / (len(leaves) + len(funcs)):
        return rng.choice(leaves)
    op = rng.choice(funcs)
    children = [
        random_tree(rng, terminals, max_depth - 1, full=full, function_root=False)
        for _ in range(FUNCTIONS[op])
    ]
    return (op, *children)


def ramped_half_and_half(
    rng: random.Random,
    count: int,
    terminals: Sequence[str],
    *,
    min_depth: int = 2,
    max_depth: int = 6,
    tries: int = 20,
) -> list[Tree]:
    """``count`` trees, depths ramped over ``min_depth..max_depth``, half full, half grow.

    Duplicates are re-drawn (up to ``tries`` times each), as Koza does.
    """
    max_depth = max(min_depth, max_depth)
    depths = list(range(min_depth, max_depth + 1))
    seen: set[Tree] = set()
    out: list[Tree] = []
    for i in range(count):
        d = depths[i % len(depths)]
        full = (i // len(depths)) % 2 == 0
        tree = random_tree(rng, terminals, d, full=full)
        for _ in range(tries):
            if tree not in seen:
                break
            tree = random_tree(rng, terminals, d, full=full)
        seen.add(tree)
        out.append(tree)
    return out


def _chance_of_change(rate: str) -> Tree:
    """``1 - exp(-rate*t)`` (Tan & Mitra's score) as a tree printed the way sympy parses it."""
    return ("-", 1.0, ("exp", ("-", 0.0, ("*", rate, "t"))))


#: The scoring presets (scrapy_recrawl/scoring/presets.py) as trees, in the order of
#: PAPER_PRESETS, SMOOTHED_PRESETS, CONTENT_PRESETS (``rand`` is no formula, ``basket``
#: needs a model). Each scores exactly as its preset (``0.0 - x`` is ``-x``; ``experts``
#: up to rounding, sympy reorders its sum); tests/test_gp.py checks it.
PRESET_TREES: dict[str, Tree] = {
    "cg": _chance_of_change("CG"),
    "nad": _chance_of_change("NAD"),
    "sad": _chance_of_change("SAD"),
    "aad": _chance_of_change("AAD"),
    "gad": _chance_of_change("GAD"),
    "age": "t",
    "gp4c": ("*", "t", "X"),
    "cg_raw": "CG",
    "cg+": _chance_of_change("CGp"),
    "nad+": _chance_of_change("NADp"),
    "sad+": _chance_of_change("SADp"),
    "aad+": _chance_of_change("AADp"),
    "gad+": _chance_of_change("GADp"),
    # paper 004's weighted majority of the page and its experts (needs Q)
    "experts": ("/", ("+", _chance_of_change("AADp"), _chance_of_change("Q")), 2.0),
}


def tree_of_expression(text: str, registry: TerminalRegistry | None = None) -> Tree | None:
    """A scorer expression as a GP tree, or None when it uses a function the GP has not
    (``Min``, ``Max``, ``sqrt``, ``Abs``: ``nutch``'s clamp, for one).

    Parsed by the scorer's own parser (scoring/parse.py), then rewritten with the GP's
    functions: a sum or product of many terms as nested pairs, ``-x`` as ``0 - x``,
    ``x**-1`` as ``1 / x`` (both protected as the scorer protects them), numbers as
    constants. The tree scores what the expression scores (up to rounding: sympy
    reorders sums and products)."""
    import sympy

    from scrapy_recrawl.scoring.parse import parse_expression

    reg = default_registry() if registry is None else registry
    try:
        expr = parse_expression(text, registry=reg)
    except ValueError:
        return None

    def pair(op: str, parts: list[Tree]) -> Tree:
        out = parts[0]
        for p in parts[1:]:
            out = (op, out, p)
        return out

    def conv(e: Any) -> Tree | None:
        if isinstance(e, sympy.Symbol):
            return str(e.name)
        if isinstance(e, sympy.Number):
            return float(e)
        maybe = [conv(a) for a in e.args]
        args: list[Tree] = [a for a in maybe if a is not None]
        if len(args) < len(maybe):
            return None
        if isinstance(e, sympy.Add):
            return pair("+", args)
        if isinstance(e, sympy.Mul):
            if len(args) == 2 and args[0] == -1.0:
                return ("-", 0.0, args[1])
            return pair("*", args)
        if isinstance(e, sympy.Pow):
            base, power = args
            return ("/", 1.0, base) if power == -1.0 else ("pow", base, power)
        name = type(e).__name__.lstrip("_").lower()  # exp, and the protected _PLog
        if name in ("exp", "plog", "log") and len(args) == 1:
            return ("exp" if name == "exp" else "log", args[0])
        return None

    return conv(expr)


def preset_trees(terminals: Sequence[str], registry: TerminalRegistry | None = None) -> list[Tree]:
    """The presets whose terminals are all in ``terminals``, as trees (seeding the population):
    :data:`PRESET_TREES`, then every other preset of scoring/presets.py that
    :func:`tree_of_expression` can write (those added there, such as ``chogm`` or
    ``lambdacrawl``, join without a change here).

    Seeding a GP's initial population with known good solutions is a standard
    practice (Langdon & Poli, *Foundations of GP*; Koza's "seeding"): the search
    then starts no worse than the baselines it is compared with, and crossover
    can recombine their parts (``1 - exp(-AADp*t)``'s ``AADp*t``, ...).
    """
    allowed = set(terminals)
    trees = list(PRESET_TREES.values())
    for name, preset in PRESETS.items():
        if name in PRESET_TREES or preset.expression is None:
            continue
        tree = tree_of_expression(preset.expression, registry)
        if tree is not None:
            trees.append(tree)
    return [t for t in unique(trees) if terminals_used(t) <= allowed]


# --------------------------------------------------------------------------- operators


def crossover(
    rng: random.Random,
    a: Tree,
    b: Tree,
    *,
    max_depth: int,
    max_crossover_depth: int,
    tries: int = 10,
) -> Tree | None:
    """Subtree crossover: a random subtree of ``a`` replaced by a random subtree of ``b``.

    Parents deeper than ``max_crossover_depth`` are not crossed (GP4C's maximum
    crossover depth: "the maximum depth of trees given as input to the crossover
    operation"); returns None then, or when no child within ``max_depth`` was found.
    """
    if depth(a) > max_crossover_depth or depth(b) > max_crossover_depth:
        return None
    na, nb = nodes(a), nodes(b)
    for _ in range(tries):
        pa, level = rng.choice(na)
        pb, _lb = rng.choice(nb)
        donor = subtree(b, pb)
        if level + depth(donor) <= max_depth:
            return replace(a, pa, donor)
    return None


def replacement_mutation(
    rng: random.Random,
    tree: Tree,
    terminals: Sequence[str],
    *,
    max_depth: int,
    max_new_depth: int = 4,
) -> Tree:
    """A random node replaced by a new random (grow) subtree, within ``max_depth``."""
    path, level = rng.choice(nodes(tree))
    room = max(0, min(max_new_depth, max_depth - level))
    return replace(tree, path, random_tree(rng, terminals, room, full=False, function_root=False))


def swap_mutation(rng: random.Random, tree: Tree, *, max_depth: int, tries: int = 10) -> Tree:
    """Two random non-overlapping subtrees of the individual swapped, within ``max_depth``.

    Returns the tree unchanged when it has no such pair (a lone terminal, a chain
    of unary functions).
    """
    all_nodes = nodes(tree)
    if len(all_nodes) < 3:
        return tree
    for _ in range(tries):
        (p1, l1), (p2, l2) = rng.sample(all_nodes, 2)
        if p1[: len(p2)] == p2 or p2[: len(p1)] == p1:
            continue  # one contains the other
        s1, s2 = subtree(tree, p1), subtree(tree, p2)
        if l1 + depth(s2) > max_depth or l2 + depth(s1) > max_depth:
            continue
        return replace(replace(tree, p1, s2), p2, s1)
    return tree


def tournament(
    rng: random.Random, population: Sequence[Tree], fitness: Sequence[float], size: int
) -> Tree:
    """The fittest of ``size`` individuals drawn at random (the first drawn on a tie)."""
    best = rng.randrange(len(population))
    for _ in range(size - 1):
        other = rng.randrange(len(population))
        if fitness[other] > fitness[best]:
            best = other
    return population[best]


def unique(trees: Iterable[Tree]) -> list[Tree]:
    return list(dict.fromkeys(trees))
