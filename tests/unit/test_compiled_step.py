"""The compiled step (specdec_lite.engine.compiled_step) against the Python step it mirrors:
the same tokens, steps, draws and caches for GPTs on the numba backend, at T = 0 and T > 0,
both rules, every k, with EOS, a draft-length policy and a warm cache; the forward meter
sees the same forwards; it stays out of the way where it does not apply. The same for
Medusa's compiled greedy verification, on dense and chain trees, and for the other
proposers: prompt lookup (its copy made inside the run kernel), a Markov draft asked in
Python, a draft that stops when unsure, the EAGLE drafter, which reads the target's
features.

Its exactness against enumerated sequence laws is in
tests/statistical/test_compiled_step_exact.py. Every test needs numba.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from support import CONFIG, random_params

from specdec_lite.bench.timing import ForwardMeter, overhead_split
from specdec_lite.drafting.eagle import EagleDraft, EagleWeights, eagle_shapes
from specdec_lite.drafting.proposers import ModelDraft, PromptLookup
from specdec_lite.drafting.stop_head import RiskStop, shipped_head
from specdec_lite.engine import compiled_step, step_kernels
from specdec_lite.engine.decode import generate, speculative_generate
from specdec_lite.engine.kernel_time import kernel_timer
from specdec_lite.engine.step_kernels import compiled_kernels
from specdec_lite.models import fast
from specdec_lite.models.ngram import MarkovModel
from specdec_lite.models.transformer import TransformerConfig, TransformerModel
from specdec_lite.rules.distributions import Sampling

pytestmark = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")

DRAFT_CONFIG = TransformerConfig(vocab_size=13, n_layer=1, n_head=2, d_model=16, max_len=40)


@pytest.fixture(scope="module")
def pair() -> tuple[TransformerModel, TransformerModel]:
    """A random target and draft GPT on the numba backend (flattened logits, so tokens vary)."""
    target_params, draft_params = random_params(CONFIG, 0), random_params(DRAFT_CONFIG, 3)
    target_params["wte"] *= 0.3
    draft_params["wte"] *= 0.3
    return (TransformerModel(CONFIG, target_params, backend="numba"),
            TransformerModel(DRAFT_CONFIG, draft_params, backend="numba"))


class Alternating:
    """A draft-length policy the run kernels do not know: k, then k - 2, then k, ...; the
    loop asks it after every step, and each step is a kernel call of its own."""

    def __init__(self, k: int) -> None:
        self.start, self.k = k, k

    def after(self, k: int, gen) -> int:
        return self.k - 2 if len(gen.steps) % 2 else self.k


def same_run(a, b) -> bool:
    return (a.tokens.tolist() == b.tokens.tolist() and a.steps == b.steps
            and (a.n_target_calls, a.n_draft_calls) == (b.n_target_calls, b.n_draft_calls))


PROMPT = np.array([1, 5, 2, 7, 3], dtype=np.int64)


@pytest.mark.parametrize("temperature", [0.0, 0.6, 1.0, 1.4])
@pytest.mark.parametrize("rule", ["exact", "greedy"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_same_run_as_the_python_step(pair, python_step, temperature, rule, k):
    target, draft = pair
    for seed in range(3):
        def decode(seed=seed):
            return speculative_generate(target, draft, PROMPT, k=k, max_new_tokens=30,
                                        temperature=temperature, rule=rule, seed=seed)
        compiled, python = decode(), python_step(decode)
        assert same_run(compiled, python), (seed, compiled.tokens, python.tokens)


@pytest.fixture(scope="module")
def shipped():
    from specdec_lite.pretrained import load_pretrained

    return load_pretrained(backend="numba")


@pytest.mark.parametrize("policy", ["fixed", "heuristic", "alternating"])
@pytest.mark.parametrize("stop", ["confidence", "risk", "risk-tight"])
@pytest.mark.parametrize(("temperature", "rule"),
                         [(0.0, "greedy"), (0.0, "exact"), (0.6, "exact"), (1.0, "exact")])
def test_a_draft_that_stops_early_drafts_in_the_kernel_as_in_python(shipped, python_step,
                                                                   kernel_calls, stop,
                                                                   temperature, rule, policy):
    """The shipped draft with a confidence stop or a risk stop (the shipped head, at two
    limits): every step runs in the kernel, with the Python step's tokens, steps and
    counts; the stops really cut steps short, and not all of them. At a fixed k, and
    under a policy the run kernel follows (the heuristic), the whole run is one call of
    the run kernel; under another policy, one call per step."""
    draft = {"confidence": ModelDraft(shipped.draft, min_confidence=0.4),
             "risk": ModelDraft(shipped.draft, risk_stop=RiskStop(shipped_head(), 0.5)),
             "risk-tight": ModelDraft(shipped.draft,
                                      risk_stop=RiskStop(shipped_head(), 0.2))}[stop]
    prompt = shipped.tokenizer.encode("class Stack:\n    def push(self, item):\n        ")
    lengths = set()
    for seed in range(3):
        def decode(seed=seed):
            if policy == "alternating":
                return speculative_generate(shipped.target, draft, prompt, k=Alternating(6),
                                            max_new_tokens=60, temperature=temperature,
                                            rule=rule, seed=seed)
            return speculative_generate(shipped.target, draft, prompt, k=6, max_new_tokens=60,
                                        temperature=temperature, rule=rule, seed=seed,
                                        policy=policy)
        kernel_calls.clear()
        compiled = decode()
        kernels = compiled_step.compiled_kernels()  # a step left with room for one: plain
        assert kernel_calls == ([kernels.speculative_run] if policy != "alternating" else
                                [kernels.speculative if step.proposed else kernels.plain
                                 for step in compiled.steps])
        python = python_step(decode)
        assert same_run(compiled, python), (stop, seed, compiled.tokens, python.tokens)
        lengths |= {len(step.proposed) for step in compiled.steps[:-1]}  # the last is cut
    assert min(lengths) < 6 and len(lengths) > 1, lengths


@pytest.mark.parametrize("policy", ["fixed", "heuristic", "alternating"])
@pytest.mark.parametrize(("temperature", "rule"),
                         [(0.0, "greedy"), (0.0, "exact"), (0.6, "exact"), (1.0, "exact")])
def test_the_shipped_eagle_drafter_drafts_in_its_kernel_as_in_python(shipped, python_step,
                                                                     kernel_calls, temperature,
                                                                     rule, policy):
    """The shipped EAGLE drafter on the shipped target (trained weights, whose drafts the
    target mostly accepts, unlike a random drafter's): every drafting step runs in the
    EAGLE kernel, with the Python step's tokens, steps and counts; at a fixed k, and under
    the heuristic, the whole run is one call of its run kernel."""
    from specdec_lite.pretrained import load_eagle

    drafter = load_eagle(shipped.target)
    prompt = shipped.tokenizer.encode("class Stack:\n    def push(self, item):\n        ")
    kernels = compiled_step.compiled_kernels()
    accepted = corrected = 0
    for seed in range(3):
        def decode(seed=seed):
            if policy == "alternating":
                return speculative_generate(shipped.target, drafter, prompt, k=Alternating(4),
                                            max_new_tokens=60, temperature=temperature,
                                            rule=rule, seed=seed)
            return speculative_generate(shipped.target, drafter, prompt, k=4,
                                        max_new_tokens=60, temperature=temperature, rule=rule,
                                        seed=seed, policy=policy)
        kernel_calls.clear()
        compiled = decode()
        assert kernel_calls == ([kernels.eagle_run] if policy != "alternating" else
                                [kernels.eagle if step.proposed else kernels.plain
                                 for step in compiled.steps])
        python = python_step(decode)
        assert same_run(compiled, python), (seed, compiled.tokens, python.tokens)
        accepted += compiled.n_accepted
        corrected += sum(step.extra == "correction" for step in compiled.steps)
    assert accepted > 60 and corrected > 0  # drafts taken and drafts turned down


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_plain_decoding_is_the_same_run(pair, python_step, temperature):
    target = pair[0]
    def decode():
        return generate(target, PROMPT, max_new_tokens=30, temperature=temperature, seed=4)
    assert same_run(decode(), python_step(decode))


def test_eos_a_policy_and_a_warm_cache_give_the_same_run(pair, python_step):
    target, draft = pair
    cache = target.new_state()
    target.probs(PROMPT, cache=cache)  # the prompt forwarded before the run, as the bench does
    eos = int(generate(target, PROMPT, max_new_tokens=12, temperature=1.0, seed=9).tokens[-1])

    def decode():
        warm = target.new_state()
        warm.kv[:], warm.tokens[:], warm.logits[:] = cache.kv, cache.tokens, cache.logits
        warm.hidden[:], warm.length, warm.n_causal = cache.hidden, cache.length, cache.n_causal
        return speculative_generate(target.bound(warm), draft, PROMPT, k=4, max_new_tokens=30,
                                    temperature=1.0, seed=9, eos_id=eos, policy="heuristic")
    compiled, python = decode(), python_step(decode)
    assert same_run(compiled, python)
    assert compiled.tokens[-1] == eos and len({len(s.proposed) for s in compiled.steps}) > 1


@pytest.mark.parametrize("k", [0, 3])
def test_a_fixed_k_run_is_one_call_and_stops_at_eos_as_the_steps_do(pair, python_step,
                                                                     kernel_calls, k):
    """At a fixed k (k = 0: plain decoding) the compiled run takes every step in one call
    of a run kernel, and ends after EOS, cut inside its step, as the steps one by one do."""
    target, draft = pair
    eos = int(generate(target, PROMPT, max_new_tokens=14, temperature=1.0, seed=9).tokens[-1])
    kernels = compiled_step.compiled_kernels()
    for seed in (9, 10, 11):
        def decode(seed=seed):
            if k == 0:
                return generate(target, PROMPT, max_new_tokens=30, temperature=1.0, seed=seed,
                                eos_id=eos)
            return speculative_generate(target, draft, PROMPT, k=k, max_new_tokens=30,
                                        temperature=1.0, seed=seed, eos_id=eos)
        kernel_calls.clear()
        compiled = decode()
        assert kernel_calls == [kernels.plain_run if k == 0 else kernels.speculative_run]
        python = python_step(decode)
        assert same_run(compiled, python), (seed, compiled.tokens, python.tokens)
        if seed == 9:  # the seed that drew eos
            assert compiled.tokens[-1] == eos and len(compiled.tokens) < 30


@pytest.mark.parametrize("drafter", ["gpt", "lookup", "markov"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_automatic_policy_runs_in_the_kernel_as_in_python(pair, python_step, kernel_calls,
                                                              temperature, drafter):
    """Under the automatic policy a drafter that drafts in a kernel (the GPT draft, prompt
    lookup) takes the whole run in one call, the policy choosing each step's k inside it;
    a proposer asked in Python (a Markov draft) takes its plain stretches (until the next
    probe) in one call each. Either way the run is the Python step's, steps and k
    included."""
    from specdec_lite.drafting.draft_length import AutoK, StepCosts

    target, draft = pair
    proposer = {"gpt": draft, "lookup": PromptLookup(),
                "markov": ModelDraft(markov_draft(13))}[drafter]
    policy = AutoK(StepCosts((1.0, 1.6, 2.2, 2.8)), alpha0=0.5, probe_every=4)  # starts plain
    kernels = compiled_step.compiled_kernels()
    check_policy_run(target, proposer, policy, temperature, python_step, kernel_calls,
                     {"gpt": kernels.speculative_run, "lookup": kernels.lookup_run}.get(drafter))


@pytest.mark.parametrize("policy", ["heuristic", "theory"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_heuristic_and_theory_policies_run_in_the_kernel_as_in_python(
        pair, python_step, kernel_calls, temperature, policy):
    from specdec_lite.drafting.draft_length import AdaptiveK, TheoryK

    target, draft = pair
    chosen = AdaptiveK(start=2, k_max=6) if policy == "heuristic" else TheoryK(c=0.2, k_max=5)
    check_policy_run(target, draft, chosen, temperature, python_step, kernel_calls,
                     compiled_step.compiled_kernels().speculative_run)


def check_policy_run(target, proposer, policy, temperature, python_step, kernel_calls,
                     in_kernel):
    """Runs with ``policy`` equal the Python step's; one call of the run kernel
    ``in_kernel``, or with None plain stretches in one call each."""
    kernels = compiled_step.compiled_kernels()
    for seed in range(3):
        def decode(seed=seed):
            return speculative_generate(target, proposer, LOOPY, k=policy, max_new_tokens=28,
                                        temperature=temperature, seed=seed)
        kernel_calls.clear()
        compiled = decode()
        python = python_step(decode)
        assert same_run(compiled, python), (seed, compiled.tokens, python.tokens)
        if in_kernel is not None:
            assert kernel_calls == [in_kernel]
        else:
            assert kernels.plain_run in kernel_calls
            assert len(kernel_calls) < len(compiled.steps)
    assert any(step.proposed for step in compiled.steps)


@pytest.mark.parametrize("runs", [True, False])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_automatic_policy_times_a_kernel_drafter_as_its_runs_take_the_steps(kernel_calls,
                                                                               temperature,
                                                                               runs):
    """Its prices for k > 0, like k = 0's, come from runs in one call of a run kernel, not
    from steps taken one call each; each price is per step, k = 0's 1. For the batched
    engine, which takes a step a call (runs=False), drafting steps are timed one a call."""
    from specdec_lite.drafting.proposers import ModelDraft
    from specdec_lite.engine import decode

    target_params, draft_params = random_params(CONFIG, 10), random_params(DRAFT_CONFIG, 11)
    target = TransformerModel(CONFIG, target_params, backend="numba")  # new: timed afresh
    draft = TransformerModel(DRAFT_CONFIG, draft_params, backend="numba")
    kernels = compiled_step.compiled_kernels()
    costs = decode.measured_costs(target, ModelDraft(draft), PROMPT, Sampling(temperature),
                                  "exact", {}, 3, runs=runs)
    drafting = kernels.speculative_run if runs else kernels.speculative
    assert set(kernel_calls) == {kernels.plain_run, drafting}
    assert costs.k_max == 3 and costs.step_cost[0] == 1.0


def random_policy(rng: np.random.Generator, kind: str) -> object:
    """A draft-length policy of ``kind`` the run kernels follow, with random settings."""
    from specdec_lite.drafting.draft_length import AdaptiveK, AutoK, StepCosts, TheoryK

    if kind == "adaptive":
        k_min = int(rng.integers(1, 3))
        k_max = k_min + int(rng.integers(0, 7))
        return AdaptiveK(start=int(rng.integers(k_min, k_max + 1)), k_min=k_min, k_max=k_max,
                         grow=int(rng.integers(0, 3)), shrink=int(rng.integers(0, 3)))
    if kind == "theory":
        return TheoryK(c=float(rng.uniform(0, 0.5)), alpha0=float(rng.uniform(0.05, 0.95)),
                       prior=float(rng.uniform(0.5, 6)), k_max=int(rng.integers(1, 9)))
    cost = 1.0 + rng.uniform(0.0, 0.8, size=int(rng.integers(1, 9)))
    return AutoK(StepCosts((1.0, *np.cumsum(cost).tolist())),
                 alpha0=float(rng.uniform(0.05, 0.95)), prior=float(rng.uniform(0.5, 4)),
                 decay=float(rng.uniform(0.5, 1.0)), window=int(rng.integers(1, 6)),
                 probe_every=int(rng.integers(1, 9)), margin=float(rng.uniform(0, 0.2)),
                 max_backoff=int(rng.integers(0, 4)))


@pytest.mark.parametrize("kind", ["auto", "adaptive", "theory"])
@pytest.mark.parametrize("seed", range(3))
def test_the_kernels_policies_choose_as_in_python(seed, kind):
    """run_kernels.next_k, compiled, against each policy's after() on random traces and
    settings (steps with no drafts among them)."""
    from specdec_lite.engine import run_kernels
    from specdec_lite.engine.decode import Generation, Step

    compiled_step.compiled_kernels()  # compiles next_k with the rest
    rng = np.random.default_rng(seed)
    for _ in range(60):
        policy = random_policy(rng, kind)
        code = compiled_step.policy_code(policy)
        assert compiled_step.CompiledStep.kernels_k_max(code) == getattr(
            policy, "k_max", getattr(getattr(policy, "costs", None), "k_max", None))
        gen = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=LOOPY)
        record = np.zeros((200, 4), dtype=np.int64)
        k = policy.start
        for n in range(int(rng.integers(1, 200))):
            drafted = 0 if rng.random() < 0.1 else k  # now and then a step with no drafts
            accepted = int(rng.integers(0, drafted + 1))
            gen.steps.append(Step((5,) * drafted, accepted, (5,) * accepted + (6,), "bonus"))
            record[n, 0], record[n, 1] = drafted, accepted
            k_python = policy.after(k, gen)
            assert run_kernels.next_k(code, k, record, n + 1) == k_python, (n, policy)
            k = k_python


def test_the_draws_advance_the_generator_as_the_python_step_does(pair, python_step):
    target, draft = pair
    rngs = [np.random.default_rng(11), np.random.default_rng(11)]
    speculative_generate(target, draft, PROMPT, k=3, max_new_tokens=20, temperature=1.0,
                         seed=rngs[0])
    python_step(lambda: speculative_generate(target, draft, PROMPT, k=3, max_new_tokens=20,
                                             temperature=1.0, seed=rngs[1]))
    assert rngs[0].random() == rngs[1].random()


def test_the_caches_end_as_the_python_steps_leave_them(pair, python_step):
    target, draft = pair
    states = []
    for run in (lambda f: f(), python_step):
        t_cache, d_cache = target.new_state(), draft.new_state()
        run(lambda t=t_cache, d=d_cache: speculative_generate(
            target.bound(t), draft.bound(d), PROMPT, k=3, max_new_tokens=20, temperature=1.0,
            seed=2))
        states.append([(c.length, c.n_causal, c.tokens[: c.length].tolist())
                       for c in (t_cache, d_cache)])
        assert np.allclose(t_cache.logits[: t_cache.length],
                           target.logits(t_cache.tokens[: t_cache.length]), atol=1e-5)
    assert states[0] == states[1]


def test_the_meter_sees_the_same_forwards(pair, python_step):
    target, draft = pair
    calls = []
    for run in (lambda f: f(), python_step):
        with ForwardMeter({"target": target, "draft": draft}) as meter:
            run(lambda: speculative_generate(target, draft, PROMPT, k=3, max_new_tokens=20,
                                             temperature=1.0, seed=5))
        calls.append(dict(meter.calls))
        assert meter.seconds > 0
    assert calls[0] == calls[1]


@pytest.mark.parametrize("temperature", [0.0, 1.0, 0.6, 1.4, 0.002])
def test_the_kernels_rows_are_the_python_steps_rows(pair, temperature):
    target, _ = pair
    rng = np.random.default_rng(4)
    compiled_kernels()  # compiles the helpers in place, rows_of among them
    for scale in (0.1, 1.0, 8.0, 40.0):
        logits = (scale * rng.standard_normal((5, CONFIG.vocab_size))).astype(np.float32)
        out = np.empty((5, CONFIG.vocab_size))
        step_kernels.rows_of(logits, temperature, out)
        want = target.rows_from_logits(logits, temperature)  # [5, V] as the Python step
        assert np.allclose(out, want, rtol=1e-12, atol=1e-300)
        assert (out.argmax(axis=1) == want.argmax(axis=1)).all()


def test_the_kernel_timer_sums_the_compiled_calls_made_while_it_is_open(pair):
    target, draft = pair
    decode = lambda: speculative_generate(target, draft, PROMPT, k=3,  # noqa: E731
                                          max_new_tokens=20, temperature=1.0, seed=5)
    decode()  # compiled before it is timed
    with kernel_timer() as timer:
        start = time.perf_counter()
        decode()
        wall = time.perf_counter() - start
    assert timer.calls == [compiled_kernels().speculative_run]
    assert 0 < timer.seconds < wall
    decode()  # closed: nothing more is counted
    assert len(timer.calls) == 1
    with ForwardMeter({"target": target, "draft": draft}) as meter:
        split = overhead_split([lambda: decode] * 3, meter)
    assert split["runs"] == 3 and split["compiled"] > 0 and split["python"] > 0
    assert split["forwards"] + split["compiled"] + split["python"] == pytest.approx(1)


def test_used_only_where_it_applies(pair):
    target, draft = pair
    bound, greedy, hot = target.bound(), Sampling(0.0), Sampling(1.0)
    own_draft = ModelDraft(draft).for_sequence(bound)
    unsure = ModelDraft(draft, min_confidence=0.5).for_sequence(bound)
    risky = ModelDraft(draft, risk_stop=RiskStop(shipped_head(), 0.5)).for_sequence(bound)
    for proposer in (own_draft, None, PromptLookup(), unsure, risky,
                     eagle_draft(target).for_sequence(bound)):
        for sampling, rule in ((hot, "exact"), (greedy, "greedy")):
            assert isinstance(compiled_step.step_for(bound, proposer, sampling, rule),
                              compiled_step.CompiledStep)
    # the whole step in the kernel only for a GPT draft on the numba backend (its early
    # stops, if any, included)
    numpy_draft = TransformerModel(DRAFT_CONFIG, random_params(DRAFT_CONFIG, 3))
    for proposer in (own_draft, unsure, risky):
        assert compiled_step.drafts_in_kernel(proposer)
    for proposer in (None, PromptLookup(), ModelDraft(numpy_draft).for_sequence(bound),
                     ModelDraft(draft)):  # the last not on a cache of its own
        assert not compiled_step.drafts_in_kernel(proposer), proposer
    eagle = eagle_draft(target)
    assert compiled_step.eagle_in_kernel(eagle.for_sequence(bound), bound) is eagle
    for proposer, run_target in ((eagle.for_sequence(target.bound()), bound),  # other features
                                 (eagle, bound),  # not the per-run view
                                 (eagle.for_sequence(bound), target)):  # no cache of its own
        assert compiled_step.eagle_in_kernel(proposer, run_target) is None
    numpy_target = TransformerModel(CONFIG, random_params(CONFIG, 0))
    for args in [(numpy_target.bound(), own_draft, hot, "exact"),  # the numpy forward
                 (target, own_draft, hot, "exact"),  # not on a cache of its own
                 (bound, own_draft, Sampling(1.0, top_k=3), "exact"),  # a cut
                 (bound, own_draft, Sampling(1.0, top_p=0.9), "exact"),
                 (bound, own_draft, hot, "typical")]:  # a lossy rule
        assert compiled_step.step_for(*args) is None, args


def test_a_run_past_the_window_fails_as_before(pair):
    target, draft = pair
    with pytest.raises(ValueError, match="max_new_tokens"):
        speculative_generate(target, draft, PROMPT, k=3, max_new_tokens=CONFIG.max_len,
                             temperature=1.0, seed=0)


def test_a_small_cache_falls_back_to_the_python_step_and_its_error(pair):
    target, draft = pair
    small = TransformerModel(CONFIG, random_params(CONFIG, 0), cache_capacity=8,
                             backend="numba")
    with pytest.raises(ValueError, match="cache capacity"):
        speculative_generate(small, draft, PROMPT, k=3, max_new_tokens=10, temperature=1.0,
                             seed=0)


# ---------------------------------------------------------------- Medusa's greedy verification

@pytest.fixture(scope="module")
def heads():
    from support import random_heads
    return random_heads(CONFIG, n_heads=3, seed=5)


def medusa_runs(target, heads, tree, rule, temperature):
    """The same Medusa run with the compiled verification and without it."""
    from specdec_lite.engine import medusa_decode

    def decode():
        return medusa_decode.medusa_generate(target, heads, PROMPT, max_new_tokens=24,
                                             temperature=temperature, tree=tree, rule=rule,
                                             seed=3)
    compiled = decode()

    def python():
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(medusa_decode, "tree_step_for", lambda *args: None)
            return decode()
    return compiled, python()


@pytest.mark.parametrize("tree_kind", ["dense", "chain"])
@pytest.mark.parametrize(("rule", "temperature"), [("greedy", 0.0), ("typical", 0.0),
                                                   ("greedy", 1.0)])
def test_medusa_is_the_same_run(pair, heads, tree_kind, rule, temperature):
    from specdec_lite.drafting.medusa import chain_tree, dense_tree
    tree = dense_tree([3, 2, 1]) if tree_kind == "dense" else chain_tree(3)
    compiled, python = medusa_runs(pair[0], heads, tree, rule, temperature)
    assert same_run(compiled, python)
    assert sum(s.n_accepted for s in compiled.steps) > 0  # some paths went below the root


def test_medusa_verification_is_used_only_where_it_is_greedy(pair, heads):
    from specdec_lite.drafting.medusa import chain_tree
    from specdec_lite.engine.medusa_decode import medusa_start
    target = pair[0]
    numpy_target = TransformerModel(CONFIG, random_params(CONFIG, 0))
    assert medusa_start(target, heads, PROMPT, max_new_tokens=4, rule="greedy").verify
    assert medusa_start(target, heads, PROMPT, max_new_tokens=4, rule="typical",
                        temperature=0.0).verify
    for run in [medusa_start(numpy_target, heads, PROMPT, max_new_tokens=4, rule="greedy"),
                medusa_start(target, heads, PROMPT, max_new_tokens=4, rule="typical",
                             temperature=1.0, seed=0),
                medusa_start(target, heads, PROMPT, max_new_tokens=4, rule="exact",
                             tree=chain_tree(3), temperature=0.0)]:
        assert run.verify is None


def test_medusa_meter_and_cache_as_the_python_step(pair, heads):
    from specdec_lite.drafting.medusa import dense_tree
    from specdec_lite.engine import medusa_decode
    target, tree = pair[0], dense_tree([3, 2, 1])
    seen = []
    for off in (False, True):
        cache = target.new_state()
        with ForwardMeter({"target": target, "heads": heads}) as meter, \
                pytest.MonkeyPatch.context() as patch:
            if off:
                patch.setattr(medusa_decode, "tree_step_for", lambda *args: None)
            medusa_decode.medusa_generate(target.bound(cache), heads, PROMPT,
                                          max_new_tokens=20, tree=tree, rule="greedy")
        seen.append((dict(meter.calls), cache.length, cache.n_causal,
                     cache.tokens[: cache.length].tolist()))
        assert np.allclose(cache.hidden[: cache.length],
                           target.hidden(cache.tokens[: cache.length]), atol=1e-5)
    assert seen[0] == seen[1]


# ---------------------------------------------------------------- proposers asked in Python

def markov_draft(vocab: int, seed: int = 8) -> MarkovModel:
    rng = np.random.default_rng(seed)
    return MarkovModel(rng.dirichlet(np.full(vocab, 0.5), size=vocab))


def eagle_draft(target: TransformerModel, seed: int = 5) -> EagleDraft:
    rng = np.random.default_rng(seed)
    arrays = {name: 0.3 * rng.standard_normal(shape)
              for name, shape in eagle_shapes(target.config.d_model).items()}
    for name in arrays:
        if name.endswith(".g"):
            arrays[name] += 1.0
    return EagleDraft(target, EagleWeights.from_arrays(arrays, target.config.n_head))


LOOPY = np.array([1, 5, 2, 7, 3, 1, 5, 2, 7, 3, 1, 5], dtype=np.int64)  # prompt lookup finds


@pytest.mark.parametrize("kind", ["lookup", "markov", "unsure", "eagle"])
@pytest.mark.parametrize(("temperature", "rule"),
                         [(0.0, "greedy"), (0.0, "exact"), (0.6, "exact"), (1.0, "exact"),
                          (1.0, "greedy")])
def test_other_proposers_are_verified_as_the_python_step_does(pair, python_step, kernel_calls,
                                                              kind, temperature, rule):
    target, draft = pair
    proposer = {"lookup": PromptLookup(), "markov": ModelDraft(markov_draft(13)),
                "unsure": ModelDraft(draft, min_confidence=0.4),
                "eagle": eagle_draft(target)}[kind]
    kernels = compiled_step.compiled_kernels()
    for seed in range(3):
        def decode(seed=seed):
            return speculative_generate(target, proposer, LOOPY, k=4, max_new_tokens=24,
                                        temperature=temperature, rule=rule, seed=seed)
        kernel_calls.clear()
        compiled = decode()
        if kind != "markov":  # drafted in a kernel at a fixed k: one call
            assert kernel_calls == [{"unsure": kernels.speculative_run,
                                     "eagle": kernels.eagle_run,
                                     "lookup": kernels.lookup_run}[kind]]
        else:  # asked in Python, every step verified compiled
            assert len(kernel_calls) == len(compiled.steps)
            drafting = [kernel for kernel, step
                        in zip(kernel_calls, compiled.steps, strict=True) if step.proposed]
            assert drafting and all(kernel is kernels.verify for kernel in drafting)
        python = python_step(decode)
        assert same_run(compiled, python), (kind, seed, compiled.tokens, python.tokens)
        assert any(step.proposed for step in compiled.steps)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_eagle_kernel_leaves_the_drafter_cache_as_the_python_step(pair, python_step,
                                                                      temperature):
    """The drafter's own cache after a run (entries, the tokens they were built from,
    their count) is the Python step's, so either step can take over from the other."""
    target = pair[0]
    drafter = eagle_draft(target)
    states = []
    for run in (lambda f: f(), python_step):
        bound = target.bound(target.new_state())
        view = drafter.for_sequence(bound)
        run(lambda b=bound, v=view: speculative_generate(
            b, v, LOOPY, k=3, max_new_tokens=20, temperature=temperature, seed=4))
        states.append(view.state)
    compiled, python = states
    assert compiled.length == python.length > len(LOOPY)
    n = compiled.length
    assert compiled.tokens[: n + 1].tolist() == python.tokens[: n + 1].tolist()
    assert np.allclose(compiled.kv[:, :, :n], python.kv[:, :, :n], atol=1e-6)


