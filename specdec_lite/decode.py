"""Decode loops: plain autoregressive sampling and speculative decoding, with traces.

Both decoders return a :class:`Generation` whose ``steps`` record, for every
target call, what the draft proposed, how many tokens were accepted and what
was emitted. Metric conventions:

* ``acceptance_rate`` = accepted draft tokens / proposed draft tokens
  (0.0 when nothing was proposed, as in plain decoding).
* ``mean_tokens_per_step`` (τ) = emitted tokens / target calls. It includes
  the correction or bonus token, so plain decoding has τ = 1 (the Spec-Bench
  and vLLM convention).
"""

from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field

import numpy as np

from .distributions import apply_temperature, as_generator, check_probs, check_temperature, sample
from .models import check_tokens
from .verify import check_rule, verify_checked


@dataclass(frozen=True)
class Step:
    """One target call: the draft ``proposed`` tokens, ``n_accepted`` of them were kept,
    and ``emitted`` tokens were appended (the accepted prefix, then one ``extra`` token:
    ``"correction"``, ``"bonus"``, or ``"sample"`` for plain decoding). ``emitted`` can be
    shorter than ``n_accepted + 1`` only when EOS cut the step short."""

    proposed: tuple[int, ...]
    n_accepted: int
    emitted: tuple[int, ...]
    extra: str


@dataclass
class Generation:
    """The result of a decoder: new tokens, call counts and a per-step trace."""

    tokens: np.ndarray  # [n_new]
    prompt: np.ndarray  # [n_prompt]
    steps: list[Step] = field(default_factory=list)
    target_calls: int = 0
    draft_calls: int = 0
    wall_time_s: float = 0.0

    @property
    def accepted(self) -> list[int]:
        """Draft tokens accepted at each step."""
        return [s.n_accepted for s in self.steps]

    @property
    def proposed(self) -> int:
        """Total draft tokens proposed."""
        return sum(len(s.proposed) for s in self.steps)

    @property
    def acceptance_rate(self) -> float:
        """Accepted draft tokens / proposed draft tokens; 0.0 if none were proposed."""
        return sum(self.accepted) / self.proposed if self.proposed else 0.0

    @property
    def checked(self) -> int:
        """Draft tokens the target actually judged: each step's accepted tokens plus its
        first rejected one (the tokens after a rejection are never looked at)."""
        return sum(min(s.n_accepted + 1, len(s.proposed)) for s in self.steps)

    @property
    def per_token_acceptance(self) -> float:
        """Accepted / checked draft tokens: the estimate of α, the chance that one draft
        token is accepted. ``acceptance_rate`` (accepted / proposed) is lower, E[N]/k,
        because it also counts the unchecked tokens after a rejection. 0.0 if none."""
        return sum(self.accepted) / self.checked if self.checked else 0.0

    @property
    def mean_tokens_per_step(self) -> float:
        """τ: emitted tokens per target call, counting the correction/bonus token."""
        return len(self.tokens) / self.target_calls if self.target_calls else 0.0


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_model(model: object, name: str) -> int:
    vocab = getattr(model, "vocab_size", None)
    if not callable(getattr(model, "probs", None)) or vocab is None:
        raise TypeError(f"{name} must have vocab_size and a probs(tokens) method")
    return _check_int(f"{name}.vocab_size", vocab, 1)


def _check_eos(eos_id: int | None, vocab_size: int) -> int | None:
    if eos_id is None:
        return None
    eos_id = _check_int("eos_id", eos_id, 0)
    if eos_id >= vocab_size:
        raise ValueError(f"eos_id must be < vocab_size={vocab_size}, got {eos_id}")
    return eos_id


def model_rows(
    model: object, tokens: np.ndarray, n_rows: int, name: str, temperature: float
) -> np.ndarray:
    """Call ``model.probs(tokens)`` once, validate it and return its last ``n_rows`` rows at
    ``temperature``: [n_rows, V]. A model with ``last_probs(tokens, n_rows, temperature)``
    (the transformer) is asked for those rows only."""
    last = getattr(model, "last_probs", None)
    if last is not None:  # the transformer: rows of its own softmax, valid by construction
        return last(tokens, n_rows, temperature)  # [n_rows, V] float64
    out = np.asarray(model.probs(tokens))
    if out.ndim != 2 or out.shape[0] != len(tokens):
        raise ValueError(
            f"{name}.probs returned shape {out.shape}, expected ({len(tokens)}, vocab_size)"
        )
    rows = check_probs(out[-n_rows:], f"{name}.probs output", vocab_size=model.vocab_size)
    return apply_temperature(rows, temperature)


def _cut_at_eos(tokens: np.ndarray, eos_id: int | None) -> tuple[np.ndarray, bool]:
    if eos_id is None:
        return tokens, False
    hits = np.flatnonzero(tokens == eos_id)
    return (tokens[: hits[0] + 1], True) if hits.size else (tokens, False)


