"""Next-token distributions: validation, temperature, top-k/top-p, sampling, distances.

Every function here works on probability rows: arrays whose last axis has
length V and sums to 1. Shapes are noted as ``[..., V]``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

#: How far a row sum may be from 1 before a distribution is rejected.
SUM_TOL = 1e-6


def as_generator(seed: int | np.random.Generator | None) -> np.random.Generator:
    """Return ``seed`` if it is a Generator, else ``np.random.default_rng(seed)``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise TypeError(
            f"seed must be an int, a numpy Generator or None, got {type(seed).__name__}"
        )
    if seed is not None and seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return np.random.default_rng(seed)


def check_probs(
    probs: np.ndarray, name: str = "probs", vocab_size: int | None = None
) -> np.ndarray:
    """Validate probability rows and return them as float64.

    Raises ``ValueError`` naming ``name`` if any entry is NaN/inf or negative,
    if a row does not sum to 1 within ``SUM_TOL``, or if the last axis is not
    ``vocab_size`` long.
    """
    try:
        arr = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of numbers") from err
    if arr.ndim == 0:
        raise ValueError(f"{name} must have at least one axis of length vocab_size")
    if vocab_size is not None and arr.shape[-1] != vocab_size:
        raise ValueError(
            f"{name} has {arr.shape[-1]} entries per row, expected vocab_size={vocab_size}"
        )
    sums = arr.sum(axis=-1)
    if (
        arr.size
        and np.isfinite(sums).all()
        and arr.min() >= 0
        and np.abs(sums - 1.0).max() <= SUM_TOL
    ):
        return arr  # fast path: one pass for the common, valid case
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(f"{name} contains negative values")
    if np.any(np.abs(sums - 1.0) > SUM_TOL):
        worst = float(sums.ravel()[np.argmax(np.abs(sums - 1.0).ravel())])
        raise ValueError(
            f"{name} rows must sum to 1 (within {SUM_TOL}); found a row summing to {worst!r}"
        )
    return arr


def check_temperature(temperature: float) -> float:
    """Return ``temperature`` as a float, rejecting negatives, NaN and non-numbers."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a real number, got {type(temperature).__name__}")
    temperature = float(temperature)
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")
    return temperature


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax(z)_i = exp(z_i - max z) / sum_j exp(z_j - max z); -inf logits give 0."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def apply_temperature(probs: np.ndarray, temperature: float) -> np.ndarray:
    """Rescale rows as p_T(x) ∝ p(x)^(1/T); T == 0 gives the one-hot argmax.

    Equivalent to dividing the logits by T. Ties at T == 0 go to the lowest id.
    Zero-probability tokens stay at zero for every T.
    """
    temperature = check_temperature(temperature)
    p = np.asarray(probs, dtype=np.float64)  # [..., V]
    if temperature == 0.0:
        winner = np.argmax(p, axis=-1)[..., None]  # [..., 1]
        return (np.arange(p.shape[-1]) == winner).astype(np.float64)  # [..., V] one-hot
    if temperature == 1.0:
        return p.copy()
    with np.errstate(divide="ignore", over="ignore"):
        log_p = np.log(p)  # [..., V], -inf where p == 0
        # shift before dividing so the argmax logit is exactly 0: a tiny T then sends the
        # others to -inf instead of making every logit -inf (which would give NaN)
        log_p = (log_p - np.max(log_p, axis=-1, keepdims=True)) / temperature
    return softmax(log_p)


def top_k_filter(probs: np.ndarray, top_k: int) -> np.ndarray:
    """Keep the ``top_k`` most likely tokens of each row and renormalise."""
    p = np.asarray(probs, dtype=np.float64)  # [..., V]
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1:
        raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")
    if top_k >= p.shape[-1]:
        return p.copy()
    order = np.argsort(-p, axis=-1, kind="stable")
    keep = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(keep, order[..., :top_k], True, axis=-1)
    out = np.where(keep, p, 0.0)
    return out / out.sum(axis=-1, keepdims=True)


def top_p_filter(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Nucleus filter: keep the smallest set of most likely tokens whose mass reaches ``top_p``."""
    if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    p = np.asarray(probs, dtype=np.float64)  # [..., V]
    order = np.argsort(-p, axis=-1, kind="stable")  # [..., V]
    sorted_p = np.take_along_axis(p, order, axis=-1)
    mass_before = np.cumsum(sorted_p, axis=-1) - sorted_p  # mass of strictly more likely tokens
    keep_sorted = mass_before < top_p
    keep = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    out = np.where(keep, p, 0.0)
    return out / out.sum(axis=-1, keepdims=True)


def sample(probs: np.ndarray, rng: np.random.Generator) -> int:
    """Draw one token from a single row ``[V]`` by inverse CDF with one uniform from ``rng``.

    The row need not be normalised; a token with zero mass is never returned.
    """
    cdf = np.asarray(probs).cumsum()  # [V]; the array methods skip numpy's dispatch layer
    u = rng.random() * cdf[-1]
    return int(cdf.searchsorted(u, side="right"))


def overlap(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Σ_x min(p(x), q(x)) over the last axis: the probability that q's draft is accepted."""
    return np.minimum(p, q).sum(axis=-1)


def tv_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total-variation distance ½ Σ_x |p(x) − q(x)| = 1 − Σ_x min(p(x), q(x))."""
    return 0.5 * np.abs(np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64)).sum(
        axis=-1
    )


def entropy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy H(p) = −Σ p log p in nats, with 0 log 0 = 0."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=-1)
