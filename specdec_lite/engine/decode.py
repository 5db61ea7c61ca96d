"""Decode loops: plain autoregressive sampling and speculative decoding, with traces.

Both decoders return a :class:`~specdec_lite.engine.trace.Generation`, the run's record
with its metrics (α, τ and the counts, each defined once in
:mod:`specdec_lite.engine.trace`).

Context windows: a model with a window (``max_len``, or ``config.max_len`` as the
shipped GPT has, 256 positions; see :func:`specdec_lite.checks.model_window`) is never
asked to read more than it holds. Both decoders refuse such a run up front, before any
model call, with a ``ValueError`` naming ``max_new_tokens``; they do not slide the
window. A model without one (an n-gram) is unbounded.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..checks import check_eos, check_int, check_prompt, check_window, model_window
from ..drafting.draft_length import (
    FixedK,
    StepCosts,
    as_draft_length,
    named_policy,
)
from ..drafting.proposers import Draft, ModelDraft, as_proposer, for_run, one_hot_rows
from ..drafting.proposers import draft_block as draft_block  # re-exported: the model draft's loop
from ..models.bound import BoundModel, fresh
from ..models.ngram import check_model, model_rows
from ..rules.distributions import (
    Sampling,
    as_generator,
    sample,
)
from ..rules.verify import check_rule, verify_checked
from .costs import time_steps
from .trace import Generation, Step, cut_at_eos


def generate(
    model: object,
    prompt: np.ndarray,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    seed: int | np.random.Generator | None = None,
    eos_id: int | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Generation:
    """Autoregressive baseline: one ``model.probs`` call per new token, x ~ p_T(· | prefix).

    Each row is warped as :func:`specdec_lite.rules.distributions.warp` does: temperature, then
    ``top_k``, then ``top_p`` (None skips a cut; greedy decoding, ``temperature=0``,
    ignores both). Stops after ``max_new_tokens`` tokens, or after emitting ``eos_id``
    (included).

    The last call reads prompt + max_new_tokens - 1 tokens; if that is more than the
    model's window (``max_len`` or ``config.max_len``), the run is refused before any
    call with a ``ValueError`` naming ``max_new_tokens``.
    """
    vocab = check_model(model, "model")
    prompt = check_prompt(prompt, vocab)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", 0)
    check_window(model, "model", len(prompt), max_new_tokens,
                 len(prompt) + max_new_tokens - 1 if max_new_tokens else 0)
    sampling = Sampling.checked(temperature, top_k, top_p)
    eos_id = check_eos(eos_id, vocab)
    rule = "greedy" if sampling.greedy else "exact"  # with no drafts: argmax, or one draw
    return decode_loop(model, None, prompt, FixedK(0), sampling, rule, {}, as_generator(seed),
                       eos_id, max_new_tokens, name="model")


def speculative_generate(
    target: object,
    draft: object,
    prompt: np.ndarray,
    *,
    k: int | object,
    max_new_tokens: int,
    temperature: float = 1.0,
    rule: str = "exact",
    seed: int | np.random.Generator | None = None,
    eos_id: int | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    policy: str | None = None,
    **rule_params: float,
) -> Generation:
    """Speculative decoding (Leviathan et al. 2023, Algorithm 1), one target call per step.

    Each step drafts up to ``k`` tokens x_i ~ q_T(· | prefix, x_<i) with the draft
    model, scores prefix + x_1..x_k with one target call, and keeps what
    :func:`specdec_lite.rules.verify.verify` accepts plus one correction or bonus token.
    Temperature, then ``top_k``, then ``top_p`` warp both models' rows before
    verification, as in :func:`generate`: the exact rule then reproduces the warped
    target, because every q it sees is the distribution its token was drawn from.
    ``temperature=0`` drafts and verifies greedily and ignores the two cuts. Near the
    end fewer than ``k`` tokens are drafted, so exactly ``max_new_tokens`` tokens come
    out unless ``eos_id`` came first.

    ``draft`` is a model, or any proposer (:mod:`specdec_lite.drafting.proposers`, such as
    :class:`~specdec_lite.drafting.proposers.PromptLookup`); ``k`` is an int, or a draft-length
    policy (:mod:`specdec_lite.drafting.draft_length`) that picks each step's k from the steps
    before it. ``policy`` names one instead (see
    :func:`specdec_lite.drafting.draft_length.named_policy`): ``"fixed"`` (the default),
    ``"heuristic"``, ``"confidence"``, or ``"auto"``, which prices k = 0..``k`` by timing
    steps of this target and draft on this machine, once per process and pair, and
    decodes plainly where no k pays. Its k depends on those timings, so at T > 0 one seed
    can give different (equally exact) tokens in two processes; for a reproducible run
    pass ``k=AutoK(costs)`` with saved costs.

    Because of that, the target never reads more than prompt + max_new_tokens - 1
    tokens and the draft more than prompt + max_new_tokens - 2, whatever ``k`` is. A run
    that would pass either model's window (``max_len`` or ``config.max_len``) is refused
    before any call with a ``ValueError`` naming ``max_new_tokens``.
    """
    args = check_speculative(target, draft, prompt, k, max_new_tokens, temperature, top_k,
                             top_p, eos_id, rule, rule_params, seed, policy)
    policy, proposer = named_policy(policy, k, args.proposer, lambda k_max: measured_costs(
        target, args.proposer, args.prompt, args.sampling, rule, args.params, k_max))
    return decode_loop(target, proposer, args.prompt, policy, args.sampling, rule, args.params,
                       args.rng, args.eos_id, args.max_new_tokens)


@dataclass(frozen=True)
class Checked:
    """A speculative decoder's arguments after :func:`check_speculative`."""

    proposer: object
    prompt: np.ndarray  # [n_prompt]
    max_new_tokens: int
    sampling: Sampling
    eos_id: int | None
    params: dict
    rng: np.random.Generator


