"""One decoding step in one compiled call, for a GPT target on the numba backend.

The step of :func:`specdec_lite.engine.decode.speculative_step` makes a few dozen Python
and numpy calls around its forwards: syncing each cache, a probability row per drafted
token, the draws, the acceptance test, the residual, the bookkeeping. With the compiled
forward of :mod:`specdec_lite.models.fast` (a third of a millisecond for the shipped
target) those calls cost a fifth to a third of the wall clock. Here the step runs as one
call of a kernel of :mod:`specdec_lite.engine.step_kernels`:

- with a GPT draft on the numba backend (a plain
  :class:`~specdec_lite.drafting.proposers.ModelDraft`), the whole step: the draft's
  forwards and draws, the target's forward, the rule, the bonus or correction token;
- with the EAGLE drafter on the run's target cache, the whole step too: the features read,
  the drafter's catch-up and drafts, the target's forward, the rule, the extra token;
- with any other proposer, the proposer is asked in Python as before and the
  verification runs compiled: the target's forward, the rule, the extra token (prompt
  lookup and an n-gram draft, asked one step at a time, are asked so too; their runs
  draft inside the run kernels);
- with k = 0, the plain step.

It is the Python step, operation for operation: the same rows, the same uniforms from the
sequence's Generator in the same order, the same tests. Only summation orders differ, by
an ulp or so, so a token can differ only when a uniform falls within about 1e-16 of a
boundary; the tests check token-for-token equality with the Python step at T = 0 and
T > 0.

Between two steps the loop goes back to Python: a few tens of microseconds, a tenth of a
step of the shipped target. :meth:`CompiledStep.run` takes many steps in one call of a
run kernel (:mod:`specdec_lite.engine.run_kernels`) instead: every step of a run at a
fixed k, a stretch of plain steps, or a whole run under a draft-length policy the kernel
follows itself (:data:`KERNEL_POLICIES`), for the GPT draft, the early-exit draft, the
EAGLE drafter, prompt lookup and an n-gram draft (:func:`ngram_in_kernel`).

:func:`step_for` says when it applies (the target a :class:`TransformerModel` GPT on the
numba backend, on a cache of its own; no top-k or top-p; the exact or greedy rule) and
returns the step function :func:`specdec_lite.engine.decode.decode_loop` then calls
instead of the Python one. A model with an ``observer`` (the benchmark's forward meter)
gets each forward's rows and seconds, timed inside the compiled call, as the Python
forward reports them. :func:`tree_step_for` gives a greedy Medusa step's compiled
verification. The kernels run without the GIL, so threads decoding on one model can
overlap their steps.
"""

from __future__ import annotations

import numpy as np

from ..drafting.draft_length import AdaptiveK, AutoK, TheoryK
from ..drafting.eagle import EagleDraft
from ..drafting.proposers import FeatureView, ModelDraft, PromptLookup
from ..models.bound import BoundModel
from ..models.ngram import NGramModel
from ..models.transformer import TransformerModel
from . import run_kernels
from .decode import ask_proposer, speculative_step
from .kernel_time import in_kernel
from .native_calls import clock_source, uniform_source
from .step_kernels import compiled_kernels
from .trace import Step, cut_at_eos

EXTRA = ("bonus", "correction")  # the speculative kernel's extra-token codes
RUN_EXTRA = (*EXTRA, "bonus")  # the run kernel's: 2 is a plain step's token after drafts
RULE_CODES = {"exact": 0, "greedy": 1}
UNTIMED = np.zeros(2, dtype=np.int64)  # no clock: the kernels time nothing
NO_POLICY = np.zeros(0)  # a run kernel's policy for a fixed k


def _parts(model: object) -> tuple | None:
    """(model tuple, cache arrays, cache) of a GPT on one cache on the numba backend."""
    if not isinstance(model, BoundModel) or not isinstance(model.model, TransformerModel):
        return None
    packed = packed_gpt(model.model)
    if packed is None:
        return None
    return packed, cache_arrays(model.cache), model.cache


def cache_arrays(cache: object) -> tuple:
    """What the kernels take of a cache: its keys and values, tokens, logits, hidden."""
    return cache.kv, cache.tokens, cache.logits, cache.hidden