@pytest.mark.parametrize("kind", ["lookup", "eagle"])
def test_other_proposers_keep_the_generator_meter_and_cache_as_the_python_step(pair,
                                                                               python_step,
                                                                               kind):
    """The same forwards too: the EAGLE drafter runs the target in Python to read its
    features, and the compiled verification must start from where that left the cache."""
    target = pair[0]
    proposer = PromptLookup() if kind == "lookup" else eagle_draft(target)
    results = []
    for run in (lambda f: f(), python_step):
        cache, rng = target.new_state(), np.random.default_rng(21)
        with ForwardMeter({"target": target}) as meter:
            run(lambda c=cache, r=rng: speculative_generate(
                target.bound(c), proposer, LOOPY, k=3, max_new_tokens=20,
                temperature=1.0, seed=r))
        results.append((rng.random(), dict(meter.calls), cache.length, cache.n_causal,
                        cache.tokens[: cache.length].tolist()))
        assert np.allclose(cache.logits[: cache.length],
                           target.logits(cache.tokens[: cache.length]), atol=1e-5)
    assert results[0] == results[1]


@pytest.mark.parametrize("max_new_tokens", [1, 4])
def test_a_step_with_no_draft_from_the_proposer_is_the_python_steps_bonus(pair, python_step,
                                                                         max_new_tokens):
    """A step with room for drafts where prompt lookup finds none (4 tokens: the first
    step may draft 3), and a step with no room (1 token: a plain step)."""
    target = pair[0]
    prompt = np.arange(10, dtype=np.int64)  # no token repeats: prompt lookup finds nothing
    def decode():
        return speculative_generate(target, PromptLookup(), prompt, k=3,
                                    max_new_tokens=max_new_tokens, temperature=1.0, seed=6)
    compiled = decode()
    assert same_run(compiled, python_step(decode))
    assert compiled.steps[0].proposed == () and compiled.steps[0].extra == "bonus"