def check_speculative(target: object, draft: object, prompt: object, k: object,
                      max_new_tokens: object, temperature: object, top_k: object,
                      top_p: object, eos_id: object, rule: object, rule_params: dict,
                      seed: object, policy: object = None) -> Checked:
    """Validate a speculative decoder's arguments, in the order the decoders always have
    (k, the models, the prompt, the length and the windows, sampling, EOS, the rule), each
    error naming its parameter; the draft becomes a proposer (:func:`as_proposer`).

    The target reads at most prompt + max_new_tokens - 1 tokens and a draft model one
    fewer (the last step drafts nothing), so a run past either window is refused here."""
    if policy is None:
        as_draft_length(k)  # a bad k fails first
    vocab = check_model(target, "target")
    proposer = as_proposer(draft, vocab)
    prompt = check_prompt(prompt, vocab)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", 0)
    check_window(target, "target", len(prompt), max_new_tokens,
                 len(prompt) + max_new_tokens - 1 if max_new_tokens else 0)
    if isinstance(proposer, ModelDraft):
        check_window(proposer.model, "draft", len(prompt), max_new_tokens,
                     len(prompt) + max_new_tokens - 2 if max_new_tokens >= 2 else 0)
    sampling = Sampling.checked(temperature, top_k, top_p)
    eos_id = check_eos(eos_id, vocab)
    params = check_rule(rule, rule_params)
    return Checked(proposer, prompt, max_new_tokens, sampling, eos_id, params,
                   as_generator(seed))


