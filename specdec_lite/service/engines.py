"""The decode engines behind the service, one per group of requests that can share a step.

:class:`EngineFactory` holds the shipped models (loaded once; weights are read-only and
every sequence has its own cache) and makes a :class:`~.scheduler.StepEngine` for a
``(method, k, temperature, top_p)`` group:

- ``plain``, ``draft`` and ``ngram`` run on :class:`specdec_lite.batch.BatchEngine`
  (continuous batching, one target forward per step for the whole group). ``draft`` drafts
  with the distilled 1-layer GPT, ``ngram`` with the 3-gram model of the bundled corpus,
  ``lookup`` by prompt lookup (:class:`specdec_lite.proposers.PromptLookup`: tokens copied
  from earlier in the prompt and output, no draft model).
  Verification failures fall back to plain decoding for that step (the output law stays
  exact), and a circuit breaker stops drafting after repeated failures.
- ``medusa`` decodes one request at a time, whole, with
  :func:`specdec_lite.medusa.medusa_generate` (Medusa is not batched here): its tokens
  arrive in one piece rather than step by step.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np

from ..batch import BatchEngine, Sampling
from ..breaker import CircuitBreaker
from ..decode import Step
from ..medusa import chain_tree, medusa_generate
from ..proposers import PromptLookup
from .scheduler import Settings, StepUpdate


def _update(steps: list[Step], new: np.ndarray, finished: bool, draft_calls: int,
            head_calls: int, fallbacks: int, rng: np.random.Generator) -> StepUpdate:
    return StepUpdate(
        new_tokens=[int(t) for t in new], finished=finished, n_target_calls=len(steps),
        n_draft_calls=draft_calls, n_head_calls=head_calls,
        n_proposed=sum(len(s.proposed) for s in steps),
        n_accepted=sum(s.n_accepted for s in steps),
        n_checked=sum(min(s.n_accepted + 1, len(s.proposed)) for s in steps),
        n_fallbacks=fallbacks, rng_state=rng.bit_generator.state, steps=list(steps))


class BatchStepEngine:
    """A :class:`BatchEngine` seen through the scheduler's :class:`StepEngine` contract."""

    def __init__(self, engine: BatchEngine) -> None:
        self.engine = engine

    def __len__(self) -> int:
        return len(self.engine.active) + len(self.engine.waiting)

    def add(self, key: str, prompt: np.ndarray, tokens: list[int], settings: Settings,
            rng_state: dict | None) -> None:
        sampling = dict(temperature=settings.temperature, top_p=settings.top_p)
        if rng_state is None:
            self.engine.add(prompt, max_new_tokens=settings.max_new_tokens,
                            seed=settings.seed, request_id=key,
                            sampling=Sampling.checked(**sampling))
        else:  # resumed from the journal: continue from its tokens and Generator state
            self.engine.resume(dict(request_id=key, prompt=prompt.tolist(), tokens=tokens,
                                    max_new_tokens=settings.max_new_tokens, eos_id=None,
                                    rng_state=rng_state, sampling=sampling))

    def remove(self, key: str) -> None:
        self.engine.cancel(key)

    def step(self) -> dict[str, StepUpdate]:
        before = {s.request_id: (s, s.n_new, len(s.gen.steps), s.gen.n_draft_calls,
                                 s.n_fallbacks)
                  for s in [*self.engine.active, *self.engine.waiting]}
        self.engine.step()
        updates = {}
        for key, (s, n_new, n_steps, n_draft, n_fallbacks) in before.items():
            steps = s.gen.steps[n_steps:]
            if not steps and not s.done:
                continue  # still waiting for a slot
            updates[key] = _update(steps, s.context[len(s.prompt) + n_new:], s.done,
                                   s.gen.n_draft_calls - n_draft, 0,
                                   s.n_fallbacks - n_fallbacks, s.rng)
        return updates


class MedusaStepEngine:
    """Medusa requests one at a time: each step decodes the oldest request whole."""

    def __init__(self, target, heads, k: int, temperature: float,
                 top_p: float | None) -> None:
        self.target, self.heads = target, heads
        self.temperature, self.top_p = temperature, top_p
        self.tree = None if temperature == 0 else chain_tree(k)
        self.queue: deque[tuple[str, np.ndarray, int, Settings]] = deque()

    def __len__(self) -> int:
        return len(self.queue)

    def add(self, key: str, prompt: np.ndarray, tokens: list[int], settings: Settings,
            rng_state: dict | None) -> None:
        # A resumed request is decoded again from its seed (the same tokens come out) and
        # only the tokens it had not yet delivered are handed on.
        self.queue.append((key, prompt, len(tokens), settings))

    def remove(self, key: str) -> None:
        self.queue = deque(item for item in self.queue if item[0] != key)

    def step(self) -> dict[str, StepUpdate]:
        key, prompt, n_done, s = self.queue.popleft()
        rng = np.random.default_rng(s.seed)
        gen = medusa_generate(self.target, self.heads, prompt, max_new_tokens=s.max_new_tokens,
                              temperature=s.temperature, tree=self.tree,
                              rule="greedy" if s.temperature == 0 else "exact", seed=rng,
                              top_p=self.top_p if s.temperature else None)
        # a resumed request hands on only the steps after those it had delivered, so its
        # statistics are not counted twice (one head call per step after the first)
        skip = n_emitted = 0
        while skip < len(gen.steps) and n_emitted + len(gen.steps[skip].emitted) <= n_done:
            n_emitted += len(gen.steps[skip].emitted)
            skip += 1
        steps = gen.steps[skip:]
        head_calls = gen.n_head_calls - max(skip - 1, 0)
        return {key: _update(steps, gen.tokens[n_done:], True, 0, head_calls, 0, rng)}


class EngineFactory:
    """The models of one server and the engines over them."""

    def __init__(self, tokenizer, target, draft, ngram_draft, heads, *,
                 breaker: Callable[[], CircuitBreaker] | None = None,
                 inject_fault: Callable[[int], None] | None = None) -> None:
        self.tokenizer, self.target, self.draft = tokenizer, target, draft
        self.ngram_draft, self.heads = ngram_draft, heads
        self.max_len = int(target.config.max_len)
        self.n_heads = int(heads.n_heads)
        self.new_breaker = breaker or (lambda: CircuitBreaker(3, cooldown_s=5.0))
        self.inject_fault = inject_fault

    @classmethod
    def shipped(cls, **options) -> EngineFactory:
        """The shipped GPT target, its distilled draft, Medusa heads and the corpus 3-gram."""
        from ..corpus import fit_ngrams
        from ..pretrained import load_pretrained

        start = time.perf_counter()
        shipped = load_pretrained()
        _, _, ngram_draft = fit_ngrams()
        factory = cls(shipped.tokenizer, shipped.target, shipped.draft, ngram_draft,
                      shipped.heads, **options)
        factory.load_s = time.perf_counter() - start
        return factory

    def make_engine(self, method: str, k: int, temperature: float, top_p: float | None,
                    max_batch: int):
        if method == "medusa":
            return MedusaStepEngine(self.target, self.heads, k, temperature, top_p)
        draft = {"plain": None, "draft": self.draft, "ngram": self.ngram_draft,
                 "lookup": PromptLookup()}[method]
        engine = BatchEngine(self.target, draft, k=k if draft is not None else 0,
                             temperature=temperature, top_p=top_p, max_batch=max_batch,
                             fall_back=True, breaker=self.new_breaker(),
                             inject_fault=self.inject_fault)
        return BatchStepEngine(engine)
