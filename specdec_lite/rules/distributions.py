"""Next-token distributions: temperature, top-k/top-p, sampling, distances.

Every function here works on probability rows: arrays whose last axis has
length V and sums to 1. Shapes are noted as ``[..., V]``. Their validation,
:func:`check_probs`, lives in :mod:`specdec_lite.checks` and the softmax in
:mod:`specdec_lite.functional`; both are importable from here too.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..checks import SUM_TOL as SUM_TOL  # re-exported: the row-sum tolerance
from ..checks import check_int, check_real
from ..checks import check_probs as check_probs  # re-exported: the library's probability check
from ..functional import softmax


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


def as_rng(rng: object, name: str = "rng") -> object:
    """A source of uniforms for one draw: a Generator as it is, an int seed as
    ``np.random.default_rng(seed)``, or any object with a ``random()`` method (a scripted
    stream in a test). Anything else (None, a bool, a float) raises ``TypeError`` naming
    ``name``; a negative seed ``ValueError``."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"{name} must be a non-negative seed, got {rng}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, bool) or not callable(getattr(rng, "random", None)):
        raise TypeError(f"{name} must be a numpy Generator or an int seed, "
                        f"got {type(rng).__name__}")
    return rng


def check_temperature(temperature: float) -> float:
    """Return ``temperature`` as a float, rejecting negatives, NaN, infinity and non-numbers."""
    return check_real(temperature, "temperature", minimum=0.0)


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
    top_k = check_int(top_k, "top_k", 1)
    if top_k >= p.shape[-1]:
        return p.copy()
    order = np.argsort(-p, axis=-1, kind="stable")
    keep = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(keep, order[..., :top_k], True, axis=-1)
    out = np.where(keep, p, 0.0)
    return out / out.sum(axis=-1, keepdims=True)


def top_p_filter(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Nucleus filter: keep the smallest set of most likely tokens whose mass reaches ``top_p``."""
    top_p = check_real(top_p, "top_p", positive=True)
    if top_p > 1:
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


def check_top_k(top_k: int | None) -> int | None:
    """Return ``top_k`` as an int >= 1, or None (no top-k cut)."""
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
        raise TypeError(f"top_k must be an int or None, got {type(top_k).__name__}")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    return int(top_k)


def check_top_p(top_p: float | None) -> float | None:
    """Return ``top_p`` as a float in (0, 1], or None (no nucleus cut)."""
    if top_p is None:
        return None
    if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real):
        raise TypeError(f"top_p must be a number or None, got {type(top_p).__name__}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    return float(top_p)


def truncate(probs: np.ndarray, top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
    """Top-k, then top-p, on rows that already carry their temperature; None skips a cut.

    With both None the input comes back as it is (no copy).
    """
    if top_k is not None:
        probs = top_k_filter(probs, top_k)
    if top_p is not None:
        probs = top_p_filter(probs, top_p)
    return probs


def warp(
    probs: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """The sampler's whole transform in its usual order: temperature, then top-k, then top-p.

    Speculative sampling must apply the same ``warp`` to the target's rows (p) and the
    draft's rows (q): p is the distribution the output should follow, and q must be the
    distribution the draft tokens were actually drawn from. ``temperature == 0`` gives
    the one-hot argmax, which both cuts leave unchanged.
    """
    p = apply_temperature(probs, temperature)  # [..., V]
    if temperature == 0:
        return p
    return truncate(p, check_top_k(top_k), check_top_p(top_p))


def sample(probs: np.ndarray, rng: int | np.random.Generator) -> int:
    """Draw one token from a single row ``[V]`` by inverse CDF with one uniform from ``rng``
    (a Generator, or a seed for :func:`as_generator`).

    The row need not be normalised; a token with zero mass is never returned. A row that
    is not 1-D, or holds a NaN, an infinity or a negative weight, or has no mass at all,
    raises ``ValueError`` naming ``probs`` (inverse CDF would return the id V for it).
    """
    p = np.asarray(probs)  # [V]
    if p.dtype.kind not in "fiub":
        raise TypeError(f"probs must be an array of numbers, got dtype {p.dtype}")
    cdf = p.cumsum()  # [V]; the array methods skip numpy's dispatch layer
    total = cdf[-1] if cdf.size else 0.0  # NaN or inf if any weight is
    if p.ndim != 1 or not 0.0 < total < np.inf or p.min() < 0:
        raise ValueError(f"probs must be one row [V] of finite, non-negative weights with "
                         f"positive mass; {_what_is_wrong(p)}")
    if not isinstance(rng, np.random.Generator):
        rng = as_rng(rng)
    u = rng.random() * total
    return int(cdf.searchsorted(u, side="right"))


def _what_is_wrong(p: np.ndarray) -> str:
    """For :func:`sample`'s error: what disqualifies the row ``p``."""
    if p.ndim != 1:
        return f"got shape {p.shape}"
    if not np.isfinite(p).all():
        return "got NaN or infinite weights"
    if (p < 0).any():
        return f"got a negative weight {float(p.min())!r}"
    return f"got total mass {float(p.sum())!r}"


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


@dataclass(frozen=True)
class Sampling:
    """How one sequence draws its tokens: ``temperature``, then ``top_k``, then ``top_p``
    on both models' rows (p = target, q = draft). At ``temperature`` 0 decoding is greedy
    and the cuts do nothing, so they are dropped. Build it with :meth:`checked`."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    @classmethod
    def checked(cls, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None) -> Sampling:
        """Validated settings; a bad value raises ``TypeError``/``ValueError`` naming it."""
        temperature = check_temperature(temperature)
        top_k, top_p = check_top_k(top_k), check_top_p(top_p)
        return cls(temperature) if temperature == 0 else cls(temperature, top_k, top_p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def warp(self, rows: np.ndarray) -> np.ndarray:  # [n, V] at temperature -> [n, V]
        """Rows already at this temperature, with the top-k / top-p cuts applied."""
        return truncate(rows, self.top_k, self.top_p)