def decode_loop(target: object, proposer: object | None, prompt: np.ndarray, policy: object,
                sampling: Sampling, rule: str, params: dict, rng: np.random.Generator,
                eos_id: int | None, max_new_tokens: int, name: str = "target", *,
                step: Callable | None = None, gen: Generation | None = None,
                after_step: Callable | None = None) -> Generation:
    """The library's one step loop, on checked arguments: steps with the k ``policy``
    chooses (a policy that always says 0, with no ``proposer``, is plain decoding), never
    more than ``max_new_tokens`` tokens, stopping after ``eos_id``. ``name`` is the
    target's name in error messages.

    ``step`` is a function with :func:`speculative_step`'s arguments and answer (the fault
    boundary of :mod:`specdec_lite.engine.resilient` is one); by default
    :func:`speculative_step`, or its compiled twin for GPTs on the numba backend
    (:func:`specdec_lite.engine.compiled_step.step_for`). A step function with a ``run``
    method (the compiled one has) takes many steps in one call when there is no
    ``after_step``: the whole run under a policy it can follow itself (the automatic one,
    the heuristic, Theorem 3.8's) when its proposer drafts inside it, else the steps whose
    k the policy has decided ahead (its ``steady``: every step at a fixed k, a stretch of
    plain steps under the automatic policy). They are the same steps, with the same k,
    taken one after another without returning to Python between them. It records into
    ``gen`` (default: a new :class:`Generation`). ``after_step(gen, rng)`` runs after each
    step, with ``gen.tokens`` up to date.

    The run keeps its state to itself: a GPT target runs on a cache of its own
    (:func:`specdec_lite.models.bound.fresh`; pass ``target.bound(cache)`` to start from a
    filled one), and so does the proposer (:func:`specdec_lite.drafting.proposers.for_run`)."""
    start = time.perf_counter()
    target = fresh(target)
    if proposer is not None:
        proposer = for_run(proposer, target)
    if step is None:  # one compiled call per step where the models allow it
        from .compiled_step import step_for  # it builds on this module's Step
        step = step_for(target, proposer, sampling, rule) or speculative_step
    seq = prompt  # [n] the sequence so far
    gen = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=prompt) if gen is None else gen
    k_now = policy.start
    # steps whose k the policy has already decided go in one call, where none watches; the
    # choices of the policies the kernels know are made inside the call, where its drafter
    # drafts there
    run = getattr(step, "run", None) if after_step is None else None
    steady = getattr(policy, "steady", None)
    chosen = policy  # until the step's run declines it: a policy it cannot follow
    while len(seq) - len(prompt) < max_new_tokens:
        left = max_new_tokens - (len(seq) - len(prompt))
        new = None
        if run is not None and chosen is not None:
            new = run(target, proposer, seq, k_now, left, sampling, rule, rng, eos_id, gen,
                      chosen)
            chosen = None if new is None else chosen  # declined: the policy or the proposer
        if new is None and run is not None:
            ahead = 1 if steady is None else steady(k_now, gen)
            if ahead is None or (k_now == 0 and ahead > 1):  # k for good, or plain steps
                new = run(target, proposer, seq, k_now,
                          left if ahead is None else min(ahead, left), sampling, rule, rng,
                          eos_id, gen)
                run = run if new is not None else None  # declined for window or meter
        if new is not None:
            seq = np.concatenate([seq, new])
            gen.tokens = seq[len(prompt) :]
            if eos_id is not None and len(new) and new[-1] == eos_id:
                break
            k_now = policy.after(k_now, gen)
            continue
        k_step = min(k_now, left - 1)  # never too many
        emitted, hit_eos = step(target, proposer, seq, k_step, sampling, rule, params, rng,
                                eos_id, gen, name)
        seq = np.concatenate([seq, emitted])
        gen.tokens = seq[len(prompt) :]
        if after_step is not None:
            after_step(gen, rng)
        if hit_eos:
            break
        k_now = policy.after(k_now, gen)
    gen.wall_time_s = time.perf_counter() - start
    return gen


def speculative_step(target: object, proposer: object, seq: np.ndarray, k: int,
                     sampling: Sampling, rule: str, params: dict, rng: np.random.Generator,
                     eos_id: int | None, gen: Generation,
                     name: str = "target") -> tuple[np.ndarray, bool]:
    """One step for one sequence ``seq`` [n]: ask ``proposer`` for up to ``k`` tokens,
    score them with one target call, verify with ``rule``, record the step in ``gen``.
    Returns the emitted tokens [m] (cut after ``eos_id``) and whether EOS came.

    With k = 0 the proposer is not asked and the step is a plain decoding step: one
    target row, its token drawn as the rule draws a bonus token (the same draws). It is
    recorded as a ``"bonus"``, or as a ``"sample"`` when there is no proposer at all
    (plain decoding, :func:`generate`)."""
    if k == 0:
        return _plain_step(target, seq, sampling, rule, rng, eos_id, gen, name,
                           "bonus" if proposer is not None else "sample")
    drafted, q, n_calls = ask_proposer(proposer, seq, k, sampling, rng, target.vocab_size)
    gen.n_draft_calls += n_calls
    ctx = np.concatenate([seq, drafted])  # [n + k_b]
    target_probs = sampling.warp(model_rows(target, ctx, len(drafted) + 1, "target",
                                            sampling.temperature))  # [k_b + 1, V]
    gen.n_target_calls += 1
    result = verify_checked(drafted, q, target_probs, rng, rule, params)
    emitted, hit_eos = cut_at_eos(result.tokens, eos_id)
    gen.steps.append(Step(tuple(drafted.tolist()), result.n_accepted, tuple(emitted.tolist()),
                          result.extra))
    return emitted, hit_eos


