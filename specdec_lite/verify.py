"""Verification: decide which draft tokens to keep, then emit one more token.

Given k draft tokens x_1..x_k, the draft's distributions q_1..q_k they were
sampled from, and the target's distributions p_1..p_{k+1} from one forward
pass, every rule accepts a prefix x_1..x_n (0 ≤ n ≤ k) and then emits exactly
one extra token: a *correction* at position n + 1 when n < k, or a *bonus*
token from p_{k+1} when all k were accepted.

Rules (p = target, q = draft, as in Leviathan et al. 2023):

* ``"exact"`` — accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); on the
  first rejection sample the correction from norm(max(0, p − q)). The emitted
  tokens are distributed exactly as sampling from p. Lossless.
* ``"greedy"`` — accept while x_i == argmax p_i; the extra token is argmax p.
  Lossless with respect to greedy decoding of the target.
* ``"threshold"`` — the source blogs' rule: accept while p_i(x_i) / q_i(x_i) > θ
  (parameter ``theta``); the correction is sampled from p. **Lossy**: the output
  does not follow p.
* ``"typical"`` — Medusa's typical acceptance: accept while
  p_i(x_i) > min(ε, δ·exp(−H(p_i))) (parameters ``eps`` = 0.09, ``delta`` = 0.3);
  the correction is sampled from p. **Lossy** when the temperature is above 0.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .distributions import entropy, sample

RULES = ("exact", "greedy", "threshold", "typical")
LOSSLESS_RULES = ("exact", "greedy")
_RULE_PARAMS = {
    "exact": {},
    "greedy": {},
    "threshold": {"theta": None},
    "typical": {"eps": 0.09, "delta": 0.3},
}


@dataclass(frozen=True)
class Verification:
    """What one verification step decided.

    ``tokens`` are the accepted draft tokens followed by the one extra token;
    ``n_accepted`` is how many draft tokens were kept; ``extra`` says whether
    the last token is a ``"correction"`` or a ``"bonus"``.
    """

    tokens: np.ndarray  # [n_accepted + 1]
    n_accepted: int
    extra: str


def _positive_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return float(value)


def check_rule(rule: str, rule_params: dict) -> dict:
    """Validate ``rule`` and its parameters; return the parameters with defaults filled in."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    known = _RULE_PARAMS[rule]
    unknown = sorted(set(rule_params) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise TypeError(f"rule {rule!r} takes parameters ({allowed}); got unexpected {unknown}")
    params = {**known, **rule_params}
    if rule == "threshold":
        if params["theta"] is None:
            raise ValueError("rule 'threshold' needs a theta (accept while p/q > theta)")
        params["theta"] = _positive_number("theta", params["theta"])
    if rule == "typical":
        params["eps"] = _positive_number("eps", params["eps"])
        params["delta"] = _positive_number("delta", params["delta"])
    return params


def acceptance_mask(
    draft_tokens: np.ndarray,
    draft_probs: np.ndarray,
    target_probs: np.ndarray,
    rng: np.random.Generator | None,
    rule: str,
    **rule_params: float,
) -> np.ndarray:
    """Per-position accept decisions [k] for ``rule``, before the prefix cut.

    ``draft_probs`` is [k, V] and ``target_probs`` is [k, V] (the first k rows).
    """
    k = len(draft_tokens)
    if rule == "greedy":
        return draft_tokens == target_probs.argmax(axis=-1)
    rows = np.arange(k)
    p_x = target_probs[rows, draft_tokens]  # [k]
    q_x = draft_probs[rows, draft_tokens]  # [k]
    if rule == "exact":
        r = rng.random(k)  # [k] one uniform per draft position
        return r * q_x < p_x  # r < p/q without dividing: no NaN when q is tiny
    if rule == "threshold":
        return p_x > rule_params["theta"] * q_x
    return p_x > typical_cutoff(target_probs, rule_params["eps"], rule_params["delta"])


def typical_cutoff(p: np.ndarray, eps: float, delta: float) -> np.ndarray:
    """Typical acceptance's threshold min(ε, δ·exp(−H(p))) for each row of ``p`` [..., V]."""
    return np.minimum(eps, delta * np.exp(-entropy(p)))


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, p − q)) over the last axis; where p ≤ q everywhere, returns p instead.

    The fallback never changes the output distribution: when max(0, p − q) has
    no mass, p == q, every draft token is accepted and the residual is unused.
    Returning p keeps the function total and NaN-free.
    """
    diff = np.asarray(p) - np.asarray(q)  # [..., V]
    np.maximum(diff, 0, out=diff)
    mass = diff.sum(axis=-1, keepdims=True)  # [..., 1]
    positive = mass > 0
    if positive.all():  # the common case, in fewer numpy calls
        return diff / mass
    return np.where(positive, diff / np.where(positive, mass, 1.0), p)


def verify(
    draft_tokens: np.ndarray,
    draft_probs: np.ndarray,
    target_probs: np.ndarray,
    rng: np.random.Generator | None = None,
    rule: str = "exact",
    **rule_params: float,
) -> Verification:
    """Verify k draft tokens against one target pass and return the tokens to emit.

    Shapes: ``draft_tokens`` [k], ``draft_probs`` [k, V] (the q each token was
    sampled from), ``target_probs`` [k + 1, V]. ``rng`` is required for the
    ``"exact"``, ``"threshold"`` and ``"typical"`` rules (they sample the extra
    token). Inputs are assumed valid probability rows; the decoders validate
    model outputs before calling this.
    """
    params = check_rule(rule, rule_params)
    draft_tokens = np.asarray(draft_tokens, dtype=np.int64)
    draft_probs = np.asarray(draft_probs, dtype=np.float64)
    target_probs = np.asarray(target_probs, dtype=np.float64)
    k = draft_tokens.shape[0] if draft_tokens.ndim == 1 else -1
    if k < 0:
        raise ValueError(f"draft_tokens must be 1-D, got shape {draft_tokens.shape}")
    if target_probs.ndim != 2 or target_probs.shape[0] != k + 1:
        raise ValueError(
            f"target_probs must have shape [k + 1, V] = [{k + 1}, V], got {target_probs.shape}"
        )
    vocab = target_probs.shape[1]
    if draft_probs.shape != (k, vocab):
        raise ValueError(
            f"draft_probs must have shape [k, V] = [{k}, {vocab}], got {draft_probs.shape}"
        )
    if k and (draft_tokens.min() < 0 or draft_tokens.max() >= vocab):
        raise ValueError(f"draft_tokens must be ids in [0, {vocab})")
    if rule != "greedy" and rng is None:
        raise TypeError(f"rule {rule!r} needs rng, a numpy Generator")
    if k and rule == "exact" and np.any(draft_probs[np.arange(k), draft_tokens] <= 0):
        raise ValueError(
            "draft_probs gives zero probability to a drafted token: q must be the "
            "distribution the draft actually sampled from"
        )

    return verify_checked(draft_tokens, draft_probs, target_probs, rng, rule, params)


def verify_checked(
    draft_tokens: np.ndarray,
    draft_probs: np.ndarray,
    target_probs: np.ndarray,
    rng: np.random.Generator | None,
    rule: str,
    params: dict,
) -> Verification:
    """:func:`verify` without its input checks, for callers that built valid inputs: int64
    ``draft_tokens`` [k], float64 ``draft_probs`` [k, V] and ``target_probs`` [k + 1, V],
    and ``params`` from :func:`check_rule` (the decoders, on every step)."""
    k = len(draft_tokens)
    accept = acceptance_mask(
        draft_tokens, draft_probs, target_probs[:k], rng, rule, **params
    )  # [k]
    n = k if accept.all() else int(accept.argmin())  # first rejection, or k if none
    if n == k:
        extra, dist = "bonus", target_probs[k]
    else:
        extra = "correction"
        dist = residual(target_probs[n], draft_probs[n]) if rule == "exact" else target_probs[n]
    tokens = np.empty(n + 1, dtype=np.int64)  # [n + 1]: the accepted prefix, then the extra
    tokens[:n] = draft_tokens[:n]
    tokens[n] = int(dist.argmax()) if rule == "greedy" else sample(dist, rng)
    return Verification(tokens, n, extra)
