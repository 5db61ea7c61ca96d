"""Exactness tests: does a decoder sample from the target's distribution?

Speculative sampling claims more than "the output looks like the target": the whole
sequence it emits has *exactly* the target's law. On a model with a tiny vocabulary that
claim can be tested directly:

1. :func:`sequence_law` enumerates every continuation of a prompt of a few tokens and
   its probability under the (warped) target;
2. :func:`sample_continuations` runs a decoder many times from that prompt;
3. :func:`chi_square` compares the counts with the law (Pearson's test) and counts the
   samples the law calls impossible.

A correct decoder fails only by bad luck, for about 1 seed in 1,000 at
``significance=1e-3``; a decoder that is even a little off fails every time once the
sample is large enough.
:func:`check_verify` packs the three steps around a ``verify`` function you wrote
yourself, and :func:`speculative_loop` is the decode loop it runs, with the drafting
step and the acceptance rule as plug-ins (the pitfalls in
:mod:`specdec_lite.teaching.pitfalls` use it too).

Only numpy and ``math``: the chi-square tail probability is computed here from the
regularised incomplete gamma function.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..checks import check_int, check_probs, check_prompt
from ..engine.decode import speculative_generate
from ..engine.trace import Generation, Step
from ..models.ngram import MarkovModel, check_model
from ..rules.distributions import as_generator, check_top_k, check_top_p, sample, warp
from ..rules.verify import Verification

#: A drafting step: ``propose(prefix [n], k, rng) -> (draft_tokens [k], draft_probs [k, V])``.
Propose = Callable[[np.ndarray, int, np.random.Generator], tuple[np.ndarray, np.ndarray]]
#: An acceptance rule with :func:`specdec_lite.rules.verify.verify`'s positional signature.
Judge = Callable[[np.ndarray, np.ndarray, np.ndarray, np.random.Generator], object]

# ---------------------------------------------------------------- the chi-square tail


def gamma_q(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x) = Γ(a, x) / Γ(a), for a > 0, x >= 0.

    Below x = a + 1 the power series of the lower part P = 1 − Q converges fast; above
    it, the continued fraction of Q itself does (evaluated with Lentz's method), which
    keeps tiny tail probabilities accurate instead of computing them as 1 − (almost 1).
    """
    if not (a > 0 and math.isfinite(a)):
        raise ValueError(f"a must be finite and > 0, got {a!r}")
    if not (x >= 0):  # also rejects NaN
        raise ValueError(f"x must be >= 0, got {x!r}")
    if x == 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)  # log(x^a e^-x / Γ(a))
    if x < a + 1:
        # P(a, x) = x^a e^-x / Γ(a) · Σ_n x^n / (a (a+1) ... (a+n))
        term = total = 1.0 / a
        for n in range(1, 10_000):
            term *= x / (a + n)
            total += term
            if term < total * 1e-17:
                break
        return max(0.0, 1.0 - math.exp(log_front) * total)
    # Q(a, x) = x^a e^-x / Γ(a) · 1 / (x + 1 − a − 1(1 − a) / (x + 3 − a − 2(2 − a) / ...))
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    fraction = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        fraction *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return math.exp(log_front) * fraction


def chi2_sf(statistic: float, df: int) -> float:
    """P(X ≥ statistic) for X chi-square with ``df`` degrees of freedom: Q(df/2, statistic/2)."""
    df = check_int(df, "df", 1)
    if not statistic >= 0:
        raise ValueError(f"statistic must be >= 0, got {statistic!r}")
    return gamma_q(df / 2.0, statistic / 2.0)


def chi2_isf(upper_tail: float, df: int) -> float:
    """The value a chi-square with ``df`` degrees of freedom exceeds with probability
    ``upper_tail`` (the inverse of :func:`chi2_sf`, found by bisection)."""
    if not 0 < upper_tail < 1:
        raise ValueError(f"upper_tail must be in (0, 1), got {upper_tail!r}")
    df = check_int(df, "df", 1)
    lo, hi = 0.0, float(df) + 10.0
    while chi2_sf(hi, df) > upper_tail:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if chi2_sf(mid, df) > upper_tail else (lo, mid)
    return 0.5 * (lo + hi)


# ---------------------------------------------------------------- the law of a continuation


