"""Proposers: where a speculative step's draft tokens come from.

A proposer is asked for up to ``k`` tokens to follow a context and answers with a
:class:`Draft`: the tokens, the rows q they were drawn from, and how many model calls
that cost. The decoders verify whatever comes back with the same rule, so the source of
the draft only changes how many tokens are accepted (and what drafting costs), never
what the exact rule emits (p = target, q = draft, as in Leviathan et al. 2023).

* :class:`ModelDraft`: a small language model, x_i ~ q_i(· | prefix, x_<i), one call per
  token. With ``min_confidence`` it stops drafting early when it is unsure of its own
  token (the confidence threshold Hugging Face's assisted generation uses by default);
  with ``risk_stop`` when the predicted chance that one of its tokens is rejected grows
  too high (a SpecDec++-style stop, :mod:`specdec_lite.drafting.stop_head`).
* :class:`PromptLookup`: no model at all. It finds the last few tokens earlier in the
  context and proposes what followed them there (prompt lookup decoding, Saxena 2023;
  the n-gram proposer of vLLM and Hugging Face). Its drafts are chosen without chance,
  so their rows q are one-hot.

A stopping rule that looks only at what has been drafted so far keeps the exact rule
exact: every emitted token is still distributed as p given the tokens before it, because
the verifier accepts or corrects each draft against p, and a bonus token is drawn from p.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..checks import check_int, check_real
from ..models.bound import fresh
from ..models.kv_cache import KVCache
from ..models.ngram import check_model, model_rows
from ..rules.distributions import Sampling, sample, truncate
from .early_exit import shared_blocks
from .stop_head import RiskStop


@dataclass(frozen=True)
class Draft:
    """One proposal: ``tokens`` [m] (m ≤ k, possibly 0) and the rows ``q`` [m, V] they were
    drawn from, or ``None`` when they were chosen without chance (the decoder then uses
    one-hot rows). ``n_calls`` counts the draft-model forward passes it cost."""

    tokens: np.ndarray  # [m]
    q: np.ndarray | None  # [m, V] or None
    n_calls: int = 0


@runtime_checkable
class Proposer(Protocol):
    """Anything with ``propose(context, k, sampling, rng) -> Draft``.

    ``context`` [n] is the prompt and every token emitted so far, ``k`` the most tokens
    wanted, ``sampling`` the sequence's :class:`~specdec_lite.rules.distributions.Sampling`, and
    ``rng`` the sequence's Generator, which a proposer that samples must use for every draw.
    """

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft: ...


@dataclass(frozen=True)
class FeatureView:
    """A drafter that reads the target's features (one with ``propose_with``, as
    :class:`~specdec_lite.drafting.eagle.EagleDraft`) as a plain proposer for one sequence:
    with that sequence's drafter ``state`` and ``read_features(tokens, start)``, the
    target's features [n - start, d] of ``tokens[start:]`` from wherever the decoder keeps
    them."""

    drafter: object
    state: object
    read_features: Callable[[np.ndarray, int], np.ndarray]

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft:
        return self.drafter.propose_with(self.state, self.read_features, context, k, sampling,
                                         rng)


def one_hot_rows(tokens: np.ndarray, vocab: int) -> np.ndarray:
    """Rows q [m, V] for tokens chosen without chance: all mass on each token."""
    q = np.zeros((len(tokens), vocab))  # [m, V]
    q[np.arange(len(tokens)), tokens] = 1.0
    return q


class ModelDraft:
    """Draft with a language model ``model`` (the library's model contract).

    Each of up to ``k`` tokens is drawn from the model's row warped as the target's will
    be (temperature, top-k, top-p; the argmax at temperature 0). With ``min_confidence``
    set, drafting stops after the first token whose probability in the row it was drawn
    from (the model's row at temperature 1 when decoding greedily) is below it, so an
    unsure draft wastes less of the target's step. With ``risk_stop`` (a
    :class:`~specdec_lite.drafting.stop_head.RiskStop`) set, drafting stops after the
    token at which the predicted chance that one of the step's tokens is rejected passes
    its ``max_risk`` (the head reads the same row). At temperature 0, with neither stop, a
    model with a ``greedy_block(tokens, k)`` method (the GPT) is asked for its k greedy
    tokens in one call: the same tokens, without a row each.
    """

    def __init__(self, model: object, *, min_confidence: float | None = None,
                 risk_stop: RiskStop | None = None) -> None:
        self.vocab_size = check_model(model, "draft")
        self.model = model
        if min_confidence is not None:
            min_confidence = check_real(min_confidence, "min_confidence", positive=True)
            if min_confidence > 1:
                raise ValueError(f"min_confidence must be <= 1, got {min_confidence}")
        if risk_stop is not None and not isinstance(risk_stop, RiskStop):
            raise TypeError(f"risk_stop must be a RiskStop, got {type(risk_stop).__name__}")
        self.min_confidence, self.risk_stop = min_confidence, risk_stop
        self.shares = None  # the run's target, whose cache the draft's blocks read, or None

    @property
    def stops_early(self) -> bool:
        """Whether a stop (confidence or risk) may end a step's drafting early."""
        return self.min_confidence is not None or self.risk_stop is not None

    def for_sequence(self, target: object) -> ModelDraft:
        """This draft for one run beside ``target`` (the run's target on its cache): its
        model on a cache of its own (a GPT; see :func:`specdec_lite.models.bound.fresh`),
        the same draft for a model without one. An early-exit draft of ``target`` runs on
        a cache that shares the target's keys and values of its blocks
        (:func:`~specdec_lite.drafting.early_exit.shared_blocks`)."""
        m = shared_blocks(self.model, getattr(target, "model", None))
        if m and isinstance(getattr(target, "cache", None), KVCache):
            twin = copy.copy(self)
            twin.model = self.model.bound(KVCache.sharing(
                target.cache, m, self.model.vocab_size, self.model.config.d_model))
            twin.shares = target
            return twin
        model = fresh(self.model)
        if model is self.model:
            return self
        twin = copy.copy(self)
        twin.model = model
        return twin

    def align(self, context: np.ndarray) -> None:
        """For a draft that shares its target's cache: bring both caches to ``context``
        [n] less its last token. The target keeps what it holds of that, forwards the
        rest (a prompt, once) and drops anything after it, so the draft writes only
        entries from n - 1 on, which the target's verification writes again."""
        t_cache, d_cache = self.shares.cache, self.model.cache
        n = len(context)
        m = min(n, t_cache.n_causal)
        same = context[:m] == t_cache.tokens[:m]
        cut = min(m if same.all() else int(same.argmin()), n - 1)
        if cut < t_cache.length:
            t_cache.truncate(cut)
        if cut < n - 1:
            self.shares.forward(context[cut : n - 1])
        d_cache.length = d_cache.n_causal = n - 1

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft:
        if self.shares is not None:
            self.align(context)
        if not self.stops_early:
            ctx, q = draft_block(self.model, context, k, sampling.temperature,
                                 sampling.top_k, sampling.top_p, rng)
            return Draft(ctx[len(context):], q, k)
        return self._propose_until_unsure(context, k, sampling, rng)

    def _propose_until_unsure(self, context: np.ndarray, k: int, sampling: Sampling,
                              rng: np.random.Generator) -> Draft:
        n = len(context)
        ctx = np.concatenate([context, np.zeros(k, dtype=np.int64)])  # [n + k]
        q = np.zeros((k, self.vocab_size))  # [k, V]
        temperature = sampling.temperature if not sampling.greedy else 1.0
        m, chance = 0, 1.0  # chance: that every token drafted so far is accepted, predicted
        while m < k:
            row = model_rows(self.model, ctx[: n + m], 1, "draft", temperature)[0]  # [V]
            if sampling.greedy:
                token = int(row.argmax())
                q[m, token] = 1.0
                read = row  # the stops read the T = 1 row
            else:
                q[m] = sampling.warp(row)
                token = sample(q[m], rng)
                read = q[m]
            ctx[n + m] = token
            m += 1
            stop, chance = early_stop(self.min_confidence, self.risk_stop, read, token, chance)
            if stop:
                break
        return Draft(ctx[n : n + m], q[:m], m)


def early_stop(min_confidence: float | None, risk_stop: RiskStop | None, row: np.ndarray,
               token: int, chance: float) -> tuple[bool, float]:
    """A draft's early stops after ``token``, drawn from ``row`` [V] (the model's row at
    temperature 1 when decoding greedily): whether drafting ends there, and the predicted
    chance that every token of the step so far is accepted, ``chance`` times the
    token's. The confidence stop ends it when the token's probability in ``row`` is below
    ``min_confidence``; the risk stop when 1 - that chance passes its ``max_risk``. As
    :class:`ModelDraft` and the batched engine stop, and the compiled step's kernel."""
    if min_confidence is not None and row[token] < min_confidence:
        return True, chance
    if risk_stop is not None:
        chance *= risk_stop.accept_chance(row, token)
        return not risk_stop.keeps_drafting(chance), chance
    return False, chance


class PromptLookup:
    """Propose by copying: find the context's last ``max_ngram`` tokens (then fewer, down
    to ``min_ngram``) earlier in the context, and propose the tokens that followed their
    most recent earlier occurrence. No model, no random draw; no match, no draft (the
    step is then a plain target call). Works with any target: the vocabulary is the
    target's, since the tokens are copied from the context."""

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        self.max_ngram = check_int(max_ngram, "max_ngram", 1)
        self.min_ngram = check_int(min_ngram, "min_ngram", 1)
        if self.min_ngram > self.max_ngram:
            raise ValueError(f"min_ngram={min_ngram} is larger than max_ngram={max_ngram}")

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft:
        return Draft(lookup(context, k, self.max_ngram, self.min_ngram), None, 0)


def lookup(context: np.ndarray, k: int, max_ngram: int, min_ngram: int = 1) -> np.ndarray:
    """Up to ``k`` tokens that followed the latest earlier occurrence of the context's last
    g tokens, trying g = ``max_ngram`` down to ``min_ngram``; empty when none matches.

    The search is a byte search: the context as 4-byte integers, the last g of them looked
    for from the end (``bytes.rfind``, in C). A hit that does not start on a token's first
    byte straddles two tokens and is skipped. A few microseconds whatever the context's
    length, where comparing every earlier g-gram in numpy costs tens."""
    n = len(context)
    g_max = min(max_ngram, n - 1)
    if g_max < min_ngram:
        return np.zeros(0, dtype=np.int64)
    ids = context.astype("<i4", copy=False)  # token ids fit 31 bits
    earlier = ids[: n - 1].tobytes()  # every match must end before the last token
    tail = ids[n - g_max :].tobytes()
    for g in range(g_max, min_ngram - 1, -1):
        needle = tail[4 * (g_max - g) :]  # the last g tokens
        end = len(earlier)
        while (at := earlier.rfind(needle, 0, end)) >= 0:
            if at % 4 == 0:
                start = at // 4 + g  # the token after the latest match
                return context[start : start + k].astype(np.int64)
            end = at + len(needle) - 1  # a straddling hit: look further back
    return np.zeros(0, dtype=np.int64)


def draft_block(draft: object, seq: np.ndarray, k: int, temperature: float,
                top_k: int | None, top_p: float | None,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draft ``k`` tokens after ``seq`` [n] with a draft model: (context [n + k] = ``seq``
    then the drafts, the warped rows q [k, V] they were drawn from).

    At temperature 0 a draft with a ``greedy_block(tokens, k)`` method (the GPT) is asked
    for its k greedy tokens in one call: the same tokens, without a probability row each.
    """
    n = len(seq)
    ctx = np.concatenate([seq, np.zeros(k, dtype=np.int64)])  # [n + k]
    q = np.zeros((k, draft.vocab_size))  # [k, V]
    block = getattr(draft, "greedy_block", None)
    if temperature == 0 and block is not None:  # the same tokens without a row per token
        drafted = np.asarray(block(seq, k))  # [k]
        if (drafted.shape != (k,) or drafted.dtype.kind not in "iu"
                or (k and not 0 <= drafted.min() <= drafted.max() < draft.vocab_size)):
            raise ValueError(f"draft.greedy_block returned {drafted!r}, expected {k} token ids")
        ctx[n:] = drafted
        q[np.arange(k), drafted] = 1.0  # the one-hot rows greedy drafting draws from
        return ctx, q
    for i in range(k):  # draft i sees ctx[:n + i], a view never written again
        q[i] = truncate(model_rows(draft, ctx[: n + i], 1, "draft", temperature)[0], top_k, top_p)
        ctx[n + i] = int(q[i].argmax()) if temperature == 0 else sample(q[i], rng)
    return ctx, q


def for_run(proposer: object, target: object) -> object:
    """``proposer`` with state of its own for one run beside ``target`` (the run's target,
    already on its own cache): ``proposer.for_sequence(target)`` where it has that method
    (a draft model's cache, the EAGLE drafter's cache and feature source), else
    ``proposer`` itself (prompt lookup keeps no state)."""
    own = getattr(proposer, "for_sequence", None)
    return own(target) if callable(own) else proposer


def as_proposer(draft: object, vocab: int) -> object:
    """``draft`` as a proposer: a model (``vocab_size`` and ``probs``) wrapped in
    :class:`ModelDraft`, any other object with a ``propose`` method as it is. A model or
    proposer whose ``vocab_size`` is not ``vocab`` (the target's) raises ``ValueError``."""
    if callable(getattr(draft, "propose", None)) and not callable(getattr(draft, "probs", None)):
        proposer = draft
    else:
        proposer = ModelDraft(draft)  # TypeError naming draft if it is not a model either
    size = getattr(proposer, "vocab_size", vocab)
    if size != vocab:
        raise ValueError(f"draft.vocab_size={size} differs from target.vocab_size={vocab}")
    return proposer


__all__ = ["Draft", "FeatureView", "ModelDraft", "PromptLookup", "Proposer", "as_proposer",
           "draft_block", "early_stop", "for_run", "lookup", "one_hot_rows"]
