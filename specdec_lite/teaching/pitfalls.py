"""Wrong ways to accept draft tokens, kept runnable so that their failure can be measured.

Each pitfall below looks reasonable, speeds decoding up, and changes what the decoder
samples. None of them is ever the library's default. They exist so that a reader (and the
tests) can run them next to the exact rule and watch :mod:`specdec_lite.teaching.exactness` tell
them apart: either by a chi-square p-value far below any reasonable significance, or,
more bluntly, by sequences the target gives probability zero.

* :func:`threshold_verify` / :func:`threshold_generate`: accept while p/q > θ.
* :func:`nonprefix_verify` / :func:`nonprefix_generate`: keep every draft token that
  passes its own test, even after a rejection.
* :func:`independent_heads_generate`: the same mistake with Medusa-style heads, which
  guess every position from the prefix alone.
* :func:`greedy_draft_proposer` / :func:`greedy_draft_generate`: draft the argmax but
  hand verification the softmax as q.

The decoders take ``(target, draft, prompt, max_new_tokens, k, seed, temperature)``, so
:func:`specdec_lite.teaching.exactness.sample_continuations` can run any of them as its
``decoder``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..engine.decode import speculative_generate
from ..engine.trace import Generation
from ..functional import softmax
from ..models.transformer import TransformerModel
from ..rules.distributions import sample, warp
from ..rules.verify import Verification, residual, verify
from .exactness import Propose, draft_proposer, speculative_loop

#: Medusa-style heads: ``heads_fn(prefix [n]) -> [k_max, V]``, row i the guessed
#: distribution of the (i+1)-th token after the prefix, from the prefix alone.
HeadsFn = Callable[[np.ndarray], np.ndarray]

# ---------------------------------------------------------------- the threshold rule


def threshold_verify(
    draft_tokens: np.ndarray,
    draft_probs: np.ndarray,
    target_probs: np.ndarray,
    rng: np.random.Generator | None = None,
    theta: float = 1.0,
) -> Verification:
    """Accept while p(x)/q(x) > θ; on the first failure sample the correction from p.

    What it gets wrong: a token the target likes a little less than the draft does
    (p/q just under θ) is never accepted, and a token it likes more is always accepted,
    so acceptance is a deterministic cut instead of a coin with heads-probability
    min(1, p/q). The correction then comes from p itself rather than from the residual
    max(0, p − q), which counts again the mass the accepted tokens already took. Both
    push the output towards tokens the target and the draft agree on. This is
    :mod:`specdec_lite.rules.verify`'s rule ``"threshold"``; it lives there, and this
    function only names it.
    """
    return verify(draft_tokens, draft_probs, target_probs, rng, rule="threshold", theta=theta)


def threshold_generate(
    target: object,
    draft: object,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    seed: int | np.random.Generator | None,
    temperature: float = 1.0,
    theta: float = 1.0,
) -> Generation:
    """:func:`specdec_lite.engine.decode.speculative_generate` with the threshold rule (see
    :func:`threshold_verify` for what goes wrong)."""
    return speculative_generate(target, draft, prompt, k=k, max_new_tokens=max_new_tokens,
                                temperature=temperature, rule="threshold", seed=seed,
                                theta=theta)


# ---------------------------------------------------------------- non-prefix acceptance


def nonprefix_verify(
    draft_tokens: np.ndarray,
    draft_probs: np.ndarray,
    target_probs: np.ndarray,
    rng: np.random.Generator | None = None,
) -> Verification:
    """Keep every draft token whose own test r < p(x)/q(x) passes, even after a rejection,
    then add the token the exact rule would add (a correction at the first rejection, or
    the bonus).

    What it gets wrong: the target scored x_j in the context prefix + x_1..x_{j−1}. Once
    an earlier x_i is thrown away, x_j lands in a context the target never scored, so its
    test no longer means anything: the output can hold a transition the target gives
    probability zero. Each test is the exact one; only the prefix cut is missing, and
    that cut is what makes the whole sequence, not just each token, follow p.
    """
    if rng is None:
        raise TypeError("rng must be a numpy Generator")
    draft_tokens = np.asarray(draft_tokens, dtype=np.int64)  # [k]
    k = len(draft_tokens)
    rows = np.arange(k)
    p_x = target_probs[rows, draft_tokens]  # [k]
    q_x = draft_probs[rows, draft_tokens]  # [k]
    passed = rng.random(k) * q_x < p_x  # [k] each token's own test, read on its own
    if passed.all():
        extra, dist = "bonus", target_probs[k]
    else:
        first = int(passed.argmin())  # the first rejection
        extra, dist = "correction", residual(target_probs[first], draft_probs[first])
    tokens = np.append(draft_tokens[passed], sample(dist, rng))  # [n_passed + 1]
    return Verification(tokens, int(passed.sum()), extra)


def nonprefix_generate(
    target: object,
    draft: object,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    seed: int | np.random.Generator | None,
    temperature: float = 1.0,
) -> Generation:
    """Speculative decoding with :func:`nonprefix_verify`: drafts sampled correctly from
    the draft model, every token that passes its own test kept."""
    return speculative_loop(target, prompt, draft_proposer(draft, temperature),
                            nonprefix_verify, k=k, max_new_tokens=max_new_tokens,
                            temperature=temperature, seed=seed)


# ---------------------------------------------------------------- independent head acceptance


def heads_proposer(heads_fn: HeadsFn, temperature: float = 1.0) -> Propose:
    """Draft the way Medusa heads do: one call ``heads_fn(prefix)`` gives k rows, and
    x_i ~ q_i is drawn from row i on its own, without seeing x_1..x_{i−1}.

    This proposer is correct: each q_i is the distribution x_i was drawn from, in any
    context, so the exact rule along the chain (:func:`specdec_lite.rules.verify.verify`)
    still reproduces the target. What breaks the output is accepting each head's token
    on its own (:func:`independent_heads_generate`).
    """

    def propose(prefix: np.ndarray, k: int, rng: np.random.Generator):
        rows = np.asarray(heads_fn(prefix), dtype=np.float64)  # [k_max, V]
        if rows.ndim != 2 or len(rows) < k:
            raise ValueError(f"heads_fn must return at least k = {k} rows, got {rows.shape}")
        q = warp(rows[:k], temperature)  # [k, V]
        return np.array([sample(row, rng) for row in q], dtype=np.int64), q

    return propose


def independent_heads_generate(
    target: object,
    heads_fn: HeadsFn,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    seed: int | np.random.Generator | None,
    temperature: float = 1.0,
) -> Generation:
    """Medusa-style heads, each head's token accepted on its own test against the target.

    What it gets wrong: in one tree forward every node gets a target row, read in the
    context of the node's path (Medusa's tree mask). Judging each head's token against
    its row and keeping the ones that pass, whatever happened to the tokens before them
    on the path, is :func:`nonprefix_verify` again: a token kept after a rejected one
    sits in a context the target never scored, and sequences of probability zero come
    out. Accepting along the path (a node only if its parent was accepted; the exact
    chain rule) is exact with the same heads: see :func:`chain_heads_generate`.
    """
    return speculative_loop(target, prompt, heads_proposer(heads_fn, temperature),
                            nonprefix_verify, k=k, max_new_tokens=max_new_tokens,
                            temperature=temperature, seed=seed)


def chain_heads_generate(
    target: object,
    heads_fn: HeadsFn,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    seed: int | np.random.Generator | None,
    temperature: float = 1.0,
) -> Generation:
    """The correct counterpart of :func:`independent_heads_generate`: the same heads,
    verified along the chain path with the exact rule (stop at the first rejection)."""
    return speculative_loop(target, prompt, heads_proposer(heads_fn, temperature), verify,
                            k=k, max_new_tokens=max_new_tokens, temperature=temperature,
                            seed=seed)


def medusa_heads_fn(target: TransformerModel, heads: object) -> HeadsFn:
    """A :data:`HeadsFn` made of a transformer and its
    :class:`~specdec_lite.drafting.medusa.MedusaHeads`.

    Head i read at position t guesses token t + i + 2, so the hidden state just before
    the prefix's last token holds the heads' guesses for the 1st..H-th new tokens
    (``heads_fn(prefix)`` returns [H, V]; the prefix needs two tokens or more).
    """
    if not isinstance(target, TransformerModel):
        raise TypeError("target must be a TransformerModel")
    logits_of = getattr(heads, "logits", None)
    if not callable(logits_of):
        raise TypeError("heads must have a logits(hidden) method, as MedusaHeads does")

    reads = target.bound()  # one cache: a prefix that extends the last one costs its new rows

    def heads_fn(prefix: np.ndarray) -> np.ndarray:
        if len(prefix) < 2:
            raise ValueError("prefix must hold at least 2 tokens for Medusa heads")
        hidden = reads.hidden(prefix)[-2:-1]  # [1, d] the state before the last token
        return softmax(logits_of(hidden)[:, 0])  # [H, V]

    return heads_fn


# ---------------------------------------------------------------- greedy draft, softmax q


def greedy_draft_proposer(draft: object, temperature: float = 1.0) -> Propose:
    """Draft x_i = argmax q_i, but report the softmax q_i to verification.

    What it gets wrong: the exact rule's proof needs q to be the distribution the draft
    token was drawn from. A greedy draft draws from the one-hot of its argmax a, so the
    first token comes out as a with probability min(1, p(a)/q(a)) instead of p(a) (always,
    when p(a) ≥ q(a)), and any other token b only through the residual, with probability
    (1 − min(1, p(a)/q(a))) · max(0, p(b) − q(b)) / Σ_c max(0, p(c) − q(c)) instead of
    p(b). Reporting the one-hot (a draft at temperature 0) or sampling from q makes the
    same loop exact again.
    """

    def propose(prefix: np.ndarray, k: int, rng: np.random.Generator):
        n = len(prefix)
        ctx = np.concatenate([prefix, np.zeros(k, dtype=np.int64)])  # [n + k]
        q = np.zeros((k, draft.vocab_size))  # [k, V] what verification is told
        for i in range(k):
            q[i] = warp(draft.probs(ctx[: n + i])[-1], temperature)
            ctx[n + i] = int(q[i].argmax())  # what the draft actually does
        return ctx[n:], q

    return propose


def greedy_draft_generate(
    target: object,
    draft: object,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    seed: int | np.random.Generator | None,
    temperature: float = 1.0,
) -> Generation:
    """Speculative decoding with :func:`greedy_draft_proposer` and the exact rule."""
    return speculative_loop(target, prompt, greedy_draft_proposer(draft, temperature), verify,
                            k=k, max_new_tokens=max_new_tokens, temperature=temperature,
                            seed=seed)


#: The pitfalls that take a draft model, by name, each with the decoder signature above.
DRAFT_PITFALLS: dict[str, Callable[..., Generation]] = {
    "threshold": threshold_generate,
    "nonprefix": nonprefix_generate,
    "greedy draft": greedy_draft_generate,
}

__all__ = [
    "DRAFT_PITFALLS",
    "HeadsFn",
    "chain_heads_generate",
    "greedy_draft_generate",
    "greedy_draft_proposer",
    "heads_proposer",
    "independent_heads_generate",
    "medusa_heads_fn",
    "nonprefix_generate",
    "nonprefix_verify",
    "threshold_generate",
    "threshold_verify",
]
