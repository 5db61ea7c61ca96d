"""A speculative decode loop that survives its verifier: fallbacks and a circuit breaker.

:func:`resilient_generate` is :func:`specdec_lite.engine.decode.speculative_generate` with the
verification behind a boundary (:mod:`specdec_lite.engine.faults`). When a verification raises,
passes its time budget, or its worker dies, that step falls back to plain target decoding:
one token from the target's own warped distribution after the prefix
(:func:`fallback_token`). After ``failures`` faults in a row a
:class:`~specdec_lite.engine.breaker.CircuitBreaker` stops drafting for a cool-down, then lets one
step try again.

Why a fallback keeps the output law exact. Speculative sampling is exact step by step:
given the prefix s, a step emits tokens whose law is the target's, p(· | s), then
p(· | s, y_1), and so on for as long as the step lasts (Leviathan et al. 2023, Theorem 1).
A plain step emits one token y ~ p(· | s): a step of length one with the same property.
The law of the whole output is the product of these conditionals whichever kind each
step is, provided the choice of kind does not look at what the step draws. A fault makes
that choice: everything the failed step drew (its drafts, its acceptance coins) is thrown
away, the engine's generator keeps the state it had before the verifier was called (the
verifier draws from a copy, see :mod:`specdec_lite.engine.faults`), and the fallback draws a fresh
y ~ p(· | s). Then P(y | s) = P(no fault)·p(y | s) + P(fault)·p(y | s) = p(y | s).

The proviso is real: given the prefix, whether a step fails must not depend on the step's
own draws. Crashes, kills, hangs and load make faults of that kind. A verifier that fails
*because of* particular draft tokens does not: the steps that survive are then a biased
selection, and ``tests/unit/test_faults.py`` shows the chi-square test catching it. For the same
reason a time budget must sit well above the normal verification time, so that it catches
hangs and not the slower half of ordinary steps. At ``temperature=0`` the fallback is the
target's argmax, so greedy output is identical to a run without faults.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..checks import check_positive
from ..drafting.draft_length import as_draft_length
from ..models.ngram import model_rows
from ..rules.distributions import Sampling, sample, truncate
from ..rules.verify import Verification
from .breaker import CircuitBreaker
from .decode import ask_proposer, check_speculative, decode_loop
from .faults import (
    InProcessVerifier,
    VerifyRequest,
    fault_cause,
    generator_state,
)
from .telemetry import NULL_SINK, Sink, StepEvent, Summary
from .trace import Generation, Step, cut_at_eos


@dataclass
class ResilientGeneration(Generation):
    """A :class:`~specdec_lite.engine.decode.Generation` with its faults.

    ``causes`` has one entry per step: None for a speculative step, else why it was
    decoded plainly (:data:`specdec_lite.engine.faults.CAUSES`); a plain step's :class:`Step` is
    ``Step((), 0, (token,), "sample")``, as in :func:`specdec_lite.engine.decode.generate`.
    ``n_target_calls`` counts one call per step (the verification that succeeded or the
    fallback); the calls of failed verifications are in ``fallbacks`` instead.
    ``restarts`` and ``breaker_trips`` are the verifier's restarts and the breaker's
    openings during this run.
    """

    causes: list[str | None] = field(default_factory=list)
    restarts: int = 0
    breaker_trips: int = 0

    @property
    def fallbacks(self) -> dict[str, int]:
        """Plain steps by cause (only the causes that happened)."""
        return dict(Counter(c for c in self.causes if c is not None))

    @property
    def n_fallbacks(self) -> int:
        return sum(c is not None for c in self.causes)


def fallback_token(target: object, seq: np.ndarray, temperature: float, top_k: int | None,
                   top_p: float | None, rng: np.random.Generator) -> int:
    """Plain decoding's step: one token from the target's warped row after ``seq`` [n]
    (its argmax at ``temperature=0``), drawn with ``rng``."""
    p = truncate(model_rows(target, seq, 1, "target", temperature)[0], top_k, top_p)  # [V]
    return int(p.argmax()) if temperature == 0 else sample(p, rng)


def check_reply(result: object, drafted: np.ndarray, vocab: int) -> Verification:
    """``result`` if it is a verification of ``drafted`` [k] that could be right: 1 to
    k + 1 integer ids in [0, V) whose first ``n_accepted`` are the drafts; else
    ``ValueError`` (a verifier that answers nonsense is faulty, like one that raises)."""
    if not isinstance(result, Verification):
        raise ValueError(f"the verifier returned {type(result).__name__}, not a Verification")
    tokens, n = np.asarray(result.tokens), result.n_accepted
    k = len(drafted)
    if (tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer)
            or not 0 <= n <= k or len(tokens) != n + 1
            or tokens.min() < 0 or tokens.max() >= vocab
            or not np.array_equal(tokens[:n], drafted[:n])):
        raise ValueError(f"the verifier returned an impossible verification of {k} drafts: "
                         f"tokens {tokens.tolist()}, n_accepted {n}")
    return result


def resilient_generate(
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
    top_k: int | None = None,
    top_p: float | None = None,
    verifier: Callable | None = None,
    time_budget_s: float | None = None,
    breaker: CircuitBreaker | None = None,
    sink: Sink | None = None,
    request_id: str | None = None,
    on_step: Callable[[ResilientGeneration, np.random.Generator], None] | None = None,
    **rule_params: float,
) -> ResilientGeneration:
    """Speculative decoding whose verification may fail; see the module docstring.

    The arguments up to ``top_p`` are :func:`specdec_lite.engine.decode.speculative_generate`'s,
    and a run that meets no fault returns the same tokens (for the same ``seed``). Then:

    * ``verifier``: ``verifier(request, timeout) -> VerifyReply``
      (:mod:`specdec_lite.engine.faults`); default an
      :class:`~specdec_lite.engine.faults.InProcessVerifier`
      of ``target``, closed at the end. The loop's own ``target`` serves the fallbacks.
    * ``time_budget_s``: the most seconds one verification may take (None: no limit).
    * ``breaker``: a :class:`~specdec_lite.engine.breaker.CircuitBreaker` (default: 3 failures,
      8 steps of cool-down); pass one breaker to many runs to share its memory.
    * ``sink``: where metrics and logs go (:mod:`specdec_lite.engine.telemetry`); ``request_id``
      names the run there (default a random hex id).
    * ``on_step(gen, rng)``: called after every step with the generation so far and the
      engine's generator (the journal commits here).

    Drafting sits inside the boundary too: a draft model that raises makes a fault like a
    failed verification (its calls before the error are not counted in ``n_draft_calls``).
    Only the fallback's own target call can end the run with an exception.
    """
    args = check_speculative(target, draft, prompt, k, max_new_tokens, temperature, top_k,
                             top_p, eos_id, rule, rule_params, seed)
    if time_budget_s is not None:
        time_budget_s = check_positive(time_budget_s, "time_budget_s")
    if verifier is not None and not callable(verifier):
        raise TypeError(f"verifier must be callable, got {type(verifier).__name__}")
    if breaker is not None and not isinstance(breaker, CircuitBreaker):
        raise TypeError(f"breaker must be a CircuitBreaker, got {type(breaker).__name__}")
    if request_id is not None and not isinstance(request_id, str):
        raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")
    own_verifier = verifier is None
    step = BoundedStep(InProcessVerifier(target) if own_verifier else verifier, time_budget_s,
                       CircuitBreaker() if breaker is None else breaker,
                       NULL_SINK if sink is None else sink,
                       uuid.uuid4().hex if request_id is None else request_id)
    restarts0, trips0 = getattr(step.verifier, "restarts", 0), step.breaker.trips
    s = args.sampling
    step.sink.start(step.request_id, len(args.prompt), {
        "k": k, "max_new_tokens": args.max_new_tokens, "temperature": s.temperature,
        "rule": rule, "eos_id": args.eos_id, "top_k": s.top_k, "top_p": s.top_p})
    gen = ResilientGeneration(tokens=np.zeros(0, dtype=np.int64), prompt=args.prompt)
    try:
        decode_loop(target, args.proposer, args.prompt, as_draft_length(k), s, rule, args.params,
                    args.rng, args.eos_id, args.max_new_tokens, step=step, gen=gen,
                    after_step=on_step)
    except BaseException as exc:
        step.sink.fail(step.request_id, exc)
        raise
    finally:
        if own_verifier:
            step.verifier.close()
    gen.restarts = getattr(step.verifier, "restarts", 0) - restarts0
    gen.breaker_trips = step.breaker.trips - trips0
    step.sink.finish(Summary(step.request_id, len(gen.tokens), len(gen.steps),
                             gen.n_target_calls, gen.n_draft_calls, gen.alpha, gen.tau,
                             gen.fallbacks, gen.wall_time_s))
    return gen


@dataclass
class BoundedStep:
    """One step of :func:`resilient_generate`, with the verification behind ``verifier``
    (:mod:`specdec_lite.engine.faults`): called as
    :func:`specdec_lite.engine.decode.speculative_step` is. Drafting sits inside the boundary
    too. A fault, or an open ``breaker``, makes the step a plain one (:func:`fallback_token`);
    its cause is recorded in ``gen.causes``."""

    verifier: Callable
    time_budget_s: float | None
    breaker: CircuitBreaker
    sink: Sink
    request_id: str

    def __call__(self, target: object, proposer: object, seq: np.ndarray, k: int,
                 sampling: Sampling, rule: str, params: dict, rng: np.random.Generator,
                 eos_id: int | None, gen: ResilientGeneration,
                 name: str = "target") -> tuple[np.ndarray, bool]:
        step_start = time.perf_counter()
        vocab = target.vocab_size
        n_draft_calls, cause = 0, "circuit_open"
        if self.breaker.allow():
            try:
                drafted, q, n_calls = ask_proposer(proposer, seq, k, sampling, rng, vocab)
                n_draft_calls = n_calls
                request = VerifyRequest(np.concatenate([seq, drafted]), q,
                                        sampling.temperature, sampling.top_k, sampling.top_p,
                                        rule, params, generator_state(rng))
                reply = self.verifier(request, self.time_budget_s)
                result = check_reply(reply.verification, drafted, vocab)
                rng.bit_generator.state = reply.rng_state  # last: a bad state changes nothing
            except Exception as exc:  # noqa: BLE001 - every failure is a fault to survive
                cause = fault_cause(exc)
                self.breaker.record_failure()
                self.sink.fault(self.request_id, cause, f"{type(exc).__name__}: {exc}")
            else:
                cause = None
                self.breaker.record_success()
                emitted, hit_eos = cut_at_eos(result.tokens, eos_id)
                step = Step(tuple(drafted.tolist()), result.n_accepted,
                            tuple(emitted.tolist()), result.extra)
        if cause is not None:
            token = fallback_token(target, seq, sampling.temperature, sampling.top_k,
                                   sampling.top_p, rng)
            emitted, hit_eos = np.array([token], dtype=np.int64), token == eos_id
            step = Step((), 0, (token,), "sample")
        gen.n_target_calls += 1
        gen.n_draft_calls += n_draft_calls
        gen.steps.append(step)
        gen.causes.append(cause)
        self.sink.step(StepEvent(self.request_id, len(gen.steps) - 1, len(step.proposed),
                                 step.n_accepted, len(emitted), 1, n_draft_calls,
                                 time.perf_counter() - step_start, cause))
        self.sink.batch(1)
        return emitted, hit_eos
