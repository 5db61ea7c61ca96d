"""Guards for the coming refactor of the decode loops: six properties no other test checks.

A review injected hand-made bugs into the library; these six survived the rest of the
suite, so each test below fails when its bug comes back:

1. ``BatchEngine``'s fallback restores every sequence's Generator before re-verifying,
   so a verification that fails *after* drawing changes nothing a failure *before*
   drawing would not.
2. ``resilient_generate``'s fallback samples the target after top-k / top-p, never the
   uncut target.
3. A service job past its deadline leaves its engine: not stepped again, slot freed.
4. ``BatchEngine.cancel`` of an active sequence frees its slot at once.
5. The service scheduler never runs more than ``max_batch`` jobs in an engine.
6. Medusa's typical acceptance honours the temperature: at T = 0.002 it is greedy
   decoding, token for token.

Everything runs on tiny Markov models or the shipped GPT pair, in a few seconds.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from specdec_lite.engine.batch import BatchEngine
from specdec_lite.engine.breaker import CircuitBreaker
from specdec_lite.engine.decode import generate
from specdec_lite.engine.faults import InProcessVerifier
from specdec_lite.engine.medusa_decode import medusa_generate
from specdec_lite.engine.resilient import resilient_generate
from specdec_lite.models.ngram import MarkovModel
from specdec_lite.pretrained import load_pretrained
from specdec_lite.service.engines import BatchStepEngine
from specdec_lite.service.scheduler import Job, Scheduler, Settings

TIMEOUT = 30.0  # seconds any one scheduler job may take
V = 10  # vocabulary of the Markov pairs


def markov(seed: int, v: int = V) -> MarkovModel:
    """A first-order model with flat-ish random rows (top-k cuts away much of the mass)."""
    return MarkovModel(np.random.default_rng(seed).dirichlet(np.ones(v), size=v))


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


# ---------------------------------------------------------------- 1. batch fallback


class FailsAfterDrawing(BatchEngine):
    """A ``BatchEngine`` whose verification, on the steps in ``fail_steps``, runs in full
    (every sequence draws its acceptance coins from its Generator) and then raises, as a
    verifier that dies or times out after its work would. ``advanced`` counts the
    Generators the failed verifications moved."""

    def __init__(self, *args, fail_steps: set[int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fail_steps, self.advanced = fail_steps, 0

    def verify_batch(self, proposals):
        if self.n_steps in self.fail_steps and any(len(p.drafted) for p in proposals):
            before = [p.state.rng.bit_generator.state for p in proposals]
            super().verify_batch(proposals)
            self.advanced += sum(p.state.rng.bit_generator.state != state
                                 for p, state in zip(proposals, before, strict=True))
            raise RuntimeError("verifier failed after drawing (injected)")
        return super().verify_batch(proposals)


def test_batch_fallback_restores_each_sequence_generator(shipped) -> None:
    """A verification failing after the sequences drew gives the tokens of one failing
    before any draw: the fallback restores every Generator first.

    (A run with no fault at all is no reference at T = 1: its failed steps would have
    emitted the verified tokens, not one plain token.)"""
    fail_steps = {2, 5, 6}

    def fail_early(step: int) -> None:
        if step in fail_steps:
            raise RuntimeError("verifier failed before drawing (injected)")

    prompts = [shipped.tokenizer.encode(text) for text in
               ("    def __init__(self", "import os\n", "for i in range(")]
    late = FailsAfterDrawing(shipped.target, shipped.draft, k=4, temperature=1.0,
                             max_batch=4, fall_back=True, fail_steps=fail_steps)
    early = BatchEngine(shipped.target, shipped.draft, k=4, temperature=1.0, max_batch=4,
                        fall_back=True, inject_fault=fail_early)
    for engine in (late, early):
        for i, prompt in enumerate(prompts):
            engine.add(prompt, max_new_tokens=30, seed=100 + i, request_id=i)
    got, want = late.run(), early.run()
    # the faults really happened, and the late ones really moved the Generators
    assert late.fallback_causes == early.fallback_causes == {"RuntimeError": len(fail_steps)}
    assert late.advanced == len(prompts) * len(fail_steps)
    for i in range(len(prompts)):
        assert got[i].tokens.tolist() == want[i].tokens.tolist(), f"sequence {i}"
        assert got[i].steps == want[i].steps
        assert sum(not step.proposed for step in got[i].steps) >= len(fail_steps)


# ---------------------------------------------------------------- 2. resilient fallback


class FailsEveryOther:
    """A verifier that raises on every second call (never three in a row, so the default
    breaker stays closed and the fallbacks are all ``"error"`` ones)."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    def __call__(self, request, timeout=None):
        self.calls += 1
        if self.calls % 2 == 0:
            raise RuntimeError("injected fault")
        return self.inner(request, timeout)


