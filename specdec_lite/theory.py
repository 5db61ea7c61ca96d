"""Closed forms from Leviathan, Kalman & Matias (2023), §3.

Notation: ``alpha`` is the expected acceptance probability E[β] with
β = Σ_x min(p(x), q(x)); ``k`` is the number of draft tokens per step (γ in the
paper); ``c`` is the cost of one draft call divided by one target call.
These formulas assume each draft token is accepted independently with
probability ``alpha``.
"""

from __future__ import annotations

import numbers

import numpy as np

from .distributions import check_probs, overlap


def _check_alpha(alpha: float | np.ndarray) -> np.ndarray:
    a = np.asarray(alpha, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any((a < 0) | (a > 1)):
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    return a


def _check_k(k: int | np.ndarray, minimum: int = 0) -> np.ndarray:
    arr = np.asarray(k)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < minimum):
        raise ValueError(f"k must be an integer >= {minimum}, got {k!r}")
    return arr


def _check_cost(c: float | np.ndarray) -> np.ndarray:
    arr = np.asarray(c, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"c must be finite and >= 0, got {c!r}")
    return arr


def _scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    return float(x) if x.ndim == 0 else x


def acceptance_probability(p: np.ndarray, q: np.ndarray) -> float | np.ndarray:
    """β = Σ_x min(p(x), q(x)) = 1 − TV(p, q): the chance a draft token from q is accepted."""
    p = check_probs(p, "p")
    q = check_probs(q, "q", vocab_size=p.shape[-1])
    return _scalar_or_array(np.asarray(overlap(p, q)))


def expected_tokens_per_step(alpha: float | np.ndarray, k: int | np.ndarray) -> float | np.ndarray:
    """E[tokens per target call] = (1 − α^(k+1)) / (1 − α), which tends to k + 1 as α → 1.

    Counts the accepted draft tokens plus the one correction or bonus token (τ).
    """
    a = _check_alpha(alpha)
    k = _check_k(k)
    near_one = np.isclose(a, 1.0, rtol=0.0, atol=1e-12)
    d = np.where(near_one, 0.5, 1.0 - a)  # 1 − α, exact for α near 1
    with np.errstate(divide="ignore"):  # log1p(−1) = −inf at α = 0 gives 1 − 0 = 1
        # 1 − α^(k+1) computed as −expm1((k+1)·log(1 − d)): no cancellation as α → 1
        value = np.where(near_one, k + 1.0, -np.expm1((k + 1) * np.log1p(-d)) / d)
    return _scalar_or_array(value)


def expected_speedup(
    alpha: float | np.ndarray,
    k: int | np.ndarray,
    c: float | np.ndarray,
    verify_cost: float | np.ndarray = 1.0,
) -> float | np.ndarray:
    """Leviathan Thm 3.8: speedup = (1 − α^(k+1)) / ((1 − α)(k·c + 1)).

    With the default ``verify_cost=1`` a target call over k + 1 tokens is assumed to cost
    the same as over one token (the memory-bound accelerator regime). On a CPU it does
    not: pass the measured ratio T(k+1)/T(1) as ``verify_cost`` and the denominator becomes
    k·c + T(k+1)/T(1), the time of one speculative step in units of one plain step.
    """
    c = _check_cost(c)
    r = np.asarray(verify_cost, dtype=np.float64)
    if not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError(f"verify_cost must be finite and > 0, got {verify_cost!r}")
    value = np.asarray(expected_tokens_per_step(alpha, k)) / (np.asarray(k) * c + r)
    return _scalar_or_array(value)


def optimal_k(alpha: float, c: float, k_max: int = 64) -> int:
    """The k in 1..k_max that maximises ``expected_speedup(alpha, k, c)``.

    If the best speedup is below 1, speculative decoding does not pay at all for
    this (α, c); check ``expected_speedup`` at the returned k.
    """
    if isinstance(k_max, bool) or not isinstance(k_max, numbers.Integral) or k_max < 1:
        raise ValueError(f"k_max must be an integer >= 1, got {k_max!r}")
    if np.ndim(alpha) or np.ndim(c):
        raise ValueError("optimal_k takes scalar alpha and c")
    ks = np.arange(1, k_max + 1)
    return int(ks[np.argmax(expected_speedup(alpha, ks, c))])
