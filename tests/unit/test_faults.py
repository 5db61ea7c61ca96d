"""Fault injection: verifiers that raise, hang or die, and the loop that survives them.

Every test is bounded (SIGALRM). The GPT tests check that greedy output is identical to a
fault-free run; the small-model tests check with chi-square that sampled output keeps the
target's law, and that the test would catch a wrong fallback.
"""

import os
import signal
import threading
import time

import numpy as np
import pytest
from support import (
    HangingModel,
    alarm_after,
    broken_factory,
    hanging_small_target,
    small_target,
)

from specdec_lite.engine import resilient
from specdec_lite.engine.breaker import CircuitBreaker
from specdec_lite.engine.decode import generate, speculative_generate
from specdec_lite.engine.faults import (
    InProcessVerifier,
    ProcessVerifier,
    VerifierCrashed,
    VerifierTimeout,
    VerifierUnavailable,
    generator_from_state,
    generator_state,
)
from specdec_lite.engine.resilient import resilient_generate
from specdec_lite.rules.distributions import as_generator, sample
from specdec_lite.rules.verify import Verification
from specdec_lite.teaching.exactness import chi_square, sequence_law, small_pair
from specdec_lite.teaching.example import gpt_pair

PROMPT = "    def __init__(self"


@pytest.fixture(autouse=True)
def time_limit():
    undo = alarm_after(120)
    yield
    undo()


@pytest.fixture(scope="module")
def gpt():
    tokenizer, target, draft = gpt_pair()
    return target, draft, tokenizer.encode(PROMPT)


class Flaky:
    """A verifier wrapper that raises instead of verifying when ``fail(call, request)``."""

    def __init__(self, inner, fail):
        self.inner, self.fail, self.calls, self.failed = inner, fail, 0, 0

    def __call__(self, request, timeout=None):
        self.calls += 1
        if self.fail(self.calls, request):
            self.failed += 1
            raise RuntimeError("injected fault")
        return self.inner(request, timeout)


def assert_nothing_lost(gen, max_new_tokens):
    """The trace accounts for every token once, in order, and the length is right."""
    emitted = [t for step in gen.steps for t in step.emitted]
    assert emitted == gen.tokens.tolist()
    assert len(gen.tokens) == max_new_tokens
    assert len(gen.causes) == len(gen.steps) == gen.n_target_calls
    for step, cause in zip(gen.steps, gen.causes, strict=True):
        if cause is not None:
            assert step.proposed == () and len(step.emitted) == 1 and step.extra == "sample"
        else:
            assert list(step.emitted[: step.n_accepted]) == list(step.proposed[: step.n_accepted])


# ---------------------------------------------------------------- without faults


@pytest.mark.parametrize("temperature", [0.0, 1.0, 0.7])
def test_fault_free_run_is_speculative_generate(gpt, temperature):
    target, draft, prompt = gpt
    want = speculative_generate(target, draft, prompt, k=4, max_new_tokens=80,
                                temperature=temperature, seed=11)
    got = resilient_generate(target, draft, prompt, k=4, max_new_tokens=80,
                             temperature=temperature, seed=11)
    assert got.tokens.tolist() == want.tokens.tolist()
    assert got.steps == want.steps
    assert (got.n_target_calls, got.n_draft_calls) == (want.n_target_calls, want.n_draft_calls)
    assert got.fallbacks == {} and got.causes == [None] * len(got.steps)


def test_generator_state_round_trip():
    rng = np.random.default_rng(5)
    rng.random(3)
    copy = generator_from_state(generator_state(rng))
    assert copy.random(4).tolist() == rng.random(4).tolist()
    with pytest.raises(ValueError, match="state"):
        generator_from_state({"bit_generator": "os"})


# ---------------------------------------------------------------- a verifier that raises


def test_raising_verifier_greedy_output_identical(gpt):
    target, draft, prompt = gpt
    want = generate(target, prompt, max_new_tokens=90, temperature=0).tokens.tolist()
    flaky = Flaky(InProcessVerifier(target), lambda call, _: call % 3 == 0)
    breaker = CircuitBreaker(failures=5)  # never 5 in a row here: no breaker steps
    got = resilient_generate(target, draft, prompt, k=4, max_new_tokens=90, temperature=0,
                             verifier=flaky, breaker=breaker)
    assert got.tokens.tolist() == want
    assert_nothing_lost(got, 90)
    assert flaky.failed > 0 and got.fallbacks == {"error": flaky.failed}
    spec_drafts = sum(len(s.proposed) for s in got.steps)
    assert got.n_draft_calls == spec_drafts + 4 * flaky.failed  # failed steps drafted too


