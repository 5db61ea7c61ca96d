"""The decode engines behind the service, one per group of requests that can share a step.

:class:`EngineFactory` holds the shipped models (loaded once; weights are read-only and
every sequence has its own cache) and makes a :class:`~.scheduler.StepEngine` for each
``(method, k)``; every sequence in it keeps its own temperature, top-p and draft-length
policy (``policy``, read with ``k`` as ``speculative_generate`` reads them):

- ``plain``, ``draft``, ``ngram``, ``lookup``, ``eagle`` and ``early-exit`` run on
  :class:`specdec_lite.engine.batch.BatchEngine` (continuous batching, one target forward
  per step for the whole group). ``draft`` drafts with the distilled 1-layer GPT,
  ``ngram`` with the 3-gram model of the bundled corpus, ``lookup`` by prompt lookup
  (:class:`specdec_lite.drafting.proposers.PromptLookup`: tokens copied from earlier in
  the prompt and output, no draft model), ``eagle`` with the EAGLE-style drafter over the
  target's features (each sequence with its own drafter cache, the features read from
  the batched target cache; :mod:`specdec_lite.drafting.eagle`), ``early-exit`` with the
  target's first block and its trained exit head (:mod:`specdec_lite.drafting.early_exit`).
  Verification failures fall back to plain decoding for that step (the output law stays
  exact), and a circuit breaker stops drafting after repeated failures.
- ``medusa`` advances each request one step per turn (:mod:`specdec_lite.engine.medusa_decode`),
  each on its own KV cache and with its own temperature and top-p: one target forward per
  request and step (Medusa's tree forwards are not batched here), but no request waits
  for another to finish.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..drafting.draft_length import policy_record
from ..drafting.medusa import chain_tree
from ..drafting.proposers import PromptLookup
from ..engine.batch import BatchEngine, Sampling
from ..engine.batch_boundary import rows_step
from ..engine.breaker import CircuitBreaker
from ..engine.faults import ProcessVerifier
from ..engine.medusa_decode import MedusaRun, medusa_generate, medusa_start, medusa_step
from ..engine.sequence import step_records
from ..engine.trace import Step, step_counts
from ..pretrained import shipped_target
from .scheduler import Settings, StepUpdate
from .schema import DEFAULT_K, METHODS

VERIFIERS = ("inprocess", "process")
AUTO_PROMPT_CHARS = 96  # the held-out prompt that --spec-max-batch auto times


def _update(steps: list[Step], new: np.ndarray, finished: bool, draft_calls: int,
            head_calls: int, fallbacks: int, rng: np.random.Generator) -> StepUpdate:
    return StepUpdate(
        new_tokens=[int(t) for t in new], finished=finished, n_target_calls=len(steps),
        n_draft_calls=draft_calls, n_head_calls=head_calls, **step_counts(steps),
        n_fallbacks=fallbacks, rng_state=rng.bit_generator.state, steps=list(steps))


class BatchStepEngine:
    """A :class:`BatchEngine` seen through the scheduler's :class:`StepEngine` contract."""

    def __init__(self, engine: BatchEngine) -> None:
        self.engine = engine

    def __len__(self) -> int:
        return len(self.engine.active) + len(self.engine.waiting)

    def add(self, key: str, prompt: np.ndarray, tokens: list[int], settings: Settings,
            rng_state: dict | None, steps: list | None = None) -> None:
        sampling = Sampling.checked(temperature=settings.temperature, top_p=settings.top_p)
        named = settings.policy != "fixed" and self.engine.k > 0
        if rng_state is None:
            self.engine.add(prompt, max_new_tokens=settings.max_new_tokens,
                            seed=settings.seed, request_id=key, sampling=sampling,
                            policy=settings.policy if named else None)
            return
        # resumed from the journal: continue from its tokens and Generator state, with the
        # k its policy would have chosen after its steps (replayed from them)
        record = dict(request_id=key, prompt=prompt.tolist(), tokens=tokens,
                      max_new_tokens=settings.max_new_tokens, eos_id=None,
                      rng_state=rng_state, sampling=dict(temperature=sampling.temperature,
                                                         top_p=sampling.top_p),
                      steps=step_records(steps or []))
        if named:
            policy, stops = self.engine.draft_length(prompt, sampling, None, settings.policy)
            record.update(policy=policy_record(policy), min_confidence=stops["min_confidence"],
                          risk_stop=stops["risk_stop"] and stops["risk_stop"].record())
        self.engine.resume(record)

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
    """Medusa requests, each on a KV cache of its own, advanced one step per scheduler turn
    (at most ``max_batch`` at a time; each step is one target forward of its own), with
    its own temperature and top-p, so Medusa streams and honours deadlines like the rest.

    A request resumed from the journal starts again from its seed (the same tokens come
    out) and hands on only the tokens and steps it had not yet delivered."""

    def __init__(self, target, heads, k: int, max_batch: int) -> None:
        self.target, self.heads, self.k, self.max_batch = target, heads, k, max_batch
        self.waiting: deque[tuple[str, np.ndarray, int, Settings]] = deque()
        self.active: dict[str, _MedusaSequence] = {}

    def __len__(self) -> int:
        return len(self.waiting) + len(self.active)

    def add(self, key: str, prompt: np.ndarray, tokens: list[int], settings: Settings,
            rng_state: dict | None, steps: list | None = None) -> None:
        self.waiting.append((key, prompt, len(tokens), settings))  # it replays from its seed

    def remove(self, key: str) -> None:
        self.waiting = deque(item for item in self.waiting if item[0] != key)
        self.active.pop(key, None)  # its cache goes with it

    def step(self) -> dict[str, StepUpdate]:
        while self.waiting and len(self.active) < self.max_batch:
            key, prompt, n_done, s = self.waiting.popleft()
            t = s.temperature
            run = medusa_start(self.target, self.heads, prompt, max_new_tokens=s.max_new_tokens,
                               temperature=t, tree=None if t == 0 else chain_tree(self.k),
                               rule="greedy" if t == 0 else "exact",
                               seed=np.random.default_rng(s.seed), top_p=s.top_p if t else None,
                               cache=self.target.new_state())
            self.active[key] = _MedusaSequence(run, n_done, resumed_at=n_done)
        updates = {}
        for key, seq in list(self.active.items()):
            updates[key] = seq.advance()
            if seq.run.done:
                del self.active[key]
        return updates