def packed_gpt(gpt: TransformerModel) -> tuple | None:
    """What the kernels take of a GPT on the numba backend (None on numpy)."""
    compiled = gpt.compiled
    if compiled is None:
        return None
    return (gpt.wte, gpt.wpe, compiled.weights, compiled.tiled, compiled.paths,
            compiled.n_head, compiled.eps)


def step_for(target: object, proposer: object | None, sampling: object,
             rule: str) -> object | None:
    """The compiled step for this run, or None where only the Python step applies (see
    the module). ``target`` and ``proposer`` are the run's own (on their caches)."""
    if rule not in RULE_CODES or sampling.top_k is not None or sampling.top_p is not None:
        return None
    if _parts(target) is None:
        return None
    return CompiledStep()


def drafts_in_kernel(proposer: object | None) -> bool:
    """Whether the compiled step drafts ``proposer``'s tokens itself: a
    :class:`~specdec_lite.drafting.proposers.ModelDraft` (with or without its confidence
    or risk stop) whose model is a GPT on the numba backend on a cache of its own. Any
    other proposer is asked in Python."""
    return type(proposer) is ModelDraft and _parts(proposer.model) is not None


def ngram_in_kernel(proposer: object | None) -> NGramModel | None:
    """The n-gram model when the run kernels draft ``proposer``'s tokens themselves: a
    :class:`~specdec_lite.drafting.proposers.ModelDraft` with no early stop of a fitted
    :class:`~specdec_lite.models.ngram.NGramModel` (a subclass may sum its rows otherwise).
    Else None."""
    if type(proposer) is not ModelDraft or proposer.stops_early:
        return None
    model = proposer.model
    return model if type(model) is NGramModel and model.fitted else None


def eagle_in_kernel(proposer: object | None, target: object) -> EagleDraft | None:
    """The EAGLE drafter when the compiled step drafts ``proposer``'s tokens itself: its
    per-run view (:meth:`~specdec_lite.drafting.eagle.EagleDraft.for_sequence`) reading the
    features of ``target``, the run's target on its own cache, with the layer compiled.
    Else None."""
    if type(proposer) is not FeatureView or type(proposer.drafter) is not EagleDraft:
        return None
    drafter = proposer.drafter
    if (not isinstance(target, BoundModel) or drafter.target is not target.model
            or proposer.read_features != target.hidden or drafter.compiled_block() is None):
        return None
    return drafter


def eagle_code(drafter: EagleDraft) -> tuple:
    """What the EAGLE kernel takes of ``drafter``: its compiled layer's weights and tiles,
    paths, heads and eps (the LM head it reads out by is the target's)."""
    block = drafter.compiled_block()
    return (block.in_w, *block.in_tiled, block.in_b, block.weights, block.tiled, block.paths,
            block.n_head, block.eps)


def stop_code(proposer: ModelDraft) -> np.ndarray:
    """A draft's early stops as the speculative kernel reads them: [6] = (min_confidence
    or 0, the risk stop's head weights and bias, its max_risk or 0); zeros: no stop."""
    code = np.zeros(6)
    if proposer.min_confidence is not None:
        code[0] = proposer.min_confidence
    if proposer.risk_stop is not None:
        head = proposer.risk_stop.head
        code[1:4], code[4], code[5] = head.weights, head.bias, proposer.risk_stop.max_risk
    return code


KERNEL_POLICIES = (AutoK, AdaptiveK, TheoryK)  # the policies the run kernels can follow


def policy_code(policy: AutoK | AdaptiveK | TheoryK) -> np.ndarray:
    """A draft-length policy as the run kernels follow it
    (:func:`~specdec_lite.engine.run_kernels.next_k`), float64, its kind first."""
    if type(policy) is AutoK:
        fields = (run_kernels.AUTO, policy.alpha0, policy.prior, policy.decay,
                  policy.probe_every, policy.window, policy.margin, policy.max_backoff,
                  *policy.costs.step_cost)
    elif type(policy) is AdaptiveK:
        fields = (run_kernels.ADAPTIVE, policy.k_min, policy.k_max, policy.grow, policy.shrink)
    else:
        fields = (run_kernels.THEORY, policy.alpha0, policy.prior, policy.c, policy.k_max)
    return np.array(fields, dtype=np.float64)


