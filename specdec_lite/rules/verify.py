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
* ``"threshold"`` — a plausible shortcut: accept while p_i(x_i) / q_i(x_i) > θ
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

from ..checks import check_positive, check_tokens
from .distributions import as_rng, check_probs, entropy, sample, tv_distance

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
        params["theta"] = check_positive(params["theta"], "theta")
    if rule == "typical":
        params["eps"] = check_positive(params["eps"], "eps")
        params["delta"] = check_positive(params["delta"], "delta")
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

    ``draft_probs`` is [k, V] and ``target_probs`` is [k, V] (the first k rows). The greedy
    and typical tests read only ``target_probs`` (``draft_probs`` and ``rng`` may be None);
    Medusa's tree verification calls them node by node.
    """
    k = len(draft_tokens)
    if rule == "greedy":  # only the target's argmax matters: rows of logits work too
        return draft_tokens == target_probs.argmax(axis=-1)
    rows = np.arange(k)
    p_x = target_probs[rows, draft_tokens]  # [k]
    if rule == "typical":  # a test on p alone: draft_probs may be None
        return p_x > typical_cutoff(target_probs, rule_params["eps"], rule_params["delta"])
    q_x = draft_probs[rows, draft_tokens]  # [k]
    if rule == "exact":
        r = rng.random(k)  # [k] one uniform per draft position
        return r * q_x < p_x  # r < p/q without dividing: no NaN when q is tiny
    return p_x > rule_params["theta"] * q_x  # threshold


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
    rng: int | np.random.Generator | None = None,
    rule: str = "exact",
    **rule_params: float,
) -> Verification:
    """Verify k draft tokens against one target pass and return the tokens to emit.

    Shapes: ``draft_tokens`` [k] (integer ids in [0, V)), ``draft_probs`` [k, V] (the q
    each token was sampled from), ``target_probs`` [k + 1, V]. ``rng`` is a numpy
    Generator or an int seed (as ``seed`` is everywhere else); the ``"exact"``,
    ``"threshold"`` and ``"typical"`` rules need one (they draw), ``"greedy"`` does not.

    Every input is checked first: float or bool ``draft_tokens`` raise ``TypeError``;
    ids out of range, a length that does not match the rows, and rows with NaN, infinite
    or negative entries or that do not sum to 1 (zero-mass rows included) raise
    ``ValueError`` naming the argument. The decoders, which build valid inputs, call
    :func:`verify_checked` instead.
    """
    params = check_rule(rule, rule_params)
    # shapes first (target_probs fixes V, draft_tokens fixes k), then the values
    target_shape = np.shape(target_probs)
    if len(target_shape) != 2:
        raise ValueError(f"target_probs must have shape [k + 1, V], got {target_shape}")
    vocab = target_shape[1]
    draft_tokens = check_tokens(draft_tokens, vocab, "draft_tokens")  # [k] int64
    k = len(draft_tokens)
    if target_shape[0] != k + 1:
        raise ValueError(
            f"draft_tokens has k = {k} tokens, so target_probs must have shape "
            f"[k + 1, V] = [{k + 1}, {vocab}]; got {target_shape}"
        )
    if np.shape(draft_probs) != (k, vocab):
        raise ValueError(
            f"draft_probs must have shape [k, V] = [{k}, {vocab}] (one row per draft "
            f"token), got {np.shape(draft_probs)}"
        )
    target_probs = check_probs(target_probs, "target_probs")  # [k + 1, V] float64
    draft_probs = check_probs(draft_probs, "draft_probs")  # [k, V] float64
    if rng is None:
        if rule != "greedy":
            raise TypeError(f"rule {rule!r} needs rng, a numpy Generator or an int seed")
    else:
        rng = as_rng(rng, "rng")
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
    """:func:`verify` without its input checks, for callers that built valid inputs: integer
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


# ---------------------------------------------------------------------------
# The exact law of a rule's first emitted token, by enumeration instead of sampling
# ---------------------------------------------------------------------------