@dataclass
class _MedusaSequence:
    """A :class:`MedusaRun` and what the service has had of it: ``delivered`` tokens (a
    resumed request starts with those it delivered before, ``resumed_at``) and the steps
    before ``reported``."""

    run: MedusaRun
    delivered: int
    resumed_at: int = 0
    reported: int = 0

    def advance(self) -> StepUpdate:
        """Step until there is a token the service has not had (the first turn has one
        already: the prompt's forward emits it; a resumed request replays its delivered
        tokens first), and report the new steps; steps whose tokens were all delivered
        before a resume are not reported again, so no statistic is counted twice."""
        run = self.run
        while not run.done and len(run.out) <= self.delivered:
            medusa_step(run)
        steps = run.gen.steps
        i = self.reported
        emitted = sum(len(step.emitted) for step in steps[:i])
        while i < len(steps) and emitted + len(steps[i].emitted) <= self.resumed_at:
            emitted += len(steps[i].emitted)
            i += 1
        head_calls = sum(1 for j in range(i, len(steps)) if j > 0)  # none before the first
        update = _update(steps[i:], np.asarray(run.out[self.delivered:], dtype=np.int64),
                         run.done, 0, head_calls, 0, run.rng)
        self.reported, self.delivered = len(steps), len(run.out)
        return update