def record_steps(gen: object, new: np.ndarray, record: np.ndarray, drafted: np.ndarray, *,
                 model_calls: bool) -> None:
    """A run kernel's steps into ``gen`` (:func:`~specdec_lite.engine.run_kernels.record_step`
    wrote them): ``new`` [m] the tokens they emitted, ``record`` [steps, (proposed,
    accepted, emitted, extra code)], ``drafted`` [steps, k] what they proposed, each
    proposed token one draft call where ``model_calls`` (prompt lookup and Medusa's heads
    call no draft model)."""
    tokens, at = new.tolist(), 0
    for (m, accepted, n_out, extra), row in zip(record.tolist(), drafted.tolist(),
                                                strict=True):
        gen.steps.append(Step(tuple(row[:m]), accepted, tuple(tokens[at : at + n_out]),
                              RUN_EXTRA[extra]))
        gen.n_draft_calls += m if model_calls else 0
        at += n_out


def report_times(observers: tuple, times: np.ndarray) -> None:
    """Each timed forward in ``times`` [forwards, (who, rows, seconds)] to its model's
    observer in ``observers`` (who 0, 1: the target's, the draft's or heads'; None: none):
    ``observer(rows, seconds)`` per forward, or, where the observer has a ``many`` method
    (the benchmark's meter), ``observer.many(times, who)`` once, so that a run's record
    costs the meter one call, not one a forward; such an observer may keep ``times`` to
    read later, so the caller hands over an array it will not write again."""
    for who, observer in enumerate(observers):
        if observer is None:
            continue
        many = getattr(observer, "many", None)
        if many is not None:
            many(times, who)
            continue
        for mark, n, seconds in times.tolist():
            if mark == who:
                observer(int(n), seconds)