def sequence_law(
    model: object,
    prompt: Iterable[int],
    length: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    max_sequences: int = 100_000,
) -> dict[tuple[int, ...], float]:
    """P(x_1..x_length | prompt) for every continuation the warped model can produce.

    Each next-token row is warped as the decoders warp it (temperature, then ``top_k``,
    then ``top_p``; see :func:`specdec_lite.rules.distributions.warp`). Continuations of
    probability zero are left out, so a sample missing from the result is impossible.
    The enumeration grows like V^length; it stops with a ``ValueError`` past
    ``max_sequences`` continuations.
    """
    vocab = check_model(model, "model")
    prompt = check_prompt(np.asarray(list(prompt)), vocab)
    length = check_int(length, "length", 0)
    top_k, top_p = check_top_k(top_k), check_top_p(top_p)
    frontier: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    for _ in range(length):
        grown = []
        for prefix, prob in frontier:
            tokens = np.concatenate([prompt, np.asarray(prefix, dtype=np.int64)])
            row = check_probs(model.probs(tokens)[-1], "model.probs output", vocab)  # [V]
            row = warp(row, temperature, top_k, top_p)  # [V]
            grown += [(prefix + (int(x),), prob * float(row[x])) for x in np.flatnonzero(row)]
        if len(grown) > max_sequences:
            raise ValueError(
                f"length={length} gives more than max_sequences={max_sequences} continuations"
            )
        frontier = grown
    return dict(frontier)


# ---------------------------------------------------------------- Pearson's test


@dataclass(frozen=True)
class ChiSquare:
    """Pearson's chi-square test of sampled sequences against their exact law.

    ``p_value`` is the chance that a correct sampler scores ``statistic`` or more;
    ``n_impossible`` counts samples the law gives probability zero (one is enough to
    prove the sampler wrong, whatever the p-value). ``n_cells`` is the number of
    cells after pooling, and ``df = n_cells - 1``.
    """

    statistic: float
    df: int
    p_value: float
    n_samples: int
    n_cells: int
    n_impossible: int
    impossible_examples: tuple[tuple[int, ...], ...] = ()

    def passed(self, significance: float = 1e-3) -> bool:
        """True when no sample is impossible and ``p_value > significance``."""
        if not 0 < significance < 1:
            raise ValueError(f"significance must be in (0, 1), got {significance!r}")
        if self.df == 0:
            raise ValueError(
                "the samples fall in a single cell, so there is nothing to test: draw more "
                "samples or use a law with more than one likely sequence"
            )
        return self.n_impossible == 0 and self.p_value > significance

    def __str__(self) -> str:
        p_value = f"{self.p_value:.3g}" if self.p_value != 0 else "< 1e-300"  # underflow
        text = (
            f"chi-square {self.statistic:.1f} on {self.df} degrees of freedom "
            f"(p-value {p_value}); {self.n_impossible} of {self.n_samples} "
            "samples impossible under the law"
        )
        if self.impossible_examples:
            text += ", e.g. " + ", ".join(str(s) for s in self.impossible_examples)
        return text


def chi_square(
    samples: Iterable[Iterable[int]],
    law: dict[tuple[int, ...], float],
    min_expected: float = 5.0,
) -> ChiSquare:
    """Pearson's chi-square of ``samples`` (sequences of token ids) against ``law``.

    Every sequence whose expected count n·P is at least ``min_expected`` is its own cell.
    The rest (rare sequences, and any sequence the law does not list) share one pooled
    cell; while that cell expects fewer than ``min_expected`` samples, the smallest
    other cell joins it. The p-value is the chi-square upper tail with ``df = cells − 1``.
    """
    samples = [tuple(int(t) for t in s) for s in samples]
    n = len(samples)
    if n == 0:
        raise ValueError("samples must not be empty")
    if not (isinstance(min_expected, numbers.Real) and min_expected > 0):
        raise ValueError(f"min_expected must be a number > 0, got {min_expected!r}")
    probs = np.array(list(law.values()), dtype=np.float64)
    if probs.size == 0 or not np.isfinite(probs).all() or probs.min() < 0:
        raise ValueError("law must map sequences to finite, non-negative probabilities")
    if abs(probs.sum() - 1.0) > 1e-6:
        raise ValueError(f"law's probabilities must sum to 1, got {probs.sum()!r}")
    lengths = {len(s) for s in law}
    if len(lengths) != 1 or any(len(s) not in lengths for s in samples):
        raise ValueError(f"samples and law's sequences must all have one length, got {lengths}")

    counts = Counter(samples)
    impossible = [s for s in counts if law.get(s, 0.0) == 0.0]
    cells = sorted(
        ((n * prob, counts.get(seq, 0)) for seq, prob in law.items() if n * prob >= min_expected),
        reverse=True,
    )  # (expected, observed), largest first
    rest_expected = max(n - sum(e for e, _ in cells), 0.0)
    rest_observed = n - sum(o for _, o in cells)
    while cells and rest_expected < min_expected:
        e, o = cells.pop()
        rest_expected, rest_observed = rest_expected + e, rest_observed + o
    if rest_expected > 0:
        cells.append((rest_expected, rest_observed))
    statistic = float(sum((o - e) ** 2 / e for e, o in cells))
    df = len(cells) - 1
    p_value = chi2_sf(statistic, df) if df > 0 else float("nan")
    return ChiSquare(
        statistic,
        df,
        p_value,
        n,
        len(cells),
        sum(counts[s] for s in impossible),
        tuple(impossible[:3]),
    )