def _plain_step(target: object, seq: np.ndarray, sampling: Sampling, rule: str,
                rng: np.random.Generator, eos_id: int | None, gen: Generation, name: str,
                extra: str) -> tuple[np.ndarray, bool]:
    p = sampling.warp(model_rows(target, seq, 1, name, sampling.temperature))[0]  # [V]
    gen.n_target_calls += 1
    token = int(p.argmax()) if rule == "greedy" else sample(p, rng)
    gen.steps.append(Step((), 0, (token,), extra))
    return np.array([token], dtype=np.int64), token == eos_id


_MEASURED: dict[tuple, tuple] = {}  # (target, draft, greedy, k_max, runs) -> (refs, costs)
TIMED_STEPS = 4  # steps in a row per timing of a k: a run's steps follow one another


def measured_costs(target: object, proposer: object, prompt: np.ndarray, sampling: Sampling,
                   rule: str, params: dict, k_max: int, *, runs: bool = True) -> StepCosts:
    """Step costs for k = 0..``k_max`` of this target and proposer, timed on ``prompt``
    (:func:`specdec_lite.engine.costs.time_steps`) the first time a pair is asked for, then
    remembered for as long as both models live. The timed steps draw from their own
    Generator and record into a scratch trace, so the caller's run is untouched.

    Each timing is :data:`TIMED_STEPS` steps in a row with the same k, each after the
    tokens the one before emitted, as in a run: a step alone, repeated from one state,
    times cheaper than the same step inside a run (its proposer's and caches' work after
    an accepted or rejected draft is not in it). Where the runs take their steps in one
    compiled call (plain steps; a drafter that drafts in the run kernels, at a fixed k),
    so do the timings: the steps of a run of TIMED_STEPS × (k + 1) tokens, its time
    divided by their number. ``runs=False`` times each drafting step as a call of its own,
    for a caller that takes its steps one at a time (the batched engine)."""
    # a model draft is timed per model; another proposer per class (its cost is its code's)
    model = target.model if isinstance(target, BoundModel) else target
    drafter = getattr(proposer, "model", None)
    drafter = type(proposer) if drafter is None else drafter
    drafter = drafter.model if isinstance(drafter, BoundModel) else drafter
    key = (id(model), id(drafter), sampling.greedy, k_max, runs)
    known = _MEASURED.get(key)
    if known is not None and known[0]() is model and known[1]() is drafter:
        return known[2]
    scratch = np.random.default_rng(0)
    windows = [w for w in (model_window(model, "target"), model_window(drafter, "draft"))
               if w is not None]
    if windows:  # room for the timed steps after the prompt, within every window
        keep = max(2, min(windows) - TIMED_STEPS * (k_max + 1) - 1)
        prompt = prompt[-keep:]
    tail = np.resize(prompt[::-1], k_max)  # [k_max] stand-in drafts where none are proposed
    timed_target = fresh(model)  # the timing runs on caches of its own
    timed = for_run(proposer, timed_target)
    from .compiled_step import drafts_in_kernel, eagle_in_kernel, step_for  # they build on
    step = step_for(timed_target, timed, sampling, rule) or speculative_step  # this module
    # a proposer asked in Python may answer with fewer than k tokens: pad them to k (the
    # kernels' own drafters, a GPT's or the EAGLE drafter's, draft k within the windows)
    in_kernel = drafts_in_kernel(timed) or eagle_in_kernel(timed, timed_target) is not None
    asked = timed if in_kernel else Padded(timed, tail)

    fused = getattr(step, "run", None)  # many steps in one call, as the runs take them

    def run_step(k: int) -> int:
        gen = Generation(tokens=prompt[:0], prompt=prompt)
        seq = prompt
        if fused is not None and (k == 0 or (in_kernel and runs)) and fused(
                timed_target, asked, seq, k, TIMED_STEPS * (k + 1), sampling, rule, scratch,
                None, gen) is not None:
            return len(gen.steps)  # TIMED_STEPS of them when every draft is accepted
        for _ in range(TIMED_STEPS):
            emitted, _ = step(timed_target, asked, seq, k, sampling, rule, params, scratch,
                              None, gen)
            seq = np.concatenate([seq, emitted])
        return TIMED_STEPS

    def reset() -> None:  # each model forgets the prompt's last token, so a step reads it
        # (a draft on its target's cache is cut back with it at each step)
        own = getattr(timed, "shares", None) is None
        for reader, name in ((timed_target, "target"),
                             (getattr(timed, "model", None) if own else None, "draft")):
            if callable(getattr(reader, "probs", None)):
                model_rows(reader, prompt[:-1], 1, name, 1.0)

    costs = time_steps(run_step, k_max, reset=reset if len(prompt) > 1 else None)
    _MEASURED[key] = (weakref.ref(model), weakref.ref(drafter), costs)
    return costs