class CompiledStep:
    """A step function of :func:`~specdec_lite.engine.decode.decode_loop` (the arguments
    and answer of :func:`~specdec_lite.engine.decode.speculative_step`) that runs the step
    in one compiled call. What it hands the kernels for a model on its cache (the weights,
    the cache's arrays) is gathered once per run, not per step."""

    def __init__(self) -> None:
        self.kernels = compiled_kernels()
        self.times = np.zeros((0, 3))  # [forwards, (who, rows, seconds)]
        self.clock = clock_source()
        self.rng, self.source = None, (0, 0)
        self.parts: dict[int, tuple] = {}  # id(bound model) -> (bound model, its parts)
        self.eagle: tuple | None = None  # (the EAGLE drafter, what the kernel takes of it)
        self.policy: tuple | None = None  # (a draft-length policy, what the kernel takes)

    def _parts_of(self, model: BoundModel) -> tuple:
        """:func:`_parts` of ``model`` plus its cache's [length, n_causal] array, kept."""
        known = self.parts.get(id(model))
        if known is None or known[0] is not model:
            known = self.parts[id(model)] = (model, *_parts(model),
                                             np.zeros(2, dtype=np.int64))
        cache, state = known[3], known[4]
        state[0], state[1] = cache.length, cache.n_causal  # as the cache is now
        return known

    def __call__(self, target: object, proposer: object | None, seq: np.ndarray, k: int,
                 sampling: object, rule: str, params: dict, rng: np.random.Generator,
                 eos_id: int | None, gen: object, name: str = "target"
                 ) -> tuple[np.ndarray, bool]:
        _, t_model, t_arrays, t_cache, t_state = self._parts_of(target)
        gpt = target.model
        asked = proposer is not None and k > 0  # a speculative step, not a plain one
        draft = proposer.model if asked and drafts_in_kernel(proposer) else None
        if draft is not None:
            _, d_model, d_arrays, d_cache, d_state = self._parts_of(draft)
        eagle = eagle_in_kernel(proposer, target) if asked and draft is None else None
        if len(seq) + k > min(gpt.config.max_len, t_cache.capacity) or (
                draft is not None
                and len(seq) + k - 1 > min(draft.model.config.max_len, d_cache.capacity)):
            # past a window or a cache: the Python step, which raises the error
            return speculative_step(target, proposer, seq, k, sampling, rule, params, rng,
                                    eos_id, gen, name)
        timed = gpt.observer is not None or (draft is not None
                                             and draft.model.observer is not None)
        clock = self.clock if timed else UNTIMED
        if clock is None:  # a meter to serve and no clock to time with
            return speculative_step(target, proposer, seq, k, sampling, rule, params, rng,
                                    eos_id, gen, name)
        if len(self.times) < k + 2:  # a shared draft's target may first read a prompt
            self.times = np.zeros((k + 2, 3))
        temperature, code = sampling.temperature, RULE_CODES[rule]
        if draft is not None:
            drafted = np.empty(k, dtype=np.int64)  # [k]
            out = np.empty(k + 1, dtype=np.int64)  # [k + 1]
            draw, state = self._uniforms(rng)
            accepted, n_out, extra_code, n_times, m = in_kernel(
                self.kernels.speculative, t_model, t_arrays, t_state, d_model, d_arrays,
                d_state, int(proposer.shares is not None), seq, k, temperature, code, draw,
                state, stop_code(proposer), drafted, out, self.times, clock)
            d_cache.length, d_cache.n_causal = int(d_state[0]), int(d_state[1])
            emitted, extra = out[:n_out], EXTRA[extra_code]
            drafted = drafted[:m]
            gen.n_draft_calls += m
        elif eagle is not None:
            drafted = np.empty(k, dtype=np.int64)  # [k]
            out = np.empty(k + 1, dtype=np.int64)  # [k + 1]
            draw, state = self._uniforms(rng)
            e_state = proposer.state
            e_length = np.array([e_state.length], dtype=np.int64)
            accepted, n_out, extra_code, n_times, m = in_kernel(
                self.kernels.eagle, t_model, t_arrays, t_state, self._eagle_code(eagle),
                e_state.kv, e_state.tokens, e_length, seq, k, temperature, code, draw, state,
                drafted, out, self.times, clock)
            e_state.length = int(e_length[0])
            emitted, extra = out[:n_out], EXTRA[extra_code]
            drafted = drafted[:m]
            gen.n_draft_calls += m
        elif asked:  # another proposer, asked in Python; its draws come first, as before
            drafted, q, n_calls = ask_proposer(proposer, seq, k, sampling, rng, gpt.vocab_size)
            gen.n_draft_calls += n_calls
            # a proposer may have run the target (the EAGLE drafter reads its features)
            t_state[0], t_state[1] = t_cache.length, t_cache.n_causal
            out = np.empty(len(drafted) + 1, dtype=np.int64)  # [k_b + 1]
            draw, state = self._uniforms(rng)
            accepted, n_out, extra_code, n_times = in_kernel(
                self.kernels.verify, t_model, t_arrays, t_state, seq, np.ascontiguousarray(drafted),
                np.ascontiguousarray(q, dtype=np.float64), temperature, code, draw, state,
                out, self.times, clock)
            emitted, extra = out[:n_out], EXTRA[extra_code]
        else:
            draw, state = self._uniforms(rng)
            token, n_times = in_kernel(self.kernels.plain, t_model, t_arrays, t_state, seq,
                                       temperature, code, draw, state, self.times, clock)
            emitted = np.array([token], dtype=np.int64)  # [1]
            drafted, accepted = emitted[:0], 0
            extra = "bonus" if proposer is not None else "sample"
        t_cache.length, t_cache.n_causal = int(t_state[0]), int(t_state[1])
        gen.n_target_calls += 1
        if timed:
            report_times((gpt.observer, None if draft is None else draft.model.observer),
                         self.times[:n_times].copy())  # the next step reuses them
        emitted, hit_eos = cut_at_eos(emitted, eos_id)
        gen.steps.append(Step(tuple(drafted.tolist()), int(accepted), tuple(emitted.tolist()),
                              extra))
        return emitted, hit_eos

    def run(self, target: object, proposer: object | None, seq: np.ndarray, k: int,
            max_new: int, sampling: object, rule: str, rng: np.random.Generator,
            eos_id: int | None, gen: object, policy: object | None = None
            ) -> np.ndarray | None:
        """Every step of a run at a fixed ``k`` after ``seq``, until ``max_new`` tokens or
        ``eos_id``, in one compiled call (a run kernel of
        :mod:`~specdec_lite.engine.run_kernels`: the plain one with no proposer or k = 0,
        else the GPT draft's, the EAGLE drafter's, prompt lookup's or an n-gram draft's):
        the steps :meth:`__call__` would take one by one, with the same draws, recorded in
        ``gen`` alike. With ``policy`` (one of :data:`KERNEL_POLICIES`), the first step
        takes ``k`` and each later one the k ``policy`` chooses after the steps in ``gen``
        so far, inside the call. Returns the new tokens, or None where the run's steps must
        go one by one: a policy the kernels cannot follow, a proposer asked in Python, a
        window or cache the run could pass (the step then raises the error), a meter and
        no clock."""
        if policy is not None and type(policy) not in KERNEL_POLICIES:
            return None  # the loop asks it after each step
        drafting = proposer is not None and (k > 0 or policy is not None)
        eagle = eagle_in_kernel(proposer, target) if drafting else None
        copies = drafting and type(proposer) is PromptLookup  # drafts copied in the kernel
        ngram = ngram_in_kernel(proposer) if drafting else None
        if (drafting and eagle is None and not copies and ngram is None
                and not drafts_in_kernel(proposer)):
            return None
        _, t_model, t_arrays, t_cache, t_state = self._parts_of(target)
        gpt, n0 = target.model, len(seq)
        if n0 + max_new > min(gpt.config.max_len, t_cache.capacity):
            return None
        gpt_draft = drafting and eagle is None and not copies and ngram is None
        draft = proposer.model if gpt_draft else None
        if draft is not None:
            _, d_model, d_arrays, d_cache, d_state = self._parts_of(draft)
            if n0 + max_new > min(draft.model.config.max_len, d_cache.capacity):
                return None
        observers = (gpt.observer, None if draft is None else draft.model.observer)
        if ngram is not None:
            observers = (gpt.observer, ngram.observer)
        clock = self.clock if observers != (None, None) else UNTIMED
        if clock is None:
            return None
        buf = np.empty(n0 + max_new, dtype=np.int64)  # [n0 + max_new] the sequence, then new
        buf[:n0] = seq
        rules = NO_POLICY if policy is None else self._policy_code(policy)
        k_max = max(k, self.kernels_k_max(rules))
        times = np.zeros((max_new * (k_max + 2), 3))  # at most k + 2 forwards a step
        draw, state = self._uniforms(rng)
        temperature, code = sampling.temperature, RULE_CODES[rule]
        eos = -1 if eos_id is None else eos_id
        n_prev = 0 if policy is None else len(gen.steps)  # the steps the policy reads
        record = np.zeros((n_prev + max_new, 4), dtype=np.int64)  # [steps, (m, acc, out, x)]
        for i, step in enumerate(gen.steps if policy is not None else ()):
            record[i, 0], record[i, 1] = len(step.proposed), step.n_accepted
        drafted = np.zeros((n_prev + max_new, max(k_max, 1)), dtype=np.int64)  # [steps, k]
        if not drafting:
            n_new, n_times = in_kernel(self.kernels.plain_run, t_model, t_arrays, t_state, buf,
                                       n0, max_new, temperature, code, draw, state, eos, times,
                                       clock)
            extra = "bonus" if proposer is not None else "sample"
            gen.steps.extend(Step((), 0, (token,), extra)
                             for token in buf[n0 : n0 + n_new].tolist())
            n_steps = n_new
        elif eagle is not None:
            e_state = proposer.state
            e_length = np.array([e_state.length], dtype=np.int64)
            n_steps, n_new, n_times = in_kernel(
                self.kernels.eagle_run, t_model, t_arrays, t_state, self._eagle_code(eagle),
                e_state.kv, e_state.tokens, e_length, buf, n0, max_new, k, rules, n_prev,
                temperature, code, draw, state, eos, record, drafted, times, clock)
            e_state.length = int(e_length[0])
        elif ngram is not None:
            n_steps, n_new, n_times = in_kernel(
                self.kernels.ngram_run, t_model, t_arrays, t_state, ngram.flat_tables(), buf,
                n0, max_new, k, rules, n_prev, temperature, code, draw, state, eos, record,
                drafted, times, clock)
        elif copies:
            n_steps, n_new, n_times = in_kernel(
                self.kernels.lookup_run, t_model, t_arrays, t_state, buf, n0, max_new, k,
                rules, n_prev, proposer.max_ngram, proposer.min_ngram, temperature, code,
                draw, state, eos, record, drafted, times, clock)
        else:
            n_steps, n_new, n_times = in_kernel(
                self.kernels.speculative_run, t_model, t_arrays, t_state, d_model, d_arrays,
                d_state, int(proposer.shares is not None), buf, n0, max_new, k, rules,
                n_prev, temperature, code, draw, state, stop_code(proposer), eos, record,
                drafted, times, clock)
            d_cache.length, d_cache.n_causal = int(d_state[0]), int(d_state[1])
        if drafting:
            record_steps(gen, buf[n0 : n0 + n_new], record[n_prev:n_steps],
                         drafted[n_prev:n_steps], model_calls=not copies)
            n_steps -= n_prev
        t_cache.length, t_cache.n_causal = int(t_state[0]), int(t_state[1])
        gen.n_target_calls += n_steps
        if observers != (None, None):
            report_times(observers, times[:n_times])
        return buf[n0 : n0 + n_new]

    def _policy_code(self, policy: object) -> np.ndarray:
        """:func:`policy_code` of ``policy``, laid out once per run."""
        if self.policy is None or self.policy[0] is not policy:
            self.policy = (policy, policy_code(policy))
        return self.policy[1]

    @staticmethod
    def kernels_k_max(rules: np.ndarray) -> int:
        """The largest k the policy laid out as ``rules`` may choose (0: a fixed k)."""
        return int(run_kernels.policy_k_max(rules))

    def _eagle_code(self, drafter: EagleDraft) -> tuple:
        """:func:`eagle_code` of ``drafter``, gathered once per run."""
        if self.eagle is None or self.eagle[0] is not drafter:
            self.eagle = (drafter, eagle_code(drafter))
        return self.eagle[1]

    def _uniforms(self, rng: np.random.Generator) -> tuple[int, int]:
        """``rng``'s uniform source, looked up once per run
        (:func:`~specdec_lite.engine.native_calls.uniform_source`)."""
        if self.rng is not rng:
            self.rng, self.source = rng, uniform_source(rng)  # holding rng keeps it alive
        return self.source