class EngineFactory:
    """The models of one server and the engines over them."""

    def __init__(self, tokenizer, target, draft, ngram_draft, heads, *,
                 early_exit=None, eagle=None,
                 breaker: Callable[[], CircuitBreaker] | None = None,
                 inject_fault: Callable[[int], None] | None = None,
                 spec_max_batch: int | None = None, verifier: str = "inprocess",
                 verify_timeout: float | None = None) -> None:
        self.tokenizer, self.target, self.draft = tokenizer, target, draft
        # a batched engine decodes plainly while more sequences than this are active
        self.spec_max_batch = spec_max_batch
        self.batch_gains: dict[int, float] | None = None  # what an automatic choice rests on
        self.ngram_draft, self.heads = ngram_draft, heads
        self.early_exit = early_exit  # a draft model, or None: method "early-exit" is refused
        self.eagle = eagle  # the EAGLE drafter, or None: method "eagle" is refused
        self.max_len = int(target.config.max_len)
        self.n_heads = int(heads.n_heads)
        self.new_breaker = breaker or (lambda: CircuitBreaker(3, cooldown_s=5.0))
        self.inject_fault = inject_fault
        # where the batched engines' target forward runs: "inprocess", or "process" (one
        # worker process shared by the engines, started with the first engine; a crash or
        # a step over verify_timeout seconds there costs a plain step, see batch_boundary)
        if verifier not in VERIFIERS:
            raise ValueError(f"verifier must be one of {VERIFIERS}, got {verifier!r}")
        self.verifier_kind, self.verify_timeout = verifier, verify_timeout
        self._worker: ProcessVerifier | None = None

    @property
    def methods(self) -> tuple[str, ...]:
        """The request methods this server can run: every one of the API's, less
        ``early-exit`` and ``eagle`` when it was given no such drafter, and less ``eagle``
        when the target's forward runs in a worker process (the drafter reads the target's
        features, which would then be computed twice)."""
        missing = {"early-exit": self.early_exit is None,
                   "eagle": self.eagle is None or self.verifier_kind == "process"}
        return tuple(m for m in METHODS if not missing.get(m, False))

    @property
    def forward(self) -> str:
        """The forward every engine runs: the GPTs' backend, ``"numpy"`` or ``"numba"``
        (the batched engines call it through :func:`specdec_lite.models.batch_kv.forward_batch`,
        Medusa directly)."""
        return getattr(self.target, "backend", "numpy")

    @classmethod
    def shipped(cls, backend: str = "auto", *, spec_max_batch: int | str | None = None,
                max_batch: int = 16, **options) -> EngineFactory:
        """The shipped GPT target, its distilled draft, its EAGLE drafter, its early-exit
        draft (the default depth), Medusa heads and the corpus 3-gram, on ``backend``
        (``"auto"``: the compiled forward where the ``fast`` extra is installed, see
        :func:`specdec_lite.pretrained.resolve_backend`). ``spec_max_batch="auto"``
        measures it for engines of up to ``max_batch`` sequences
        (:func:`specdec_lite.engine.load.measure_spec_max_batch`, with the draft GPT at
        the API's default k on a held-out prompt) and keeps the gains it found in
        ``batch_gains``; every speculative method then uses that size."""
        from ..engine.load import measure_spec_max_batch
        from ..models.corpus import fit_ngrams, load_text
        from ..pretrained import load_eagle, load_early_exit, load_pretrained, resolve_backend

        start = time.perf_counter()
        backend = resolve_backend(backend)
        shipped = load_pretrained(backend=backend)
        _, _, ngram_draft = fit_ngrams()
        gains = None
        if spec_max_batch == "auto":
            prompt = shipped.tokenizer.encode(load_text("heldout")[:AUTO_PROMPT_CHARS])
            spec_max_batch, gains = measure_spec_max_batch(
                shipped.target, shipped.draft, prompt, k=DEFAULT_K, max_batch=max_batch)
        factory = cls(shipped.tokenizer, shipped.target, shipped.draft, ngram_draft,
                      shipped.heads, early_exit=load_early_exit(backend=backend),
                      eagle=load_eagle(shipped.target), spec_max_batch=spec_max_batch,
                      **options)
        factory.batch_gains = gains
        if backend == "numba":  # Medusa's compiled verification: compiled (or read from
            # numba's disk cache) now, not inside the first request
            medusa_generate(shipped.target, shipped.heads, shipped.tokenizer.encode("a"),
                            max_new_tokens=2)
        factory.load_s = time.perf_counter() - start
        return factory

    def make_engine(self, method: str, k: int, temperature: float, top_p: float | None,
                    max_batch: int):
        if method == "medusa":
            return MedusaStepEngine(self.target, self.heads, k, max_batch)
        if method not in self.methods:
            raise ValueError(f"method {method!r} is not one this server runs: "
                             f"{list(self.methods)}")
        draft = {"plain": None, "draft": self.draft, "ngram": self.ngram_draft,
                 "lookup": PromptLookup(), "eagle": self.eagle,
                 "early-exit": self.early_exit}[method]
        engine = BatchEngine(self.target, draft, k=k if draft is not None else 0,
                             temperature=temperature, top_p=top_p, max_batch=max_batch,
                             spec_max_batch=self.spec_max_batch, fall_back=True,
                             breaker=self.new_breaker(), inject_fault=self.inject_fault,
                             verifier=self.worker(), verify_timeout=self.verify_timeout,
                             name=f"{method}-{k}")
        return BatchStepEngine(engine)

    def worker(self) -> ProcessVerifier | None:
        """The worker process the batched engines' target forward runs in (started on
        first use, on the engines' backend), or None when it runs in this process."""
        if self.verifier_kind == "process" and self._worker is None:
            self._worker = ProcessVerifier(partial(shipped_target, self.forward),
                                           step=rows_step)
        return self._worker

    @property
    def verifier(self) -> dict:
        """Where the target forward runs, for ``/health``: the kind, and for a worker
        process its pid and how often it was restarted."""
        out = {"kind": self.verifier_kind}
        if self._worker is not None:
            out.update(pid=self._worker.pid, restarts=self._worker.restarts)
        return out

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