def kept_by_hand(row: np.ndarray, top_k: int | None, top_p: float | None) -> set[int]:
    """The tokens top-k then top-p keep of a row, computed here, not with the library:
    the k most likely, then the most likely ones until their mass reaches top_p."""
    order = [int(t) for t in np.argsort(-row, kind="stable")]
    if top_k is not None:
        order = order[:top_k]
    if top_p is None:
        return set(order)
    kept_mass = row[order].cumsum() / row[order].sum()
    n = int(np.searchsorted(kept_mass, top_p - 1e-12)) + 1  # first prefix reaching top_p
    return set(order[:n])


@pytest.mark.parametrize(("top_k", "top_p"), [(3, None), (None, 0.5), (4, 0.7)])
def test_resilient_fallback_samples_the_cut_target(top_k, top_p) -> None:
    """Every token ``resilient_generate`` emits, fallback steps included, lies in the
    target's top-k / top-p set after its prefix."""
    target, draft = markov(1), markov(2)
    n_fallbacks = 0
    for seed in range(4):
        verifier = FailsEveryOther(InProcessVerifier(target))
        gen = resilient_generate(target, draft, [0], k=3, max_new_tokens=40,
                                 temperature=1.0, seed=seed, top_k=top_k, top_p=top_p,
                                 verifier=verifier, breaker=CircuitBreaker(3))
        assert len(gen.tokens) == 40
        seq = [0, *gen.tokens.tolist()]
        for i, token in enumerate(gen.tokens.tolist()):
            allowed = kept_by_hand(target.transition[seq[i]], top_k, top_p)
            assert token in allowed, (f"seed {seed}: token {i} = {token} outside the cut "
                                      f"target {sorted(allowed)}")
        assert set(gen.causes) == {None, "error"}
        n_fallbacks += gen.n_fallbacks
    assert n_fallbacks >= 30  # enough fallback draws to see an uncut target


# ---------------------------------------------------------------- 3.-5. the service


class RecordingEngine:
    """A :class:`~specdec_lite.service.engines.BatchStepEngine` that records, at each
    step, how many jobs it holds, how many the scheduler runs, and whom it stepped.
    ``on_step(n)`` runs before step n (1-based), in the engine thread."""

    def __init__(self, inner: BatchStepEngine, scheduler_box: list, on_step=None) -> None:
        self.inner, self.scheduler_box, self.on_step = inner, scheduler_box, on_step
        self.held, self.running, self.stepped, self.removed = [], [], [], []

    def __len__(self) -> int:
        return len(self.inner)

    def add(self, key, prompt, tokens, settings, rng_state, steps=None) -> None:
        self.inner.add(key, prompt, tokens, settings, rng_state)

    def remove(self, key) -> None:
        self.removed.append(key)
        self.inner.remove(key)

    def step(self):
        if self.on_step is not None:
            self.on_step(len(self.stepped) + 1)
        self.held.append(len(self.inner))
        self.running.append(self.scheduler_box[0].load()[1])
        updates = self.inner.step()
        self.stepped.append(set(updates))
        return updates


def scheduler_over_markov(max_batch: int, on_step=None) -> tuple[Scheduler, list]:
    """A scheduler whose engines are BatchEngines over a Markov pair, each wrapped in a
    :class:`RecordingEngine`; returns it and the list the engines land in."""
    target, draft = markov(3), markov(4)
    engines, box = [], []

    def make_engine(method, k, temperature, top_p, batch):
        inner = BatchStepEngine(BatchEngine(target, draft, k=k, temperature=temperature,
                                            top_p=top_p, max_batch=batch, fall_back=True))
        engines.append(RecordingEngine(inner, box, on_step))
        return engines[-1]

    scheduler = Scheduler(make_engine, max_batch=max_batch, max_queue=16)
    box.append(scheduler)
    return scheduler, engines


def job(name: str, max_new_tokens: int, seed: int, deadline_s: float = TIMEOUT) -> Job:
    return Job(id=name, prompt=np.array([seed % V, 1], np.int64),
               settings=Settings("draft", 3, max_new_tokens, 1.0, None, seed),
               deadline=time.monotonic() + deadline_s)


def run_jobs(scheduler: Scheduler, jobs: list[Job]) -> None:
    for j in jobs:  # all queued before the engine thread starts
        scheduler.submit(j)
    scheduler.start()
    try:
        for j in jobs:
            assert j.done.wait(TIMEOUT), f"job {j.id} did not end"
    finally:
        scheduler.stop()