def tree_step_for(target: TransformerModel, tree: object, rule: str,
                  temperature: float) -> TreeStep | None:
    """The compiled verification of a greedy Medusa step (the greedy rule, or typical
    acceptance at ``temperature`` 0, which is greedy) for a GPT on the numba backend, or
    None (the Python step applies; the exact rule's chain draws even at T = 0)."""
    greedy = rule == "greedy" or (rule == "typical" and temperature == 0)
    if not greedy or packed_gpt(target) is None:
        return None
    return TreeStep(target, tree)


class TreeStep:
    """For one Medusa run (:mod:`specdec_lite.engine.medusa_decode`): verify a tree's tokens
    greedily and commit the kept path in one compiled call
    (:func:`~specdec_lite.engine.step_kernels.tree_kernel`); the
    tree's arrays are laid out for it once."""

    def __init__(self, target: TransformerModel, tree: object) -> None:
        self.target, self.packed = target, packed_gpt(target)
        self.kernel = compiled_kernels().tree
        self.depth = np.ascontiguousarray(tree.depth, dtype=np.int64)  # [N+1]
        self.parent = np.ascontiguousarray(tree.parent, dtype=np.int64)  # [N+1]
        self.ancestors = np.ascontiguousarray(tree.mask, dtype=np.bool_)  # [N+1, N+1]
        self.bias = np.where(self.ancestors, np.float32(0), np.float32(-np.inf))  # [N+1, N+1]
        self.path = np.zeros(len(self.depth), dtype=np.int64)  # [N+1]
        self.times = np.zeros((1, 3))
        self.state = np.zeros(2, dtype=np.int64)
        self.clock = clock_source()

    def __call__(self, cache: object, tokens: np.ndarray) -> tuple[np.ndarray, int] | None:
        """The kept path (node indices, ascending) and the target's next token, with the
        cache committed to the path; None where the block would not fit the cache (the
        Python step then raises its error) or a meter waits and there is no clock."""
        timed = self.target.observer is not None
        clock = self.clock if timed else UNTIMED
        if cache.n_causal + len(tokens) > cache.capacity or clock is None:
            return None
        self.state[0], self.state[1] = cache.length, cache.n_causal
        m, extra, n_times = in_kernel(
            self.kernel, self.packed, cache_arrays(cache),
            self.state, tokens, self.depth, self.bias, self.parent, self.ancestors, self.path,
            self.times, clock)
        cache.length, cache.n_causal = int(self.state[0]), int(self.state[1])
        if timed and n_times:
            self.target.observer(int(self.times[0, 1]), float(self.times[0, 2]))
        return self.path[:m].copy(), int(extra)