def test_always_failing_verifier_trips_the_breaker(gpt):
    target, draft, prompt = gpt
    want = generate(target, prompt, max_new_tokens=60, temperature=0).tokens.tolist()
    flaky = Flaky(InProcessVerifier(target), lambda call, _: True)
    breaker = CircuitBreaker(failures=2, cooldown_steps=5)
    got = resilient_generate(target, draft, prompt, k=3, max_new_tokens=60, temperature=0,
                             verifier=flaky, breaker=breaker)
    assert got.tokens.tolist() == want
    assert_nothing_lost(got, 60)
    # pattern: 2 failures trip it, 5 plain steps, 1 half-open trial fails, 5 plain, ...
    assert got.causes[:9] == ["error", "error"] + ["circuit_open"] * 5 + ["error", "circuit_open"]
    assert got.breaker_trips == breaker.trips == 1 + got.fallbacks["error"] - 2
    assert flaky.calls == got.fallbacks["error"]


def test_nonsense_reply_is_a_fault(gpt):
    target, draft, prompt = gpt

    class Liar:
        def __call__(self, request, timeout=None):
            k = request.k
            return resilient.faults.VerifyReply(  # claims k accepted but changes a draft
                Verification(np.zeros(k + 1, dtype=np.int64), k, "bonus"), request.rng_state)

    got = resilient_generate(target, draft, prompt, k=4, max_new_tokens=40, temperature=0,
                             verifier=Liar(), breaker=CircuitBreaker(failures=1000))
    assert got.tokens.tolist() == generate(target, prompt, max_new_tokens=40,
                                           temperature=0).tokens.tolist()
    assert set(got.fallbacks) == {"error"}


def test_bad_generator_state_in_a_reply_is_a_fault():
    target, draft, prompt = small_pair()
    inner = InProcessVerifier(target)

    def wrong_state(request, timeout=None):
        reply = inner(request, timeout)
        return resilient.faults.VerifyReply(reply.verification, {"bit_generator": "MT19937"})

    want = speculative_generate(target, draft, prompt, k=2, max_new_tokens=8, temperature=0)
    got = resilient_generate(target, draft, prompt, k=2, max_new_tokens=8, temperature=0,
                             verifier=wrong_state, breaker=CircuitBreaker(failures=100))
    assert got.tokens.tolist() == want.tokens.tolist()
    assert got.fallbacks == {"error": len(got.steps)}


def test_a_draft_that_raises_is_a_fault(gpt):
    target, draft, prompt = gpt

    class BrokenDraft:
        vocab_size = draft.vocab_size

        def __init__(self):
            self.calls = 0

        def probs(self, tokens):
            self.calls += 1
            if self.calls % 5 == 0:
                raise FloatingPointError("draft blew up")
            return draft.probs(tokens)

    got = resilient_generate(target, BrokenDraft(), prompt, k=3, max_new_tokens=50,
                             temperature=0, breaker=CircuitBreaker(failures=100))
    assert got.tokens.tolist() == generate(target, prompt, max_new_tokens=50,
                                           temperature=0).tokens.tolist()
    assert_nothing_lost(got, 50)
    assert got.fallbacks["error"] > 0


# ---------------------------------------------------------------- a verifier that hangs


def test_hanging_verifier_times_out_in_process(gpt):
    target, draft, prompt = gpt
    release = threading.Event()
    _, slow_target, _ = gpt_pair()  # the verifier's own copy, which hangs on calls 3 and 6
    verifier = InProcessVerifier(HangingModel(slow_target, hang_on={3, 6}, release=release))
    try:
        start = time.perf_counter()
        got = resilient_generate(target, draft, prompt, k=4, max_new_tokens=60, temperature=0,
                                 verifier=verifier, time_budget_s=0.3)
        elapsed = time.perf_counter() - start
    finally:
        release.set()  # let the abandoned helper threads finish
        verifier.close()
    assert got.fallbacks == {"timeout": 2}
    assert got.tokens.tolist() == generate(target, prompt, max_new_tokens=60,
                                           temperature=0).tokens.tolist()
    assert_nothing_lost(got, 60)
    assert elapsed < 0.6 + 5  # two budgets, plus the work