def auto_costs(target: object, draft: object, prompt: object, *, k: int,
               temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
               rule: str = "exact", **rule_params: float) -> StepCosts:
    """The step costs ``policy="auto"`` would time for this target, draft (a model or a
    proposer) and sampling, for k = 0..``k``, on ``prompt`` (remembered as
    :func:`measured_costs` remembers them). Pass ``k=AutoK(costs)`` to later runs to make
    them reproducible."""
    args = check_speculative(target, draft, prompt, k, 0, temperature, top_k, top_p, None,
                             rule, rule_params, None)
    return measured_costs(target, args.proposer, args.prompt, args.sampling, rule,
                          args.params, check_int(k, "k", 1))


class Padded:
    """``proposer``, asked as usual (so its cost is paid), with its answer padded to k
    tokens from ``tail``: a step then checks k tokens, as the cost of k is meant."""

    def __init__(self, proposer: object, tail: np.ndarray) -> None:
        self.proposer, self.tail = proposer, tail

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft:
        draft = self.proposer.propose(context, k, sampling, rng)
        m = len(draft.tokens)
        tokens = np.concatenate([draft.tokens, self.tail[: k - m]]).astype(np.int64)  # [k]
        q = None
        if draft.q is not None:
            q = np.concatenate([draft.q, one_hot_rows(tokens[m:], draft.q.shape[1])])
        return Draft(tokens, q, draft.n_calls)


def ask_proposer(proposer: object, context: np.ndarray, k: int, sampling: Sampling,
                 rng: np.random.Generator, vocab: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``proposer``'s answer for up to ``k`` tokens after ``context``, checked
    (:func:`check_draft`): the drafted ids [k_b], the rows q [k_b, V] they were drawn from
    (one-hot where the proposer chose them without chance) and the model calls it cost."""
    draft = proposer.propose(context, k, sampling, rng)
    drafted = check_draft(draft, k, vocab)  # [k_b]
    q = draft.q if draft.q is not None else one_hot_rows(drafted, vocab)  # [k_b, V]
    return drafted, q, draft.n_calls


def check_draft(draft: object, k: int, vocab: int) -> np.ndarray:
    """The tokens of a proposer's answer, checked: a :class:`~specdec_lite.drafting.proposers.Draft`
    with at most ``k`` ids in [0, vocab) and, if it has rows, q [m, V] giving each drafted
    token a probability above 0. A bad answer raises ``ValueError`` naming the proposer."""
    tokens = getattr(draft, "tokens", None)
    if tokens is None or not hasattr(draft, "q") or not hasattr(draft, "n_calls"):
        raise TypeError(f"proposer.propose must return a Draft, got {type(draft).__name__}")
    tokens = np.asarray(tokens)
    if (tokens.ndim != 1 or len(tokens) > k or (len(tokens) and tokens.dtype.kind not in "iu")
            or (len(tokens) and not 0 <= tokens.min() <= tokens.max() < vocab)):
        raise ValueError(f"proposer.propose returned tokens {tokens!r}: expected at most "
                         f"k={k} ids in [0, {vocab})")
    if draft.q is not None:
        q = np.asarray(draft.q)
        if q.shape != (len(tokens), vocab) or not np.all(q[np.arange(len(tokens)), tokens] > 0):
            raise ValueError(f"proposer.propose returned rows q of shape {q.shape} that do "
                             f"not match its {len(tokens)} tokens (expected ({len(tokens)}, "
                             f"{vocab}), each token with probability > 0)")
    return tokens.astype(np.int64, copy=False)