# ---------------------------------------------------------------- running decoders


def sample_continuations(
    target: object,
    draft: object,
    prompt: Iterable[int],
    length: int,
    n: int,
    seed: int | np.random.Generator | None,
    *,
    k: int,
    temperature: float = 1.0,
    decoder: Callable[..., Generation] | None = None,
    **decoder_kwargs: object,
) -> list[tuple[int, ...]]:
    """The first ``length`` new tokens of ``n`` runs of a speculative decoder from ``prompt``.

    ``decoder`` defaults to :func:`specdec_lite.engine.decode.speculative_generate` (exact rule);
    any function called as ``decoder(target, draft, prompt, k=k, max_new_tokens=length,
    temperature=temperature, seed=rng, **decoder_kwargs)`` that returns a
    :class:`~specdec_lite.engine.decode.Generation` fits, such as the pitfall decoders. One
    Generator, made from ``seed``, feeds every run, so runs differ but the list is
    reproducible.
    """
    decoder = speculative_generate if decoder is None else decoder
    length = check_int(length, "length", 1)
    n = check_int(n, "n", 1)
    rng = as_generator(seed)
    prompt = list(prompt)
    out = []
    for _ in range(n):
        gen = decoder(target, draft, prompt, k=k, max_new_tokens=length,
                      temperature=temperature, seed=rng, **decoder_kwargs)
        if len(gen.tokens) < length:
            raise ValueError(f"decoder returned {len(gen.tokens)} tokens, fewer than {length}")
        out.append(tuple(gen.tokens[:length].tolist()))
    return out


def draft_proposer(
    draft: object, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Propose:
    """The correct drafting step: x_i ~ q_i(· | prefix, x_<i) for i = 1..k, one draft call
    each, returning the tokens [k] and the warped rows q_i [k, V] they were drawn from."""
    top_k, top_p = check_top_k(top_k), check_top_p(top_p)

    def propose(prefix: np.ndarray, k: int, rng: np.random.Generator):
        n = len(prefix)
        ctx = np.concatenate([prefix, np.zeros(k, dtype=np.int64)])  # [n + k]
        q = np.zeros((k, draft.vocab_size))  # [k, V]
        for i in range(k):
            q[i] = warp(draft.probs(ctx[: n + i])[-1], temperature, top_k, top_p)
            ctx[n + i] = sample(q[i], rng)
        return ctx[n:], q

    return propose


def decoder_with(judge: Judge) -> Callable[..., Generation]:
    """A decoder for :func:`sample_continuations` that drafts correctly (:func:`draft_proposer`)
    and accepts with ``judge``, any function with :func:`~specdec_lite.rules.verify.verify`'s
    positional signature (a pitfall's rule, or one you wrote). Each run is one
    :func:`speculative_loop`; its ``top_k`` and ``top_p`` cut the draft's and the target's
    rows alike."""
    if not callable(judge):
        raise TypeError(f"judge must be a function, got {type(judge).__name__}")

    def decoder(target: object, draft: object, prompt: Iterable[int], *, k: int,
                max_new_tokens: int, temperature: float = 1.0,
                seed: int | np.random.Generator | None = None, top_k: int | None = None,
                top_p: float | None = None) -> Generation:
        propose = draft_proposer(draft, temperature, top_k=top_k, top_p=top_p)
        return speculative_loop(target, prompt, propose, judge, k=k,
                                max_new_tokens=max_new_tokens, temperature=temperature,
                                top_k=top_k, top_p=top_p, seed=seed)

    return decoder


def _as_verification(result: object, k: int, vocab: int) -> Verification:
    """Accept a :class:`~specdec_lite.rules.verify.Verification` or a plain array of the tokens
    to emit (then every token but the last counts as accepted)."""
    if isinstance(result, Verification):
        tokens, n_accepted, extra = result.tokens, result.n_accepted, result.extra
    else:
        tokens = np.asarray(result)
        n_accepted = len(tokens) - 1 if tokens.ndim == 1 else -1
        extra = "bonus" if n_accepted == k else "correction"
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or not 1 <= len(tokens) <= k + 1:
        raise ValueError(
            f"the verify function must return 1 to k + 1 = {k + 1} tokens, got shape "
            f"{tokens.shape}"
        )
    if not np.issubdtype(tokens.dtype, np.integer):
        raise TypeError(f"the verify function must return integer ids, got dtype {tokens.dtype}")
    if tokens.min() < 0 or tokens.max() >= vocab:
        raise ValueError(f"the verify function returned ids outside [0, {vocab}): {tokens}")
    return Verification(tokens.astype(np.int64), int(n_accepted), extra)


def speculative_loop(
    target: object,
    prompt: Iterable[int],
    propose: Propose,
    judge: Judge,
    *,
    k: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | np.random.Generator | None = None,
) -> Generation:
    """A speculative decode loop with the drafting step and the acceptance rule plugged in.

    Each step calls ``propose(prefix, k, rng)`` for k draft tokens and the rows q [k, V]
    it reports, runs the target once on prefix + drafts, warps its last k + 1 rows into
    p [k + 1, V] (temperature, ``top_k``, ``top_p``), and emits what
    ``judge(draft_tokens, q, p, rng)`` returns. Every step drafts a full k and the
    output is cut to ``max_new_tokens`` (a prefix of an exact sample is an exact sample
    of the shorter length). :func:`specdec_lite.engine.decode.speculative_generate` is the
    library's own loop; this one exists so that wrong proposers and rules can run.
    """
    vocab = check_model(target, "target")
    prompt = check_prompt(np.asarray(list(prompt)), vocab)
    k = check_int(k, "k", 1)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", 0)
    top_k, top_p = check_top_k(top_k), check_top_p(top_p)
    rng = as_generator(seed)
    gen = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=prompt)
    seq = prompt  # [n] the sequence so far
    while len(seq) - len(prompt) < max_new_tokens:
        drafted, q = propose(seq, k, rng)  # [k], [k, V]
        gen.n_draft_calls += k
        ctx = np.concatenate([seq, drafted])  # [n + k]
        p = warp(target.probs(ctx)[-(k + 1) :], temperature, top_k, top_p)  # [k + 1, V]
        gen.n_target_calls += 1
        result = _as_verification(judge(drafted, q, p, rng), k, vocab)
        emitted = result.tokens[: max_new_tokens - (len(seq) - len(prompt))]
        gen.steps.append(Step(tuple(drafted.tolist()), result.n_accepted,
                              tuple(emitted.tolist()), result.extra))
        seq = np.concatenate([seq, emitted])
    gen.tokens = seq[len(prompt) :]
    return gen


