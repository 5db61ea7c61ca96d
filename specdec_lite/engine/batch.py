"""Batched speculative decoding: B sequences per step, one target forward verifies them all.

:class:`BatchEngine` advances every active sequence by one step at a time:

1. **Admit** (continuous batching): waiting requests take free slots, up to
   ``max_batch``, and their prompts are prefilled; a sequence can join between any two
   steps, and leaves as soon as it finishes.
2. **Propose** (:meth:`BatchEngine.propose`): the draft q drafts up to k tokens for every
   sequence, one batched draft call per draft position. A proposer that is not a model
   (:class:`specdec_lite.drafting.proposers.PromptLookup`) is asked one sequence at a time.
3. **Verify** (:meth:`BatchEngine.verify_batch`): ONE target call scores all B × (k + 1)
   positions, each sequence over its own cache, positions and causal mask (ragged blocks
   padded and masked, see :mod:`specdec_lite.models.batch_kv`); then each sequence runs
   :func:`specdec_lite.rules.verify.verify_checked` with its own Generator and accepts its own
   number of tokens. The next call on each cache drops that sequence's rejected entries
   (its own rollback).
4. **Commit**: emitted tokens are appended, cut at the sequence's EOS, and a sequence
   leaves at EOS or at its ``max_new_tokens``.

Each sequence follows exactly the rule of :func:`specdec_lite.engine.decode.speculative_generate`
(p = target, q = draft, temperature then ``top_k`` then ``top_p`` on both, k shortened near
the end so exactly ``max_new_tokens`` come out) and draws its random numbers in the same
order from its **own** Generator. So a seeded sequence's tokens do not depend on which
other sequences share its batch, and equal ``speculative_generate`` with the same seed,
up to float32 rounding: a batched matrix product may round the last bit of a logit
differently from a single-sequence one, which can change an argmax tie or a sampled
token only when a uniform falls within ~1e-7 of a boundary. With models that keep no
cache (n-grams, tables) the results are identical. Without a draft (or ``k=0``) the
engine is plain batched decoding, token for token :func:`specdec_lite.engine.decode.generate`.

Every sequence gets the :class:`~specdec_lite.engine.decode.Generation` trace the
single-sequence loops give (``alpha``, ``tau``, ``n_target_calls`` ... read the same; one
batched target call counts once for each sequence in it).

Fault boundary: :meth:`BatchEngine.verify_batch` is the whole verification of a step (the
target forward and the acceptance test). It reads nothing of the engine but its
arguments, the target's batch cache and each sequence's Generator, and writes only
those, so it can be wrapped and, on failure, the step redone as plain target decoding:
``verify_batch`` on proposals with no draft tokens, after restoring the Generators from
their states before the step. With a ``verifier`` (:mod:`specdec_lite.engine.batch_boundary`),
the target forward runs behind it, for example in a worker process, within a time
budget; a step it fails is redone plainly with the engine's own target.

Restart: :meth:`BatchEngine.snapshot` gives each unfinished sequence as plain data
(prompt, tokens so far, Generator state, trace) between steps;
:meth:`BatchEngine.resume` re-adds it, re-prefilling the caches from its tokens, and it
continues exactly as it would have. An engine is for one thread.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..checks import check_eos, check_int, check_prompt, check_real, check_window
from ..drafting.draft_length import FixedK, named_policy
from ..drafting.proposers import FeatureView, ModelDraft, as_proposer, early_stop
from ..models.batch_kv import GPTRows, batch_rows
from ..models.ngram import check_model
from ..rules.distributions import Sampling, as_generator, sample
from ..rules.verify import Verification, check_rule, verify_checked
from .batch_boundary import RowsRequest
from .decode import ask_proposer, measured_costs
from .faults import VerifierFault, fault_cause
from .sequence import SequenceState, state_from_dict
from .trace import Generation, Step, cut_at_eos


@dataclass(frozen=True)
class Proposal:
    """What the draft proposed for one sequence: ``drafted`` [k_b] tokens after
    ``state.context`` and the rows ``q`` [k_b, V] they were drawn from (k_b = 0: none)."""

    state: SequenceState
    drafted: np.ndarray  # [k_b]
    q: np.ndarray  # [k_b, V]


class BatchEngine:
    """Speculative (or plain) decoding of many sequences, one step for all at a time.

    ``target`` and ``draft`` are any models of the library's contract; a
    :class:`~specdec_lite.models.transformer.TransformerModel` is run batched over its own
    :class:`~specdec_lite.models.batch_kv.BatchKVCache`, any other model one sequence at a
    time. ``draft=None`` or ``k=0`` decodes plainly (one target call per token).
    ``k`` defaults to 4 with a draft. ``rule`` and ``rule_params`` are those of
    :func:`specdec_lite.engine.decode.speculative_generate`. At most ``max_batch`` sequences
    are active at once; the rest wait. With ``spec_max_batch`` set, a step with more
    active sequences than that is a plain step (no drafting, one row per sequence): under
    load the batch already fills the target's matrix products, and the extra rows of
    speculation cost about what they weigh (chapter 7); 0 makes every step plain, and
    :func:`specdec_lite.engine.load.measure_spec_max_batch` measures the size at which
    speculation stops paying on this machine. Which kind a step is depends only
    on how many sequences are active, never on a draw, so each sequence's output law stays
    the target's.
    """

    def __init__(self, target: object, draft: object | None = None, *, k: int | None = None,
                 temperature: float = 1.0, rule: str = "exact", top_k: int | None = None,
                 top_p: float | None = None, max_batch: int = 16,
                 spec_max_batch: int | None = None, fall_back: bool = False,
                 breaker: object | None = None,
                 inject_fault: Callable[[int], None] | None = None,
                 verifier: object | None = None, verify_timeout: float | None = None,
                 name: str = "engine", **rule_params: float) -> None:
        self.vocab = check_model(target, "target")
        # a proposer that is not a model (prompt lookup) is asked one sequence at a time
        is_model = draft is not None and callable(getattr(draft, "probs", None))
        self.proposer = (as_proposer(draft, self.vocab) if draft is not None and not is_model
                         else None)
        if is_model and check_model(draft, "draft") != self.vocab:
            raise ValueError(f"draft.vocab_size={draft.vocab_size} differs from "
                             f"target.vocab_size={self.vocab}")
        k = (4 if draft is not None else 0) if k is None else check_int(k, "k", 0)
        if k > 0 and draft is None:
            raise ValueError(f"k={k} needs a draft model (draft is None)")
        self.target, self.draft = target, (draft if k > 0 else None)
        if k == 0:
            self.proposer = None
        self.k = k
        # the default of every sequence; each may bring its own (``add(sampling=...)``)
        self.sampling = Sampling.checked(temperature, top_k, top_p)
        self.temperature = self.sampling.temperature
        self.top_k, self.top_p = self.sampling.top_k, self.sampling.top_p
        self.rule, self.params = rule, check_rule(rule, rule_params)
        self.max_batch = check_int(max_batch, "max_batch", 1)
        self.spec_max_batch = (None if spec_max_batch is None
                               else check_int(spec_max_batch, "spec_max_batch", 0))
        self.n_plain_by_load = 0  # steps decoded plainly because the batch was too large
        self._target_rows = batch_rows(target, "target", self.max_batch)
        self._draft_rows = (batch_rows(draft, "draft", self.max_batch)
                            if self.k and self.proposer is None else None)
        # a drafter that reads the target's features (EAGLE) gets each sequence's own state
        # and the features of the batched target cache (see _ask_proposer)
        self._reads_features = callable(getattr(self.proposer, "propose_with", None))
        if self._reads_features and not isinstance(self._target_rows, GPTRows):
            raise TypeError(f"draft {type(draft).__name__} reads the target's features: the "
                            "target must be a TransformerModel")
        self.active: list[SequenceState] = []  # in slot order
        self.waiting: deque[SequenceState] = deque()
        self._ids = itertools.count()
        self._known: set = set()
        self.n_steps = 0
        self.batch_sizes: list[int] = []  # active sequences at each step
        # Faults (see the module docstring): fall back to plain decoding when verification
        # raises; an optional circuit breaker (specdec_lite.engine.breaker.CircuitBreaker) stops
        # drafting after repeated failures; inject_fault(step) is called before each
        # verification and may raise, for fault drills and tests.
        self.fall_back = bool(fall_back)
        self.breaker = breaker
        self.inject_fault = inject_fault
        self.fallback_causes: dict[str, int] = {}
        # The boundary: with a verifier (a faults.ProcessVerifier running
        # batch_boundary.rows_step), the target rows of a step come from it, within
        # verify_timeout seconds; a step it fails is decoded plainly with this process's
        # own copy of the target. ``name`` keeps this engine's caches apart in the worker.
        if verifier is not None and not callable(verifier):
            raise TypeError(f"verifier must be callable, got {type(verifier).__name__}")
        self.verifier, self.name = verifier, str(name)
        self.verify_timeout = (None if verify_timeout is None
                               else check_real(verify_timeout, "verify_timeout", positive=True))

    @property
    def idle(self) -> bool:
        return not self.active and not self.waiting

    # ---------------------------------------------------------------- requests

    def add(self, prompt: object, *, max_new_tokens: int,
            seed: int | np.random.Generator | None = None, eos_id: int | None = None,
            request_id: object = None, sampling: Sampling | None = None,
            k: int | object | None = None, policy: str | None = None) -> object:
        """Queue a request; it joins the batch at the next :meth:`step`. Returns its id
        (``request_id``, or 0, 1, 2 ... in order of arrival).

        The sequence draws every random number from its own Generator, ``seed``, with its
        own ``sampling`` (:class:`Sampling`; default: the engine's), so requests with
        different temperatures and cuts share every step. ``k`` and ``policy`` choose its
        draft length as in :func:`specdec_lite.engine.decode.speculative_generate` (default: the
        engine's ``k`` at every step); sequences with different ones share every step too.
        A run that would pass a model's window (``max_len``) is refused here, with a
        ``ValueError`` naming ``max_new_tokens``.
        """
        if sampling is not None and not isinstance(sampling, Sampling):
            raise TypeError(f"sampling must be a Sampling, got {type(sampling).__name__}")
        prompt = check_prompt(prompt, self.vocab)
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", 0)
        self._check_window(len(prompt), max_new_tokens)
        sampling = sampling or self.sampling
        length, stops = self.draft_length(prompt, sampling, k, policy)
        state = SequenceState(self._new_id(request_id), prompt, max_new_tokens,
                              check_eos(eos_id, self.vocab), as_generator(seed),
                              Generation(tokens=np.zeros(0, np.int64), prompt=prompt), prompt,
                              sampling=sampling, policy=length, k_now=length.start, **stops)
        self.waiting.append(state)
        return state.request_id

    def draft_length(self, prompt: np.ndarray, sampling: Sampling, k: object,
                     policy: object) -> tuple[object, dict]:
        """A request's draft-length policy and its draft's early stops (``min_confidence``
        and ``risk_stop``, as :class:`SequenceState` takes them), as
        ``speculative_generate`` reads ``k`` and ``policy``; ``"auto"`` prices steps of this
        target and draft."""
        if k is None and policy in (None, "fixed"):
            return FixedK(self.k), {"min_confidence": None, "risk_stop": None}
        if self.k == 0:
            raise ValueError(f"k={k!r} and policy={policy!r} need a draft (this engine "
                             "decodes plainly)")
        proposer = self.proposer if self.proposer is not None else ModelDraft(self.draft)
        length, proposer = named_policy(
            policy, self.k if k is None else k, proposer,
            lambda k_max: measured_costs(self.target, proposer, prompt, sampling, self.rule,
                                         self.params, k_max, runs=False))  # a step a call
        return length, {"min_confidence": getattr(proposer, "min_confidence", None),
                        "risk_stop": getattr(proposer, "risk_stop", None)}

    def resume(self, snapshot: dict) -> object:
        """Re-add a sequence from :meth:`SequenceState.to_dict`: it continues from its
        tokens, Generator state and draft length as if it had never stopped. Returns its
        id."""
        state = state_from_dict(snapshot, self.vocab, self.sampling, FixedK(self.k))
        self._check_window(len(state.prompt), state.max_new_tokens)
        state.request_id = self._new_id(state.request_id)
        self.waiting.append(state)
        return state.request_id

    def snapshot(self) -> list[dict]:
        """Every unfinished sequence (active, then waiting) as :meth:`SequenceState.to_dict`
        data; take it between steps."""
        return [s.to_dict() for s in [*self.active, *self.waiting]]

    def _new_id(self, request_id: object) -> object:
        if request_id is None:
            request_id = next(self._ids)
            while request_id in self._known:
                request_id = next(self._ids)
        if request_id in self._known:
            raise ValueError(f"request_id {request_id!r} is already in use")
        self._known.add(request_id)
        return request_id

    def _check_window(self, n_prompt: int, max_new_tokens: int) -> None:
        """As the single-sequence loops: the target reads at most prompt + max_new - 1
        tokens, the draft one fewer."""
        check_window(self.target, "target", n_prompt, max_new_tokens,
                     n_prompt + max_new_tokens - 1 if max_new_tokens else 0)
        if self.draft is not None and self.proposer is None:
            check_window(self.draft, "draft", n_prompt, max_new_tokens,
                         n_prompt + max_new_tokens - 2 if max_new_tokens >= 2 else 0)

    # ---------------------------------------------------------------- one step

    def step(self) -> list[tuple[object, Generation]]:
        """Admit waiting requests, then advance every active sequence by one step.
        Returns the (request id, Generation) of each sequence that finished."""
        finished = self.admit()
        if not self.active:
            return finished
        self.n_steps += 1
        self.batch_sizes.append(len(self.active))
        forced = True  # a plain step whatever the policies would choose
        if self.draft is not None and self.breaker is not None and not self.breaker.allow():
            self._count_fallback("circuit_open")
            proposals = self._plain(self.propose_nothing())
        elif self.spec_max_batch is not None and len(self.active) > self.spec_max_batch:
            self.n_plain_by_load += 1
            proposals = self.propose_nothing()
        else:
            proposals, forced = self.propose(), False
        proposals, results = self._verify_or_fall_back(proposals)
        return finished + self._commit(proposals, results, forced)

    def cancel(self, request_id: object) -> bool:
        """Drop a waiting or active request (its deadline passed, its client left), and
        forget its id, which may then be used again (also after the request finished).
        Returns whether it was there; its tokens so far stay in its ``Generation``."""
        self._known.discard(request_id)
        for state in list(self.waiting):
            if state.request_id == request_id:
                self.waiting.remove(state)
                self._finish(state)
                return True
        for slot, state in enumerate(self.active):
            if state.request_id == request_id:
                self._finish(state)
                self._drop_slot(slot)
                return True
        return False

    def propose_nothing(self) -> list[Proposal]:
        """Empty proposals for every active sequence: a plain step, no draft call."""
        return [Proposal(s, np.zeros(0, np.int64), np.zeros((0, self.vocab)))
                for s in self.active]

    @staticmethod
    def _plain(proposals: list[Proposal]) -> list[Proposal]:
        return [Proposal(p.state, p.drafted[:0], p.q[:0]) for p in proposals]

    def _count_fallback(self, cause: str) -> None:
        self.fallback_causes[cause] = self.fallback_causes.get(cause, 0) + 1
        for state in self.active:
            state.n_fallbacks += 1

    def _verify_or_fall_back(self, proposals: list[Proposal]
                             ) -> tuple[list[Proposal], list[Verification]]:
        """Verify; if that raises and ``fall_back`` is on, decode the step plainly.

        The fallback restores each sequence's Generator to its state before the failed
        verification and emits one token from the target's own (warped) distribution, the
        extra token of a k = 0 verification. Whether a step fails does not depend on its
        draws, so the output law stays the target's.
        """
        before = [p.state.rng.bit_generator.state for p in proposals]
        drafted = any(len(p.drafted) for p in proposals)
        try:
            if self.inject_fault is not None and drafted:  # a plain step verifies nothing
                self.inject_fault(self.n_steps)
            results = self.verify_batch(proposals)
        except Exception as exc:  # any failure of the verifier is a fault to survive
            if not self.fall_back:
                raise
            if self.breaker is not None and drafted:
                self.breaker.record_failure()
            for p, state in zip(proposals, before, strict=True):
                p.state.rng.bit_generator.state = state
            self._count_fallback(fault_cause(exc) if isinstance(exc, VerifierFault)
                                 else "timeout" if isinstance(exc, TimeoutError)
                                 else type(exc).__name__)
            proposals = self._plain(proposals)
            return proposals, self._verify(proposals, None)  # in this process
        if self.breaker is not None and drafted:
            self.breaker.record_success()
        return proposals, results

    def run(self) -> dict[object, Generation]:
        """Step until every request has finished; {request id: Generation} in the order
        they finished."""
        out = {}
        while not self.idle:
            out.update(self.step())
        return out

    def admit(self) -> list[tuple[object, Generation]]:
        """Move waiting requests into free slots and prefill their caches (``step`` does
        this first; call it alone to separate the prefill from the decoding). Returns
        the requests that were finished on arrival (``max_new_tokens=0``)."""
        joining, finished = [], []
        while self.waiting and len(self.active) + len(joining) < self.max_batch:
            state = self.waiting.popleft()
            state.started = time.perf_counter()
            if state.n_new >= state.max_new_tokens or _ends_at_eos(state):
                finished.append(self._finish(state))
            else:
                joining.append(state)
        contexts = [s.context for s in joining]
        # behind a verifier the target's forwards run there: this process's copy reads a
        # sequence only for a fallback step (then all of it, by prefix sync)
        self._target_rows.add(contexts, prefill=self.verifier is None)
        if self._draft_rows is not None:
            self._draft_rows.add(contexts)
        if self._reads_features:
            for s in joining:
                s.proposer_state = self.proposer.new_state()
        self.active += joining
        return finished

    def propose(self) -> list[Proposal]:
        """Draft for every active sequence as many tokens as its policy chose (one batched
        draft call per draft position; a sequence near its end drafts fewer, as in
        ``speculative_generate``; one with a confidence stop drafts up to its first
        unsure token, one with a risk stop until its predicted risk passes the limit)."""
        states = self.active
        k_steps = [min(s.next_k(), s.max_new_tokens - s.n_new - 1) for s in states]
        if self.proposer is not None:
            return [self._ask_proposer(s, k, slot)
                    for slot, (s, k) in enumerate(zip(states, k_steps, strict=True))]
        ctx = [np.concatenate([s.context, np.zeros(k, np.int64)])  # [n_b + k_b] each
               for s, k in zip(states, k_steps, strict=True)]
        q = [np.zeros((k, self.vocab)) for k in k_steps]  # [k_b, V] each
        # a greedy draft's early stops read its row at T = 1, as ModelDraft's do
        temperatures = [1.0 if s.sampling.greedy and s.stops_early
                        else s.sampling.temperature for s in states]
        chances = [1.0] * len(states)  # that a sequence's drafts are all accepted, predicted
        for i in range(max(k_steps, default=0)):
            contexts = [c[: len(s.context) + i] if i < k else None
                        for s, c, k in zip(states, ctx, k_steps, strict=True)]
            rows = self._draft_rows.rows(contexts, [1] * len(states), temperatures)
            for b, (s, c, q_b, row) in enumerate(zip(states, ctx, q, rows, strict=True)):
                if row is None:
                    continue
                token, read = self._draw(s, row[0], q_b[i])
                s.gen.n_draft_calls += 1
                c[len(s.context) + i] = token
                stop, chances[b] = early_stop(s.min_confidence, s.risk_stop, read, token,
                                              chances[b])
                if stop:
                    k_steps[b] = i + 1  # it drafts no further this step
        return [Proposal(s, c[len(s.context): len(s.context) + k], q_b[:k])
                for s, c, q_b, k in zip(states, ctx, q, k_steps, strict=True)]

    @staticmethod
    def _draw(state: SequenceState, row: np.ndarray,
              q_i: np.ndarray) -> tuple[int, np.ndarray]:
        """Draw a draft token from the draft's ``row`` [V] into ``q_i`` [V] (the row it is
        drawn from, warped; one-hot at T = 0); returns it and the row its early stops
        read (:func:`~specdec_lite.drafting.proposers.early_stop`)."""
        s = state.sampling
        if s.greedy and state.stops_early:  # row is the T = 1 row
            token = int(row.argmax())
            q_i[token] = 1.0
            return token, row
        q_i[:] = s.warp(row)
        token = int(q_i.argmax()) if s.greedy else sample(q_i, state.rng)
        return token, q_i

    def _ask_proposer(self, state: SequenceState, k: int, slot: int) -> Proposal:
        """One sequence's proposal from a proposer that is not a model (checked as
        ``speculative_generate`` checks it; at k = 0 it is not asked). A drafter that
        reads the target's features is asked with the sequence's own state, and reads
        them from slot ``slot`` of the batched target cache."""
        if k == 0:
            return Proposal(state, np.zeros(0, np.int64), np.zeros((0, self.vocab)))
        proposer = (FeatureView(self.proposer, state.proposer_state,
                                partial(self._target_rows.features, slot))
                    if self._reads_features else self.proposer)
        drafted, q, n_calls = ask_proposer(proposer, state.context, k, state.sampling,
                                           state.rng, self.vocab)  # [k_b], [k_b, V]
        state.gen.n_draft_calls += n_calls
        return Proposal(state, drafted, q)

    def verify_batch(self, proposals: list[Proposal]) -> list[Verification]:
        """The verification of one step: ONE target call over every sequence's context
        and draft tokens, then each sequence's acceptance test with its own Generator.

        Plain decoding (no draft) samples one token per sequence, as ``generate`` does.
        This is the call a fault boundary wraps (see the module docstring); the target
        call goes to the engine's ``verifier`` when it has one.
        """
        return self._verify(proposals, self.verifier)

    def _verify(self, proposals: list[Proposal], verifier: object | None
                ) -> list[Verification]:
        contexts = [np.concatenate([p.state.context, p.drafted]) for p in proposals]
        n_rows = [len(p.drafted) + 1 for p in proposals]
        temperatures = [p.state.sampling.temperature for p in proposals]
        if verifier is not None:
            request = RowsRequest(self.name, self.max_batch,
                                  tuple(p.state.request_id for p in proposals),
                                  tuple(contexts), tuple(n_rows), tuple(temperatures))
            rows = verifier(request, self.verify_timeout)
            if len(rows) != len(proposals) or any(
                    np.shape(r) != (n, self.vocab) for r, n in zip(rows, n_rows, strict=True)):
                raise ValueError("the verifier's rows do not match the step's sequences")
        else:
            rows = self._target_rows.rows(contexts, n_rows, temperatures)
        out = []
        for p, row in zip(proposals, rows, strict=True):
            target_probs = p.state.sampling.warp(row)  # [k_b + 1, V]
            if self.draft is None:
                dist = target_probs[0]
                token = (int(dist.argmax()) if p.state.sampling.greedy
                         else sample(dist, p.state.rng))
                out.append(Verification(np.array([token], np.int64), 0, "sample"))
            else:
                out.append(verify_checked(p.drafted, p.q, target_probs, p.state.rng, self.rule,
                                          self.params))
        return out

    def _commit(self, proposals: list[Proposal], results: list[Verification],
                forced: bool = False) -> list[tuple[object, Generation]]:
        """Record each sequence's step; a policy is asked for its next k now, or, after a
        step ``forced`` to be plain, when a step may draft again
        (:meth:`~specdec_lite.engine.sequence.SequenceState.next_k`)."""
        done = []
        for slot, (p, result) in enumerate(zip(proposals, results, strict=True)):
            s = p.state
            s.gen.n_target_calls += 1
            emitted, hit_eos = cut_at_eos(result.tokens, s.eos_id)
            s.gen.steps.append(Step(tuple(p.drafted.tolist()), result.n_accepted,
                                    tuple(emitted.tolist()), result.extra))
            s.context = np.concatenate([s.context, emitted])
            if hit_eos or s.n_new >= s.max_new_tokens:
                done.append(slot)
            elif self.draft is not None and forced:
                s.policy_behind = True
            elif self.draft is not None:
                s.k_now = s.policy.after(s.k_now, s.gen)
        finished = []
        for slot in reversed(done):
            finished.append(self._finish(self.active[slot]))
            self._drop_slot(slot)
        return finished[::-1]

    def _drop_slot(self, slot: int) -> None:
        """Free ``slot``: the last active sequence moves into it, in the caches too."""
        self._target_rows.remove(slot)
        if self._draft_rows is not None:
            self._draft_rows.remove(slot)
        self.active[slot] = self.active[-1]
        self.active.pop()

    def _finish(self, state: SequenceState) -> tuple[object, Generation]:
        state.done = True
        state.gen.tokens = state.context[len(state.prompt):].copy()
        state.gen.wall_time_s = time.perf_counter() - state.started
        return state.request_id, state.gen


def _ends_at_eos(state: SequenceState) -> bool:
    """A resumed sequence whose last emitted token was its EOS is already finished."""
    return state.eos_id is not None and state.n_new > 0 and state.context[-1] == state.eos_id


__all__ = ["BatchEngine", "Proposal", "SequenceState"]