def test_a_job_past_its_deadline_leaves_its_engine() -> None:
    """A running job whose deadline passes is failed, removed from its engine and never
    stepped again (observed through an engine wrapper the scheduler's factory makes)."""
    expired_at: dict[str, object] = {}
    late, other = job("late", 60, 1), job("other", 60, 2)

    def on_step(n: int) -> None:
        if n == 3:  # this turn expired nothing; late's deadline is over from now on
            late.deadline = time.monotonic() - 1.0
        if n == 4:  # this turn's expiry (which comes before its steps) retired late
            expired_at["tokens"] = list(late.tokens)

    scheduler, engines = scheduler_over_markov(max_batch=4, on_step=on_step)
    run_jobs(scheduler, [late, other])
    (engine,) = engines
    assert late.status == "failed" and late.error.startswith("deadline")
    assert other.status == "finished" and len(other.tokens) == 60
    assert engine.stepped[:3] == [{"late", "other"}] * 3
    # every step after the expiry skips it
    after = engine.stepped[3:]
    assert len(after) >= 3, "other must keep running after the expiry"
    assert all("late" not in stepped for stepped in after), "an expired job was stepped"
    assert all(held == 1 for held in engine.held[3:]), "the expired job kept its slot"
    assert late.tokens == expired_at["tokens"] and len(late.tokens) > 0
    assert engine.removed.count("late") == 1
    assert len(engine) == 0 and scheduler.load() == (0, 0)


def test_batch_engine_cancel_frees_the_slot_of_an_active_sequence() -> None:
    """Cancelling an active sequence frees its slot at once: the active count drops, a
    waiting request takes the slot at the next step, and the cancelled one stops."""
    target, draft = markov(5), markov(6)
    engine = BatchEngine(target, draft, k=3, temperature=1.0, max_batch=2)
    for name, seed in (("a", 1), ("b", 2), ("c", 3)):
        engine.add([seed], max_new_tokens=40, seed=seed, request_id=name)
    engine.step()
    assert [s.request_id for s in engine.active] == ["a", "b"]
    assert [s.request_id for s in engine.waiting] == ["c"]
    cancelled = engine.active[0]
    n_cancelled = cancelled.n_new
    assert engine.cancel("a") is True
    assert [s.request_id for s in engine.active] == ["b"] and cancelled.done
    engine.step()  # c takes a's slot
    assert sorted(s.request_id for s in engine.active) == ["b", "c"]
    assert max(engine.batch_sizes) == 2
    done = engine.run()
    assert sorted(done) == ["b", "c"]
    assert cancelled.n_new == n_cancelled and len(cancelled.gen.tokens) == n_cancelled
    # c decoded exactly as it would alone: a's slot was handed over clean
    alone = BatchEngine(target, draft, k=3, temperature=1.0, max_batch=2)
    alone.add([3], max_new_tokens=40, seed=3, request_id="c")
    assert done["c"].tokens.tolist() == alone.run()["c"].tokens.tolist()


def test_scheduler_never_runs_more_than_max_batch_jobs() -> None:
    """With more jobs queued than ``max_batch``, the scheduler runs (``load()``) and its
    engine holds exactly ``max_batch`` at most, and every job still finishes."""
    max_batch = 2
    scheduler, engines = scheduler_over_markov(max_batch)
    jobs = [job(f"j{i}", 12 + i, i) for i in range(2 * max_batch + 2)]
    run_jobs(scheduler, jobs)
    (engine,) = engines
    assert all(j.status == "finished" and len(j.tokens) == j.settings.max_new_tokens
               for j in jobs)
    assert max(engine.running) == max_batch, engine.running
    assert max(engine.held) == max_batch, engine.held
    assert max(len(stepped) for stepped in engine.stepped) == max_batch


# ---------------------------------------------------------------- 6. Medusa


@pytest.mark.parametrize("text", ["    def __init__(self", "import os\n", "for i in range("])
def test_medusa_typical_at_tiny_temperature_is_greedy(shipped, text) -> None:
    """Typical acceptance at T = 0.002 emits the greedy Medusa tokens, which are plain
    greedy decoding: acceptance and the extra token both use the tempered target."""
    target, heads = shipped.target, shipped.heads
    prompt = shipped.tokenizer.encode(text)
    want = generate(target, prompt, max_new_tokens=48, temperature=0.0).tokens.tolist()
    greedy = medusa_generate(target, heads, prompt, max_new_tokens=48, rule="greedy")
    typical = medusa_generate(target, heads, prompt, max_new_tokens=48, temperature=0.002,
                              rule="typical", seed=7)
    assert greedy.tokens.tolist() == want
    assert typical.tokens.tolist() == want
    assert typical.steps == greedy.steps  # same acceptances, step by step
    assert sum(s.n_accepted for s in typical.steps) > 0  # the heads' guesses were used
