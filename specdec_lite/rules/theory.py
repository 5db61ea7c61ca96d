"""Closed forms from Leviathan, Kalman & Matias (2023), §3, and the grids the book draws.

Notation: ``alpha`` is the expected acceptance probability E[β] with
β = Σ_x min(p(x), q(x)); ``k`` is the number of draft tokens per step (γ in the
paper); ``c`` is the cost of one draft call divided by one target call.
These formulas assume each draft token is accepted independently with
probability ``alpha``.

A *verification cost* r(n) = T(n)/T(1) is the time of one target forward over n tokens
in units of a one-token forward. The paper takes r(n) = 1 (a memory-bound accelerator);
a CPU's measured curve grows with n. Functions that take a cost curve take ``ratio``,
with ``ratio[i] = r(sizes[i])`` and ``sizes`` = 1, 2, ..., len(ratio) unless given.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .distributions import apply_temperature, check_probs, overlap


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


def alpha_temperature_grid(
    p: np.ndarray, q: np.ndarray, t_targets: np.ndarray, t_drafts: np.ndarray
) -> np.ndarray:
    """α(T_target, T_draft) = Σ min(p_T, q_T') for target ``p`` [V] at each of ``t_targets``
    [A] and draft ``q`` [V] at each of ``t_drafts`` [B]: [A, B]."""
    t_targets = np.atleast_1d(np.asarray(t_targets, dtype=np.float64))  # [A]
    t_drafts = np.atleast_1d(np.asarray(t_drafts, dtype=np.float64))  # [B]
    for name, temps in (("t_targets", t_targets), ("t_drafts", t_drafts)):
        if temps.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {temps.shape}")
    p = check_probs(p, "p")  # [V]
    q = check_probs(q, "q", vocab_size=p.shape[-1])  # [V]
    if p.ndim != 1 or q.ndim != 1:
        raise ValueError("p and q must each be one distribution [V]")
    p_t = np.stack([apply_temperature(p, t) for t in t_targets])  # [A, V]
    q_t = np.stack([apply_temperature(q, t) for t in t_drafts])  # [B, V]
    return acceptance_probability(
        np.repeat(p_t, len(t_drafts), axis=0), np.tile(q_t, (len(t_targets), 1))
    ).reshape(len(t_targets), len(t_drafts))


def _check_sizes(n: object, name: str) -> np.ndarray:
    arr = np.asarray(n)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 1):
        raise ValueError(f"{name} must be integers >= 1, got {n!r}")
    return arr


def verify_ratio_at(
    n: int | np.ndarray,
    ratio: np.ndarray | None = None,
    width: int | None = None,
    *,
    sizes: np.ndarray | None = None,
) -> np.ndarray:
    """r(n) = T(n)/T(1) for each n (tokens in one target forward), same shape as ``n``.

    With ``width``: the SIMULATED accelerator, ceil(n / width), flat up to ``width``
    tokens. With ``ratio``: a measured curve, ``ratio[i]`` = r(``sizes[i]``) (``sizes``
    default 1..len(ratio)), NaN for an n it did not measure. With neither: r(n) = 1.
    """
    n = _check_sizes(n, "n")
    if width is not None:
        if ratio is not None:
            raise ValueError("give a measured ratio or a SIMULATED width, not both")
        if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width < 1:
            raise ValueError(f"width must be an integer >= 1, got {width!r}")
        return np.ceil(n / width)
    if ratio is None:
        return np.ones(n.shape)
    r = np.asarray(ratio, dtype=np.float64)  # [N]
    if r.ndim != 1 or not len(r) or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError(f"ratio must be a non-empty 1-D array of finite costs > 0, got {ratio!r}")
    sizes = np.arange(1, len(r) + 1) if sizes is None else _check_sizes(sizes, "sizes")
    if sizes.shape != r.shape or len(np.unique(sizes)) != len(sizes):
        raise ValueError(f"sizes must be {len(r)} distinct token counts, one per ratio")
    order = np.argsort(sizes)
    sizes, r = sizes[order], r[order]  # [N] each, by n
    at = np.clip(np.searchsorted(sizes, n), 0, len(sizes) - 1)  # same shape as n
    return np.where(sizes[at] == n, r[at], np.nan)


def speedup_curve(
    alpha: float,
    ks: np.ndarray,
    c: float,
    ratio: np.ndarray | None = None,
    width: int | None = None,
    *,
    sizes: np.ndarray | None = None,
) -> np.ndarray:
    """Thm 3.8 with a verification cost: E(α, k) / (k·c + r(k+1)) for every k in ``ks``
    (same shape), r from :func:`verify_ratio_at`; NaN where r(k+1) is unknown."""
    if np.ndim(alpha) or np.ndim(c):
        raise ValueError("speedup_curve takes scalar alpha and c")
    ks = _check_k(ks)
    r = verify_ratio_at(ks + 1, ratio, width, sizes=sizes)  # same shape as ks
    known = np.isfinite(r)
    out = np.full(ks.shape, np.nan)
    out[known] = expected_speedup(alpha, ks[known], c, verify_cost=r[known])
    return out


def optimal_k_grid(
    alphas: np.ndarray,
    cs: np.ndarray,
    k_max: int,
    ratio: np.ndarray | None = None,
    *,
    sizes: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The best k in 1..k_max and its speedup for every (c, α): two arrays [len(cs),
    len(alphas)]. With a measured ``ratio``, only the k whose r(k+1) it measured compete."""
    if isinstance(k_max, bool) or not isinstance(k_max, numbers.Integral) or k_max < 1:
        raise ValueError(f"k_max must be an integer >= 1, got {k_max!r}")
    alphas = np.asarray(alphas, dtype=np.float64)  # [A]
    cs = np.asarray(cs, dtype=np.float64)  # [C]
    if alphas.ndim != 1 or cs.ndim != 1:
        raise ValueError("alphas and cs must be 1-D")
    ks = np.arange(1, k_max + 1)  # [K]
    r = verify_ratio_at(ks + 1, ratio, sizes=sizes)  # [K]
    ks, r = ks[np.isfinite(r)], r[np.isfinite(r)]
    if not len(ks):
        raise ValueError("ratio must price at least one k in 1..k_max (an n = k + 1)")
    surface = expected_speedup(alphas[None, :, None], ks, cs[:, None, None], verify_cost=r)
    best = np.argmax(surface, axis=-1)  # surface: [C, A, K], best: [C, A]
    return ks[best], np.take_along_axis(surface, best[..., None], -1)[..., 0]


@dataclass(frozen=True)
class KTable:
    """Whether one more draft token pays, k by k (see :func:`best_k_table`). Each column
    is [K] for k = 1..K."""

    k: np.ndarray  # [K] 1..K
    speedup: np.ndarray  # [K] S(k) = E(k) / D(k)
    gain: np.ndarray  # [K] α^(k+1): the tokens the (k+1)-th draft adds per step
    price: np.ndarray  # [K] S(k)·(c + Δr): the time it adds, in tokens at the rate S(k)
    pays: np.ndarray  # [K] bool: gain > price, i.e. S(k+1) > S(k)
    best_k: int  # the k the test stops at: the first where pays is False (K + 1 if none)
    argmax_k: int  # the k in 1..K + 1 with the largest S (the first, on a tie)

    def __str__(self) -> str:
        """The table as text, one row per k."""
        lines = ["   k   S(k)   gain α^(k+1)   price S(k)(c + Δr)   one more pays"]
        for k, speedup, gain, price, pays in zip(self.k, self.speedup, self.gain, self.price,
                                                 self.pays, strict=True):
            lines.append(f"  {k:2d}  {speedup:5.2f}  {gain:13.3f}  {price:19.3f}   "
                         f"{'yes' if pays else 'no'}")
        return "\n".join(lines)


def best_k_table(alpha: float, c: float, verify_cost: float | np.ndarray = 1.0,
                 k_max: int = 16) -> KTable:
    """Grow k one token at a time and ask each time whether the next token pays.

    S(k) = E(k) / D(k) with E(k) = (1 − α^(k+1))/(1 − α) and D(k) = k·c + r(k+1). One more
    draft token adds E(k+1) − E(k) = α^(k+1) tokens and D(k+1) − D(k) = c + Δr of time,
    Δr = r(k+2) − r(k+1), so (D > 0)

        S(k+1) > S(k)  ⇔  E(k+1)·D(k) > E(k)·D(k+1)  ⇔  α^(k+1) > S(k)·(c + Δr).

    ``verify_cost`` is r: a number for a flat cost r(n) = verify_cost (1: Thm 3.8), or a
    measured curve with ``verify_cost[n − 1]`` = r(n) for n = 1..N. The table has
    k = 1..``k_max`` for a flat cost and k = 1..N − 2 for a curve (the test at k needs
    r(k+2)). ``best_k`` is where the test first fails; ``argmax_k`` maximises S over
    1..K + 1. They agree (up to ties) when S rises then falls, which holds whenever r is
    flat or convex in n: E is concave in k, so E − s·D is concave and every level set
    {S ≥ s} is an interval. A measured curve that dips and rises again can stop the test
    at a local maximum, short of ``argmax_k``.
    """
    if np.ndim(alpha) or np.ndim(c):
        raise ValueError("best_k_table takes scalar alpha and c")
    a = float(_check_alpha(alpha))
    c = float(_check_cost(c))
    r = np.asarray(verify_cost, dtype=np.float64)
    if r.ndim > 1 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError(f"verify_cost must be a cost > 0 or a 1-D curve of them, got "
                         f"{verify_cost!r}")
    if r.ndim == 0:
        if isinstance(k_max, bool) or not isinstance(k_max, numbers.Integral) or k_max < 1:
            raise ValueError(f"k_max must be an integer >= 1, got {k_max!r}")
        r = np.full(k_max + 2, float(r))  # r(1..k_max + 2)
    elif len(r) < 3:
        raise ValueError(f"verify_cost needs r(n) for n = 1..3 at least, got {len(r)} values")
    ks = np.arange(1, len(r))  # [K + 1]: every k whose r(k + 1) is known
    speedup = np.asarray(expected_tokens_per_step(a, ks)) / (ks * c + r[ks])  # [K + 1]
    k = ks[:-1]  # [K]: the rows, where r(k + 2) is known too
    gain = a ** (k + 1.0)  # [K]
    price = speedup[:-1] * (c + r[k + 1] - r[k])  # [K]: r[k] = r(k + 1)
    pays = gain > price  # [K]
    stop = int(k[np.argmin(pays)]) if not pays.all() else int(ks[-1])
    return KTable(k, speedup[:-1], gain, price, pays, stop, int(ks[np.argmax(speedup)]))