def _start(prompt: object, vocab_size: int, max_new_tokens: int) -> tuple[np.ndarray, int]:
    prompt = check_tokens(prompt, vocab_size, name="prompt")
    if prompt.size == 0:
        raise ValueError("prompt must contain at least one token")
    return prompt, _check_int("max_new_tokens", max_new_tokens, 0)


def generate(
    model: object,
    prompt: np.ndarray,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    seed: int | np.random.Generator | None = None,
    eos_id: int | None = None,
) -> Generation:
    """Autoregressive baseline: one ``model.probs`` call per new token, x ~ p_T(· | prefix).

    Stops after ``max_new_tokens`` tokens, or after emitting ``eos_id`` (included).
    """
    vocab = _check_model(model, "model")
    prompt, max_new_tokens = _start(prompt, vocab, max_new_tokens)
    temperature = check_temperature(temperature)
    eos_id = _check_eos(eos_id, vocab)
    rng = as_generator(seed)
    start = time.perf_counter()
    seq = np.concatenate([prompt, np.zeros(max_new_tokens, dtype=np.int64)])  # [n + max_new]
    n = len(prompt)  # seq[:n] is the sequence so far; each call gets a view of it
    gen = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=prompt)
    for _ in range(max_new_tokens):
        p = model_rows(model, seq[:n], 1, "model", temperature)[0]  # [V]
        gen.target_calls += 1
        token = int(p.argmax()) if temperature == 0 else sample(p, rng)
        seq[n] = token
        n += 1
        gen.steps.append(Step((), 0, (token,), "sample"))
        if token == eos_id:
            break
    gen.tokens = seq[len(prompt) : n].copy()
    gen.wall_time_s = time.perf_counter() - start
    return gen


def speculative_generate(
    target: object,
    draft: object,
    prompt: np.ndarray,
    *,
    k: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    rule: str = "exact",
    seed: int | np.random.Generator | None = None,
    eos_id: int | None = None,
    **rule_params: float,
) -> Generation:
    """Speculative decoding (Leviathan et al. 2023, Algorithm 1), one target call per step.

    Each step drafts up to ``k`` tokens x_i ~ q_T(· | prefix, x_<i) with the draft
    model, scores prefix + x_1..x_k with one target call, and keeps what
    :func:`specdec_lite.verify.verify` accepts plus one correction or bonus token.
    Temperature is applied to both models before verification; ``temperature=0``
    drafts and verifies greedily. Near the end fewer than ``k`` tokens are drafted,
    so exactly ``max_new_tokens`` tokens come out unless ``eos_id`` came first.
    """
    k = _check_int("k", k, 1)
    vocab = _check_model(target, "target")
    draft_vocab = _check_model(draft, "draft")
    if draft_vocab != vocab:
        raise ValueError(f"draft.vocab_size={draft_vocab} differs from target.vocab_size={vocab}")
    prompt, max_new_tokens = _start(prompt, vocab, max_new_tokens)
    temperature = check_temperature(temperature)
    eos_id = _check_eos(eos_id, vocab)
    params = check_rule(rule, rule_params)
    rng = as_generator(seed)
    greedy = temperature == 0
    start = time.perf_counter()
    seq = prompt  # [n] the sequence so far
    gen = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=prompt)
    n_new = 0
    while n_new < max_new_tokens:
        k_step = min(k, max_new_tokens - n_new - 1)  # never emit more than asked for
        n = len(seq)
        ctx = np.concatenate([seq, np.zeros(k_step, dtype=np.int64)])  # [n + k_step]
        draft_probs = np.zeros((k_step, vocab))  # [k_step, V]
        for i in range(k_step):  # draft i sees ctx[:n + i], a view never written again
            q = model_rows(draft, ctx[: n + i], 1, "draft", temperature)[0]  # [V]
            gen.draft_calls += 1
            draft_probs[i] = q
            ctx[n + i] = int(q.argmax()) if greedy else sample(q, rng)
        drafted = ctx[n:]  # [k_step]
        target_probs = model_rows(target, ctx, k_step + 1, "target", temperature)
        gen.target_calls += 1
        result = verify_checked(drafted, draft_probs, target_probs, rng, rule, params)
        emitted, hit_eos = _cut_at_eos(result.tokens, eos_id)
        gen.steps.append(
            Step(tuple(drafted.tolist()), result.n_accepted, tuple(emitted.tolist()),
                 result.extra)
        )
        seq = np.concatenate([seq, emitted])
        n_new += len(emitted)
        if hit_eos:
            break
    gen.tokens = seq[len(prompt) :]
    gen.wall_time_s = time.perf_counter() - start
    return gen