def _check_pair(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = check_probs(p, "p")  # [V]
    if p.ndim != 1:
        raise ValueError(f"p must be one distribution [V], got shape {p.shape}")
    q = check_probs(q, "q", vocab_size=p.shape[0])  # [V]
    if q.ndim != 1:
        raise ValueError(f"q must be one distribution [V], got shape {q.shape}")
    return p, q


def accept_probs(
    p: np.ndarray, q: np.ndarray, rule: str = "exact", **rule_params: float
) -> np.ndarray:
    """a(x) [V]: the chance that ``rule`` keeps a drafted token x (target ``p``, draft ``q``).

    ``"exact"`` keeps x with probability min(1, p(x)/q(x)). The other rules flip no coin,
    so a(x) is 0 or 1, by the tests :func:`acceptance_mask` makes: x == argmax p
    (``"greedy"``), p(x) > θ·q(x) (``"threshold"``), p(x) > min(ε, δ·exp(−H(p)))
    (``"typical"``). A token with q(x) = 0 is never drafted and gets a(x) = 0.
    """
    params = check_rule(rule, rule_params)
    p, q = _check_pair(p, q)
    drafted = q > 0  # [V]
    if rule == "exact":
        return np.where(drafted, np.minimum(1.0, p / np.where(drafted, q, 1.0)), 0.0)
    if rule == "greedy":
        keep = np.arange(p.shape[0]) == p.argmax()  # [V]
    elif rule == "threshold":
        keep = p > params["theta"] * q  # [V]
    else:
        keep = p > typical_cutoff(p, params["eps"], params["delta"])  # [V]
    return (keep & drafted).astype(np.float64)


def output_law(
    p: np.ndarray, q: np.ndarray, rule: str = "exact", **rule_params: float
) -> np.ndarray:
    """The exact distribution [V] of the first token a step emits under ``rule``.

    The draft proposes x ~ q; the step keeps it with probability a(x) (:func:`accept_probs`)
    and otherwise emits the rule's correction instead: a draw from residual(p, q) for
    ``"exact"``, argmax p for ``"greedy"``, a draw from p for ``"threshold"`` and
    ``"typical"``. Summing over x,

        out(y) = q(y)·a(y) + (Σ_x q(x)·(1 − a(x)))·correction(y).

    The first token is decided at the first draft position alone, so this holds for any
    k ≥ 1. The exact rule gives out = p; any rule whose law differs from p is lossy.
    """
    accept = accept_probs(p, q, rule, **rule_params)  # [V]
    p, q = _check_pair(p, q)
    if rule == "exact":
        correction = residual(p, q)  # [V]
    elif rule == "greedy":
        correction = np.zeros_like(p)  # [V] one-hot at argmax p
        correction[p.argmax()] = 1.0
    else:
        correction = p  # [V]
    return q * accept + (q @ (1.0 - accept)) * correction


def threshold_tradeoff(
    p: np.ndarray, q: np.ndarray, thetas: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """What each θ of the threshold rule costs and buys, exactly: (TV(out, p) [T], the
    acceptance rate Σ_x q(x)·a(x) [T]) for every θ in ``thetas`` [T]."""
    thetas = np.asarray(thetas, dtype=np.float64)  # [T]
    if thetas.ndim != 1:
        raise ValueError(f"thetas must be 1-D, got shape {thetas.shape}")
    p, q = _check_pair(p, q)
    tv = np.empty(len(thetas))  # [T]
    acceptance = np.empty(len(thetas))  # [T]
    for i, theta in enumerate(thetas):
        tv[i] = tv_distance(output_law(p, q, "threshold", theta=theta), p)
        acceptance[i] = q @ accept_probs(p, q, "threshold", theta=theta)
    return tv, acceptance


def sample_first_tokens(
    p: np.ndarray,
    q: np.ndarray,
    n: int,
    rng: np.random.Generator,
    rule: str = "exact",
    **rule_params: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``n`` one-token steps (k = 1) through the verifier, exactly as the decode loop
    would; return (first emitted token [n], n_accepted [n]).

    All n drafts x ~ q are drawn first, then each step verifies its x against ``[p, p]``
    with ``rng``. The frequencies of the first tokens estimate :func:`output_law`.
    """
    params = check_rule(rule, rule_params)
    p, q = _check_pair(p, q)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    drafts = rng.choice(len(q), size=n, p=q)  # [n]
    draft_probs = q[None, :]  # [1, V]
    target_probs = np.stack([p, p])  # [2, V]: p at the drafted position, p for the bonus
    first = np.empty(n, dtype=np.intp)  # [n], token ids (np.bincount needs intp on wasm32)
    accepted = np.empty(n, dtype=np.int64)  # [n]
    for i in range(n):
        step = verify_checked(drafts[i : i + 1], draft_probs, target_probs, rng, rule, params)
        first[i], accepted[i] = step.tokens[0], step.n_accepted
    return first, accepted
