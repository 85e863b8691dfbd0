"""A fitted random forest as plain arrays: saved without pickle, predicted with numpy.

The basket classifier lives in a history store's side storage (shared, for the
Redis store, by every crawler) and in ``--model`` files: a pickle there would
run whatever it names when read (CWE-502). So a scikit-learn forest is kept as
what prediction needs of each tree -- ``children_left``, ``children_right``,
``feature``, ``threshold`` and ``value`` of its ``tree_`` -- concatenated, and
predicted by a vectorised walk of every sample down every tree at once. The
bytes are an ``.npz`` read with ``allow_pickle=False``; every index is checked
on load (children point to later nodes of the same tree, features exist), so a
corrupt or hostile file fails with ``ValueError`` and never loops.

Chosen over ``skops``: that is a second serialisation framework with its own
trust list, for five arrays per tree; and this needs no scikit-learn to *use* a
model, only to fit one. The walk matches scikit-learn's: features compared as
float32 (``X <= threshold`` goes left), class shares averaged over the trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

_LEAF = -1  # scikit-learn's TREE_LEAF


@dataclass(frozen=True)
class Forest:
    """The trees of a fitted forest (classifier: ``classes`` set; regressor: None)."""

    roots: np.ndarray  # int64 [trees]: each tree's first node in the arrays below
    left: np.ndarray  # int64 [nodes]: global index of the left child, -1 at a leaf
    right: np.ndarray  # int64 [nodes]
    feature: np.ndarray  # int64 [nodes]
    threshold: np.ndarray  # float64 [nodes]
    value: np.ndarray  # float64 [nodes, classes] (class shares) or [nodes, 1]
    n_features: int
    classes: np.ndarray | None = None

    @classmethod
    def from_sklearn(cls, model: Any) -> Forest:
        """The arrays of a fitted ``RandomForestClassifier`` / ``RandomForestRegressor``
        (single output)."""
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("l", "r", "f", "t", "v")}
        roots, at = [], 0
        for est in model.estimators_:
            tree = est.tree_
            n = int(tree.node_count)
            roots.append(at)
            for key, arr in (("l", tree.children_left), ("r", tree.children_right)):
                arr = np.asarray(arr, dtype=np.int64)
                parts[key].append(np.where(arr == _LEAF, _LEAF, arr + at))
            parts["f"].append(np.asarray(tree.feature, dtype=np.int64))
            parts["t"].append(np.asarray(tree.threshold, dtype=np.float64))
            parts["v"].append(np.asarray(tree.value, dtype=np.float64)[:, 0, :])
            at += n
        classes = getattr(model, "classes_", None)
        return cls(
            np.asarray(roots, dtype=np.int64),
            np.concatenate(parts["l"]),
            np.concatenate(parts["r"]),
            np.concatenate(parts["f"]),
            np.concatenate(parts["t"]),
            np.concatenate(parts["v"]),
            int(model.n_features_in_),
            None if classes is None else np.asarray(classes),
        )

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        out = {
            "roots": self.roots,
            "left": self.left,
            "right": self.right,
            "feature": self.feature,
            "threshold": self.threshold,
            "value": self.value,
            "n_features": np.asarray([self.n_features], dtype=np.int64),
        }
        if self.classes is not None:
            out["classes"] = np.asarray(self.classes, dtype=np.int64)
        return {f"{prefix}{k}": v for k, v in out.items()}

    @classmethod
    def from_arrays(cls, data: Any, prefix: str) -> Forest:
        """The forest saved by :meth:`arrays`, checked; ``ValueError`` when it is not one."""

        def get(name: str, kind: str) -> np.ndarray:
            key = prefix + name
            if key not in data:
                raise ValueError(f"a saved forest without {name!r}")
            arr = np.asarray(data[key])
            if arr.dtype.kind not in kind:
                raise ValueError(f"{name!r} of a saved forest is {arr.dtype}")
            return arr

        roots = get("roots", "i").astype(np.int64)
        left, right = get("left", "i").astype(np.int64), get("right", "i").astype(np.int64)
        feature = get("feature", "i").astype(np.int64)
        threshold = get("threshold", "f").astype(np.float64)
        value = get("value", "f").astype(np.float64)
        n_features = get("n_features", "i").astype(np.int64)
        nodes = len(left)
        if (
            roots.ndim != 1
            or len(roots) == 0
            or n_features.shape != (1,)
            or n_features[0] < 1
            or any(a.shape != (nodes,) for a in (right, feature, threshold))
            or value.ndim != 2
            or value.shape[0] != nodes
            or value.shape[1] < 1
            or not np.isfinite(value).all()
        ):
            raise ValueError("a saved forest of inconsistent shapes")
        # each tree is a contiguous block from its root to the next one's; a child is a
        # later node of the same block (so every walk ends), a leaf has no child
        ends = np.append(roots[1:], nodes)
        if roots[0] != 0 or np.any(ends <= roots):
            raise ValueError("a saved forest whose trees do not tile its nodes")
        block_end = np.repeat(ends, ends - roots)
        index = np.arange(nodes)
        leaf = left == _LEAF
        inner = ~leaf
        if (
            np.any(leaf != (right == _LEAF))
            or np.any((left[inner] <= index[inner]) | (left[inner] >= block_end[inner]))
            or np.any((right[inner] <= index[inner]) | (right[inner] >= block_end[inner]))
            or np.any((feature[inner] < 0) | (feature[inner] >= n_features[0]))
            or np.isnan(threshold[inner]).any()
        ):
            raise ValueError("a saved forest with a node out of its tree")
        classes = None
        if prefix + "classes" in data:
            classes = get("classes", "i").astype(np.int64)
            if classes.shape != (value.shape[1],):
                raise ValueError("a saved forest whose classes do not match its values")
        return cls(roots, left, right, feature, threshold, value, int(n_features[0]), classes)

    def _leaves(self, features: np.ndarray) -> np.ndarray:
        """``[samples, trees]``: the leaf each sample reaches in each tree."""
        x = np.asarray(features, dtype=np.float32).astype(np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"expected {self.n_features} features per row, got {x.shape}")
        node = np.broadcast_to(self.roots, (len(x), len(self.roots))).copy()
        rows = np.arange(len(x))[:, None]
        while True:
            inner = self.left[node] != _LEAF
            if not inner.any():
                return node
            f = np.where(inner, self.feature[node], 0)
            go_left = x[rows, f] <= self.threshold[node]
            node = np.where(inner, np.where(go_left, self.left[node], self.right[node]), node)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Class labels (classifier: the class of the highest mean share), or the mean
        of the trees' values (regressor)."""
        values = self.value[self._leaves(features)]  # [samples, trees, k]
        if self.classes is None:
            return values[:, :, 0].mean(axis=1)
        totals = values.sum(axis=2, keepdims=True)
        shares = np.divide(values, totals, out=np.zeros_like(values), where=totals > 0)
        return self.classes[np.argmax(shares.mean(axis=1), axis=1)]