# ---------------------------------------------------------------- testing your own verify


def small_pair() -> tuple[MarkovModel, MarkovModel, list[int]]:
    """A target, a draft and a prompt small enough to enumerate: first-order models over
    V = 3 tokens. The target rules some transitions out (probability 0) and the draft
    does not, so a rule that keeps a token the target forbids gets caught."""
    target = MarkovModel(np.array([[0.6, 0.4, 0.0], [0.15, 0.25, 0.6], [0.5, 0.0, 0.5]]))
    draft = MarkovModel(np.array([[0.3, 0.3, 0.4], [0.5, 0.3, 0.2], [0.2, 0.5, 0.3]]))
    return target, draft, [0]


def check_verify(
    fn: Judge,
    seed: int | np.random.Generator | None = 0,
    *,
    n: int = 4000,
    length: int = 4,
    k: int = 3,
    temperature: float = 1.0,
) -> ChiSquare:
    """Test a ``verify`` you wrote yourself: run it inside the decode loop on
    :func:`small_pair` ``n`` times and compare the first ``length`` tokens with the
    target's exact law.

    ``fn(draft_tokens, draft_probs, target_probs, rng)`` gets int64 ids [k], the draft's
    rows q [k, V] they were sampled from, the target's rows p [k + 1, V] (all warped to
    ``temperature``) and a numpy Generator for every random draw. It returns the tokens
    to emit, the accepted drafts followed by one correction or bonus token: a
    :class:`~specdec_lite.rules.verify.Verification` or a 1-D array of ids.
    :func:`specdec_lite.rules.verify.verify` itself fits. The result's
    ``passed()`` is True for a correct rule except about 1 seed in 1,000.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    target, draft, prompt = small_pair()
    rng = as_generator(seed)
    propose = draft_proposer(draft, temperature)
    samples = [
        tuple(speculative_loop(target, prompt, propose, fn, k=k, max_new_tokens=length,
                               temperature=temperature, seed=rng).tokens.tolist())
        for _ in range(check_int(n, "n", 1))
    ]
    return chi_square(samples, sequence_law(target, prompt, length, temperature))


__all__ = [
    "ChiSquare",
    "Judge",
    "Propose",
    "check_verify",
    "chi2_isf",
    "chi2_sf",
    "chi_square",
    "decoder_with",
    "draft_proposer",
    "gamma_q",
    "sample_continuations",
    "sequence_law",
    "small_pair",
    "speculative_loop",
]