@pytest.mark.slow
def test_hanging_worker_is_killed_and_restarted():
    target, _, _ = small_pair()
    with ProcessVerifier(hanging_small_target) as verifier:
        first = verifier.pid
        request = _small_request(target)
        start = time.perf_counter()
        with pytest.raises(VerifierTimeout):
            verifier(request, 0.5)
        assert 0.5 <= time.perf_counter() - start < 10
        assert verifier.restarts == 1 and verifier.pid != first
        with pytest.raises(VerifierUnavailable):  # the new worker is still starting
            verifier(request, 0.5)
        verifier.wait_ready(60)
        with pytest.raises(VerifierTimeout):  # each worker hangs on its first call
            verifier(request, 0.3)


def test_worker_killed_during_a_call_is_seen_at_once():
    target, _, _ = small_pair()
    with ProcessVerifier(hanging_small_target) as verifier:
        pid = verifier.pid
        threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
        start = time.perf_counter()
        with pytest.raises(VerifierCrashed):
            verifier(_small_request(target), 30)  # a long budget: death must not wait for it
        assert time.perf_counter() - start < 10  # well under the 30 s budget
        assert verifier.restarts == 1


def _small_request(target):
    from specdec_lite.engine.faults import VerifyRequest
    from specdec_lite.rules.verify import check_rule

    q = np.array([[0.3, 0.3, 0.4]])  # [1, V]: the draft's row after token 0
    return VerifyRequest(np.array([0, 2]), q, 1.0, None, None, "exact", check_rule("exact", {}),
                         generator_state(np.random.default_rng(0)))


# ---------------------------------------------------------------- a worker that is killed


class KillOnCall:
    """Delegates to a ProcessVerifier, SIGKILLing its worker just before call ``n``; the
    call after a restart first waits for the new worker, so that it serves again."""

    def __init__(self, verifier, kill_on):
        self.verifier, self.kill_on, self.calls = verifier, set(kill_on), 0
        self.restarts_seen = 0

    def __call__(self, request, timeout=None):
        self.calls += 1
        if self.verifier.restarts != self.restarts_seen:
            self.restarts_seen = self.verifier.restarts
            self.verifier.wait_ready(60)
        if self.calls in self.kill_on:
            os.kill(self.verifier.pid, signal.SIGKILL)
        return self.verifier(request, timeout)

    @property
    def restarts(self):
        return self.verifier.restarts


@pytest.mark.slow
def test_killed_worker_greedy_output_identical(gpt):
    target, draft, prompt = gpt
    with ProcessVerifier(gpt_pair, item=1) as worker:
        verifier = KillOnCall(worker, kill_on={4, 9})
        got = resilient_generate(target, draft, prompt, k=4, max_new_tokens=100, temperature=0,
                                 verifier=verifier, time_budget_s=30)
    assert got.tokens.tolist() == generate(target, prompt, max_new_tokens=100,
                                           temperature=0).tokens.tolist()
    assert_nothing_lost(got, 100)
    assert got.restarts == 2 and got.fallbacks == {"crash": 2}
    after_kill = got.causes[got.causes.index("crash") + 1:]
    assert None in after_kill  # the restarted worker verified steps again


def test_process_verifier_reports_a_broken_factory():
    with pytest.raises(RuntimeError, match="weights missing"):
        ProcessVerifier(broken_factory)
    with pytest.raises(TypeError, match="factory"):
        ProcessVerifier(42)


# ---------------------------------------------------------------- the sampled law


N_RUNS, LENGTH, K = 3000, 4, 3


def sampled_under_faults(fail, seed, verifier=None, n=N_RUNS):
    """``n`` continuations of the small pair's prompt through a verifier failing when
    ``fail(call, request)``, with a breaker that opens and closes along the way."""
    target, draft, prompt = small_pair()
    rng = as_generator(seed)
    inner = InProcessVerifier(target) if verifier is None else verifier
    flaky = Flaky(inner, fail)
    breaker = CircuitBreaker(failures=2, cooldown_steps=2)
    samples, causes = [], []
    for _ in range(n):
        gen = resilient_generate(target, draft, prompt, k=K, max_new_tokens=LENGTH, seed=rng,
                                 verifier=flaky, breaker=breaker)
        assert_nothing_lost(gen, LENGTH)
        samples.append(tuple(gen.tokens.tolist()))
        causes += gen.causes
    return samples, causes, sequence_law(target, prompt, LENGTH)


def random_faults(rate, seed):
    """Faults drawn independently of the step (their own generator)."""
    coin = np.random.default_rng(seed)
    return lambda call, request: coin.random() < rate


