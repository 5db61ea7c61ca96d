"""Elementwise and row-wise activations: softmax, sigmoid, SiLU.

Each has one home here; the models, heads and distributions import them.
"""

from __future__ import annotations

import numpy as np


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:  # [..., V] -> [..., V] float64
    """softmax(z)_i = exp(z_i - max z) / sum_j exp(z_j - max z); -inf logits give 0.

    Computed in float64 whatever the input dtype, so rows sum to 1 to ~1e-15.
    """
    z = np.array(logits, dtype=np.float64)  # a fresh copy, then every step in place
    z -= z.max(axis=axis, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=axis, keepdims=True)
    return z


def softmax32(scores: np.ndarray) -> np.ndarray:  # [..., m] -> [..., m], dtype kept
    """:func:`softmax` over the last axis in the input's own dtype (float32 attention
    weights, where a float64 copy would cost more than the softmax itself)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), in the dtype of ``x``."""
    return 1.0 / (1.0 + np.exp(-x))


def silu(x: np.ndarray) -> np.ndarray:
    """SiLU(x) = x * sigmoid(x) = x / (1 + exp(-x)), in the dtype of ``x``."""
    return x / (1.0 + np.exp(-x))