@pytest.mark.slow
def test_sampled_law_kept_under_random_faults():
    samples, causes, law = sampled_under_faults(random_faults(0.3, 1), seed=2)
    assert {"error", "circuit_open", None} <= set(causes)
    result = chi_square(samples, law)
    assert result.passed(1e-3), result


@pytest.mark.slow
def test_wrong_fallback_is_caught(monkeypatch):
    """Falling back to the draft's token (here: a draw from the draft's row, its law)
    instead of the target's must fail the same test."""
    target, draft, _ = small_pair()

    def draft_fallback(target_, seq, temperature, top_k, top_p, rng):
        return sample(draft.probs(seq)[-1], rng)

    monkeypatch.setattr(resilient, "fallback_token", draft_fallback)
    samples, _, law = sampled_under_faults(random_faults(0.3, 1), seed=2)
    result = chi_square(samples, law)
    assert not result.passed(1e-3), result


@pytest.mark.slow
def test_faults_that_depend_on_the_drafts_bias_the_law():
    """The docstring's proviso: a verifier failing *because* the draft proposed token 2
    first selects the surviving steps, and the law is off."""
    samples, _, law = sampled_under_faults(
        lambda call, request: request.context[-request.k] == 2 if request.k else False, seed=3)
    assert not chi_square(samples, law).passed(1e-3)


@pytest.mark.slow
def test_sampled_law_kept_with_a_killed_worker():
    """Through a real worker process, SIGKILLed every 1,500 calls (2 or 3 times in all)."""
    kill_every = 1500
    with ProcessVerifier(small_target) as worker:
        calls = {"n": 0}

        def fail(call, request):  # never fails by itself; kills the worker now and then
            calls["n"] += 1
            if calls["n"] % kill_every == 0:
                os.kill(worker.pid, signal.SIGKILL)
            return False

        samples, causes, law = sampled_under_faults(fail, seed=4, verifier=worker, n=2000)
    assert worker.restarts >= 2 and "crash" in causes
    result = chi_square(samples, law)
    assert result.passed(1e-3), result


# ---------------------------------------------------------------- the circuit breaker


def test_breaker_counts_steps_then_half_opens():
    breaker = CircuitBreaker(failures=2, cooldown_steps=3)
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_success()  # a success resets the count
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert breaker.state == "open" and breaker.trips == 1
    assert [breaker.allow() for _ in range(4)] == [False, False, False, True]
    assert breaker.state == "half_open"
    assert not breaker.allow()  # one trial at a time
    breaker.record_failure()  # the trial failed: open again at once
    assert breaker.state == "open" and breaker.trips == 2
    assert [breaker.allow() for _ in range(4)] == [False, False, False, True]
    breaker.record_success()
    assert breaker.state == "closed" and breaker.allow() and breaker.allow()


def test_breaker_cooldown_in_seconds_with_an_injected_clock():
    now = [100.0]
    breaker = CircuitBreaker(failures=1, cooldown_s=10.0, clock=lambda: now[0])
    breaker.record_failure()
    assert not breaker.allow()
    now[0] = 109.9
    assert not breaker.allow()
    now[0] = 110.0
    assert breaker.allow() and breaker.state == "half_open"


@pytest.mark.parametrize("kwargs, error, name", [
    ({"failures": 0}, ValueError, "failures"),
    ({"failures": 1.5}, TypeError, "failures"),
    ({"cooldown_steps": 0}, ValueError, "cooldown_steps"),
    ({"cooldown_s": -1.0}, ValueError, "cooldown_s"),
    ({"cooldown_steps": None}, ValueError, "cooldown"),
])
def test_breaker_rejects_bad_settings(kwargs, error, name):
    with pytest.raises(error, match=name):
        CircuitBreaker(**kwargs)


@pytest.mark.parametrize("kwargs, error, name", [
    ({"time_budget_s": 0}, ValueError, "time_budget_s"),
    ({"time_budget_s": "1"}, TypeError, "time_budget_s"),
    ({"verifier": 3}, TypeError, "verifier"),
    ({"breaker": object()}, TypeError, "breaker"),
    ({"request_id": 7}, TypeError, "request_id"),
    ({"k": 0}, ValueError, "k"),
])
def test_resilient_generate_rejects_bad_input(kwargs, error, name):
    target, draft, prompt = small_pair()
    args = {"k": 2, "max_new_tokens": 3, **kwargs}
    with pytest.raises(error, match=name):
        resilient_generate(target, draft, prompt, **args)
