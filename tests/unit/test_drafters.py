"""Proposers (prompt lookup, a model draft with a confidence stop) and draft-length
policies: what they propose, how they fail on bad input, and that the decoders using
them emit the target's greedy tokens at T = 0 (their exactness at T > 0 is tested in
tests/statistical/test_drafters_exact.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support import PROMPTS

from specdec_lite import generate, load_pretrained, speculative_generate
from specdec_lite.drafting.draft_length import (
    AdaptiveK,
    AutoK,
    FixedK,
    StepCosts,
    TheoryK,
    as_draft_length,
)
from specdec_lite.drafting.proposers import Draft, ModelDraft, PromptLookup, lookup
from specdec_lite.drafting.stop_head import RiskStop, shipped_head
from specdec_lite.engine.decode import Generation, Step
from specdec_lite.rules.distributions import Sampling
from specdec_lite.rules.theory import optimal_k

GREEDY = Sampling.checked(0.0)
V = 96  # the shipped models' vocabulary (checked in the fixture)


@pytest.fixture(scope="module")
def shipped():
    models = load_pretrained()
    assert models.target.vocab_size == V
    return models


def ids(*tokens: int) -> np.ndarray:
    return np.array(tokens, dtype=np.int64)


# ---------------------------------------------------------------- prompt lookup


def test_lookup_copies_what_followed_the_latest_match():
    context = ids(5, 1, 2, 9, 9, 1, 2, 7, 8, 1, 2)
    # "1 2" occurs at 1 and 5; the latest earlier one (5) was followed by 7 8 1 2
    assert lookup(context, 3, max_ngram=2).tolist() == [7, 8, 1]
    assert lookup(context, 10, max_ngram=2).tolist() == [7, 8, 1, 2]  # up to the end


def test_lookup_prefers_the_longest_ngram():
    context = ids(3, 1, 2, 4, 0, 2, 6, 3, 1, 2)
    # "2" alone last occurred before 6; "1 2" and "3 1 2" only before 4
    assert lookup(context, 2, max_ngram=1).tolist() == [6, 3]
    assert lookup(context, 2, max_ngram=3).tolist() == [4, 0]


def test_lookup_finds_nothing_without_a_match():
    assert lookup(ids(1, 2, 3, 4), 3, max_ngram=3).size == 0
    assert lookup(ids(7), 3, max_ngram=3).size == 0
    assert lookup(ids(1, 2, 1, 3), 3, max_ngram=3, min_ngram=2).size == 0  # "1 3" is new


def brute_force_lookup(context: np.ndarray, k: int, max_ngram: int, min_ngram: int) -> list:
    """The definition, spelled out: for g from the longest down, every earlier g-gram
    compared with the last one, the latest match's continuation."""
    n = len(context)
    for g in range(min(max_ngram, n - 1), min_ngram - 1, -1):
        tail = context[n - g:].tolist()
        starts = [h for h in range(n - g) if context[h : h + g].tolist() == tail]
        if starts:
            return context[starts[-1] + g : starts[-1] + g + k].tolist()
    return []


@pytest.mark.parametrize("ids", [np.arange(5), np.array([0, 1, 256, 65536, 1 << 24, 257])],
                         ids=["small ids", "ids whose bytes straddle"])
def test_lookup_agrees_with_the_brute_force_definition_on_random_contexts(ids):
    """Few distinct tokens, so many repeats; the second set's ids share bytes across their
    4-byte words, so a byte search that accepted a hit off a word's start would differ."""
    rng = np.random.default_rng(7)
    for _ in range(3000):
        n, vocab = int(rng.integers(1, 30)), int(rng.integers(1, len(ids) + 1))
        context = ids[rng.integers(0, vocab, n)]
        max_ngram = int(rng.integers(1, 6))
        min_ngram, k = int(rng.integers(1, max_ngram + 1)), int(rng.integers(1, 7))
        found = lookup(context, k, max_ngram, min_ngram)
        assert found.dtype == np.int64
        assert found.tolist() == brute_force_lookup(context, k, max_ngram, min_ngram), (
            context.tolist(), k, max_ngram, min_ngram)


def test_the_drafters_are_importable_from_the_package():
    import specdec_lite

    assert specdec_lite.PromptLookup is PromptLookup and specdec_lite.ModelDraft is ModelDraft
    assert specdec_lite.AutoK is AutoK and specdec_lite.StepCosts is StepCosts


def test_prompt_lookup_is_deterministic_and_free():
    draft = PromptLookup().propose(ids(1, 2, 3, 1, 2), 4, GREEDY, np.random.default_rng(0))
    assert draft.tokens.tolist() == [3, 1, 2] and draft.q is None and draft.n_calls == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [({"max_ngram": 0}, ValueError, "max_ngram"), ({"min_ngram": 0}, ValueError, "min_ngram"),
     ({"max_ngram": 2, "min_ngram": 3}, ValueError, "min_ngram"),
     ({"max_ngram": 2.0}, TypeError, "max_ngram"), ({"max_ngram": True}, TypeError, "max_ngram")],
)
def test_prompt_lookup_rejects_bad_sizes(kwargs, error, name):
    with pytest.raises(error, match=name):
        PromptLookup(**kwargs)


# ---------------------------------------------------------------- model draft


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (1.5, ValueError),
                                               (float("nan"), ValueError), ("0.5", TypeError)])
def test_min_confidence_is_checked(shipped, value, error):
    with pytest.raises(error, match="min_confidence"):
        ModelDraft(shipped.draft, min_confidence=value)


def test_model_draft_without_a_threshold_drafts_k(shipped):
    prompt = shipped.tokenizer.encode(PROMPTS[0])
    draft = ModelDraft(shipped.draft).propose(prompt, 4, GREEDY, np.random.default_rng(0))
    assert len(draft.tokens) == 4 and draft.n_calls == 4 and draft.q.shape == (4, V)


def test_confidence_stop_drafts_fewer_tokens(shipped):
    prompt = shipped.tokenizer.encode(PROMPTS[0])
    gen = speculative_generate(shipped.target, ModelDraft(shipped.draft, min_confidence=0.9),
                               prompt, k=6, max_new_tokens=40, temperature=0)
    lengths = [len(s.proposed) for s in gen.steps[:-1]]
    assert min(lengths) < 6 and gen.n_draft_calls == sum(len(s.proposed) for s in gen.steps)


# ---------------------------------------------------------------- greedy identity


@pytest.mark.parametrize("prompt_text", PROMPTS[:3])
@pytest.mark.parametrize(
    ("make_draft", "k"),
    [(lambda m: PromptLookup(), 4), (lambda m: PromptLookup(max_ngram=1), 8),
     (lambda m: ModelDraft(m.draft, min_confidence=0.6), 5),
     (lambda m: ModelDraft(m.draft, risk_stop=RiskStop(shipped_head(), 0.4)), 8),
     (lambda m: m.draft, AdaptiveK()), (lambda m: m.draft, TheoryK(c=0.1)),
     (lambda m: PromptLookup(), AdaptiveK(start=2, k_max=8))],
    ids=["lookup", "lookup-unigram", "confidence", "risk-stop", "adaptive", "theory",
         "lookup-adaptive"],
)
def test_greedy_output_equals_the_targets(shipped, prompt_text, make_draft, k):
    prompt = shipped.tokenizer.encode(prompt_text)
    expected = generate(shipped.target, prompt, max_new_tokens=48, temperature=0).tokens
    gen = speculative_generate(shipped.target, make_draft(shipped), prompt, k=k,
                               max_new_tokens=48, temperature=0)
    assert gen.tokens.tolist() == expected.tolist()


def test_prompt_lookup_accepts_copies_and_costs_no_draft_calls(shipped):
    text = "for i in range(10):\n    print(i)\nfor i in range(10):\n    print("
    prompt = shipped.tokenizer.encode(text)
    gen = speculative_generate(shipped.target, PromptLookup(), prompt, k=6, max_new_tokens=30,
                               temperature=0)
    assert gen.n_draft_calls == 0 and gen.n_accepted > 0 and gen.tau > 1


def test_fixed_k_is_the_int(shipped):
    prompt = shipped.tokenizer.encode(PROMPTS[1])
    a = speculative_generate(shipped.target, shipped.draft, prompt, k=3, max_new_tokens=30,
                             seed=7)
    b = speculative_generate(shipped.target, shipped.draft, prompt, k=FixedK(3),
                             max_new_tokens=30, seed=7)
    assert a.tokens.tolist() == b.tokens.tolist() and a.steps == b.steps


def test_same_seed_same_tokens_with_lookup_and_a_policy(shipped):
    prompt = shipped.tokenizer.encode(PROMPTS[2])
    runs = [speculative_generate(shipped.target, PromptLookup(), prompt, k=AdaptiveK(),
                                 max_new_tokens=40, seed=11).tokens.tolist() for _ in range(2)]
    assert runs[0] == runs[1]


# ---------------------------------------------------------------- policies


def trace(*steps: tuple[int, int]) -> Generation:
    """A trace whose steps proposed n tokens and accepted a of them."""
    gen = Generation(tokens=ids(), prompt=ids(0))
    gen.steps = [Step(tuple(range(n)), a, tuple(range(a + 1)), "bonus" if a == n else
                      "correction") for n, a in steps]
    return gen


def test_adaptive_k_grows_on_full_acceptance_and_shrinks_otherwise():
    policy = AdaptiveK(start=4, k_min=2, k_max=7)
    assert policy.after(4, trace((4, 4))) == 6
    assert policy.after(6, trace((6, 6))) == 7  # capped
    assert policy.after(4, trace((4, 3))) == 3
    assert policy.after(2, trace((2, 0))) == 2  # floored
    assert policy.after(5, trace((0, 0))) == 5  # nothing drafted: unchanged


def test_theory_k_follows_the_running_alpha():
    policy = TheoryK(c=0.1, alpha0=0.6, prior=4, k_max=12)
    assert policy.start == optimal_k(0.6, 0.1, 12)
    good = trace(*[(4, 4)] * 10)  # 40 of 40 accepted (checked 40)
    bad = trace(*[(4, 0)] * 10)  # 0 accepted of 10 checked
    assert policy.alpha(good) == pytest.approx((2.4 + 40) / 44)
    assert policy.alpha(bad) == pytest.approx(2.4 / 14)
    assert policy.after(4, good) > policy.start > policy.after(4, bad)
    assert policy.after(4, good) == optimal_k(policy.alpha(good), 0.1, 12)


@pytest.mark.parametrize(
    ("make", "error", "name"),
    [(lambda: FixedK(-1), ValueError, "k"), (lambda: AdaptiveK(start=0), ValueError, "start"),
     (lambda: AdaptiveK(k_min=3, k_max=2), ValueError, "k_max"),
     (lambda: AdaptiveK(start=9, k_max=8), ValueError, "start"),
     (lambda: TheoryK(c=-1), ValueError, "c"), (lambda: TheoryK(c=0.1, alpha0=1), ValueError,
                                                "alpha0"),
     (lambda: TheoryK(c=0.1, prior=0), ValueError, "prior"),
     (lambda: as_draft_length("3"), TypeError, "k"), (lambda: as_draft_length(0), ValueError, "k")],
)
def test_policies_reject_bad_settings(make, error, name):
    with pytest.raises(error, match=name):
        make()


# ---------------------------------------------------------------- a proposer that misbehaves


class Scripted:
    """A proposer that answers whatever it is told to."""

    def __init__(self, answer) -> None:
        self.answer = answer

    def propose(self, context, k, sampling, rng):
        return self.answer(k)


@pytest.mark.parametrize(
    ("answer", "error"),
    [(lambda k: Draft(ids(*range(k + 1)), None, 0), ValueError),  # too many
     (lambda k: Draft(ids(1, V), None, 0), ValueError),  # outside the vocabulary
     (lambda k: Draft(np.array([0.5]), None, 0), ValueError),  # not ids
     (lambda k: Draft(ids(1), np.zeros((1, V)), 0), ValueError),  # q gives its token 0
     (lambda k: Draft(ids(1), np.ones((2, V)) / V, 0), ValueError),  # q's shape
     (lambda k: [1, 2], TypeError)],  # not a Draft
    ids=["too-many", "out-of-vocab", "floats", "q-zero", "q-shape", "not-a-draft"],
)
def test_a_bad_proposal_is_refused_with_the_proposers_name(shipped, answer, error):
    prompt = shipped.tokenizer.encode(PROMPTS[0])
    with pytest.raises(error, match="proposer"):
        speculative_generate(shipped.target, Scripted(answer), prompt, k=3, max_new_tokens=5,
                             temperature=0)


def test_a_draft_that_is_neither_model_nor_proposer_is_refused(shipped):
    with pytest.raises(TypeError, match="draft"):
        speculative_generate(shipped.target, object(), [1, 2], k=3, max_new_tokens=5)


# ---------------------------------------------------------------- the batched engine


def test_batched_prompt_lookup_equals_the_single_sequence_loop(shipped):
    from specdec_lite import speculative_generate_batch

    prompts = [shipped.tokenizer.encode(p) for p in PROMPTS[:4]]
    for temperature in (0.0, 1.0):
        batch = speculative_generate_batch(shipped.target, PromptLookup(), prompts, k=5,
                                           max_new_tokens=32, temperature=temperature,
                                           seeds=[3, 4, 5, 6])
        for prompt, seed, gen in zip(prompts, [3, 4, 5, 6], batch, strict=True):
            alone = speculative_generate(shipped.target, PromptLookup(), prompt, k=5,
                                         max_new_tokens=32, temperature=temperature, seed=seed)
            assert gen.tokens.tolist() == alone.tokens.tolist()
            assert gen.steps == alone.steps and gen.n_draft_calls == 0


# ---------------------------------------------------------------- step costs, automatic policy


def test_step_costs_from_ratio_and_best_k():
    costs = StepCosts.from_ratio([1.0, 1.1, 1.2, 1.3, 1.4], c=0.1)
    assert costs.step_cost == pytest.approx((1.0, 1.2, 1.4, 1.6, 1.8)) and costs.k_max == 4
    assert costs.best_k(0.95) == 4  # the longest drafts pay when almost all are accepted
    assert costs.best_k(0.05) == 0  # nothing pays: plain decoding
    flat = StepCosts((1.0, 1.0, 1.0))
    assert flat.best_k(0.5) == 2


@pytest.mark.parametrize("cost", [(1.0,), (2.0, 3.0), (1.0, float("nan")), (1.0, 0.0),
                                  ((1.0, 2.0),)])
def test_step_costs_are_checked(cost):
    with pytest.raises(ValueError, match="step_cost"):
        StepCosts(cost)


def test_auto_k_stops_drafting_when_nothing_pays_and_probes_later():
    costly = StepCosts((1.0, 1.9, 2.8))  # a step with one draft costs 1.9 plain steps
    policy = AutoK(costly, alpha0=0.5, probe_every=3)
    assert policy.start == 0
    plain = trace(*[(0, 0)] * 2)
    assert policy.after(0, plain) == 0
    assert policy.after(0, trace(*[(0, 0)] * 3)) == 1  # three plain steps: one probe
    cheap = StepCosts((1.0, 1.05, 1.1, 1.15))
    eager = AutoK(cheap, alpha0=0.5)
    assert eager.after(3, trace((3, 3), (3, 3), (3, 3))) == 3
    assert eager.alpha(trace((3, 0), (3, 3))) > eager.alpha(trace((3, 3), (3, 0)))  # recency


@pytest.mark.parametrize(
    ("make", "error", "name"),
    [(lambda: AutoK((1.0, 2.0)), TypeError, "costs"),
     (lambda: AutoK(StepCosts((1.0, 2.0)), decay=0), ValueError, "decay"),
     (lambda: AutoK(StepCosts((1.0, 2.0)), probe_every=0), ValueError, "probe_every")],
)
def test_auto_k_rejects_bad_settings(make, error, name):
    with pytest.raises(error, match=name):
        make()


def test_time_steps_prices_each_k_by_its_median(monkeypatch):
    from specdec_lite.engine import costs as costs_module

    clock = [0.0]
    monkeypatch.setattr(costs_module.time, "perf_counter", lambda: clock[0])

    def run_step(k: int) -> None:
        clock[0] += 1.0 + 0.5 * k  # a step with k drafts takes 1 + k/2 time units

    measured = costs_module.time_steps(run_step, 4, repeats=3)
    assert measured.step_cost == pytest.approx((1.0, 1.5, 2.0, 2.5, 3.0))


def test_time_steps_divides_a_call_by_the_steps_it_reports(monkeypatch):
    """A run_step that takes several steps in one call and says how many is priced per
    step: k = 2 here takes 3 steps of 2 units in one call, k = 1 one step of 1.5."""
    from specdec_lite.engine import costs as costs_module

    clock = [0.0]
    monkeypatch.setattr(costs_module.time, "perf_counter", lambda: clock[0])

    def run_step(k: int) -> int | None:
        steps = {0: 1, 1: 1, 2: 3}[k]
        clock[0] += steps * (1.0 + 0.5 * k)
        return steps if k == 2 else None  # None: the call is one step

    measured = costs_module.time_steps(run_step, 2, repeats=3)
    assert measured.step_cost == pytest.approx((1.0, 1.5, 2.0))


def test_auto_drafts_only_when_it_expects_to_beat_plain_by_the_margin():
    costs = StepCosts((1.0, 1.2))  # k = 1 at alpha = 0.3: 1.3 tokens for 1.2 -> rate 1.083
    assert costs.best_k(0.3) == 1 and costs.best_k(0.3, margin=0.05) == 1
    assert costs.best_k(0.3, margin=0.1) == 0  # 1.083 is not above 1.1
    assert costs.best_k(0.15, margin=0.0) == 0  # 1.15 / 1.2 < 1: plain at any margin
    trace = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=ids(1, 2))
    trace.steps = [Step((5,), 0, (6,), "correction")] * 3  # an estimate well below 0.3
    assert AutoK(costs, margin=0.0).after(1, trace) == 0
    with pytest.raises(ValueError, match="margin"):
        AutoK(costs, margin=-0.1)


def test_auto_waits_twice_as_long_after_each_fruitless_probe():
    plain, rejected = Step((), 0, (1,), "bonus"), Step((5,), 0, (6,), "correction")
    accepted = Step((5,), 1, (5, 6), "bonus")
    policy = AutoK(StepCosts((1.0, 3.0)), probe_every=4, max_backoff=2)  # k = 1 never pays
    assert not policy.probe_due([plain] * 3) and policy.probe_due([plain] * 4)
    once = [plain] * 4 + [rejected]
    assert not policy.probe_due(once + [plain] * 7) and policy.probe_due(once + [plain] * 8)
    twice = once + [plain] * 8 + [rejected]
    assert not policy.probe_due(twice + [plain] * 15) and policy.probe_due(twice + [plain] * 16)
    thrice = twice + [plain] * 16 + [rejected]  # max_backoff = 2: the wait stays at 4 * 2^2
    assert policy.probe_due(thrice + [plain] * 16)
    # an accepted probe that the policy follows with plain steps (the estimate still says
    # drafting does not pay) counts as fruitless too; one it follows with more drafting
    # starts the wait again at 4
    fruitless = once + [plain] * 8 + [accepted]
    assert not policy.probe_due(fruitless + [plain] * 15)
    assert policy.probe_due(fruitless + [plain] * 16)
    reset = twice + [plain] * 16 + [accepted, Step((5, 6), 2, (5, 6, 7), "bonus")]
    assert not policy.probe_due(reset + [plain] * 3) and policy.probe_due(reset + [plain] * 4)
    after_drafting = [Step((5, 6), 0, (7,), "correction"), rejected]  # not a probe
    assert policy.probe_due(after_drafting + [plain] * 4)
    trace = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=ids(1, 2))
    trace.steps = once + [plain] * 8
    assert policy.after(0, trace) == 1


def test_auto_says_how_many_plain_steps_follow_for_sure():
    """``steady(0, gen)`` counts the plain steps after which the policy says 0 again, so
    a decoder may take them in one call: it ends at the next probe, and where the oldest
    drafting step the estimate reads falls out of it (here the prior alone would pay)."""
    plain, rejected = Step((), 0, (1,), "bonus"), Step((5, 6), 0, (7,), "correction")
    policy = AutoK(StepCosts((1.0, 1.1)), window=4, alpha0=0.6, probe_every=16)
    trace = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=ids(1, 2))

    def plain_answers(n: int) -> list[int]:  # after() after each of n more plain steps
        answers = []
        for _ in range(n):
            trace.steps.append(plain)
            answers.append(policy.after(0, trace))
        return answers

    trace.steps = [rejected] * 4 + [plain] * 10
    assert policy.after(0, trace) == 0
    ahead = policy.steady(0, trace)
    assert ahead == 6 and plain_answers(ahead) == [0] * 5 + [1]  # the probe after 16
    never = AutoK(StepCosts((1.0, 3.0)), window=4, alpha0=0.6, probe_every=64)
    trace.steps = [plain] * 10  # no drafting step read: only the probe ends the stretch
    assert never.steady(0, trace) == 54
    trace.steps = [rejected] * 4 + [plain] * 2
    policy = AutoK(StepCosts((1.0, 1.1)), window=4, alpha0=0.6, probe_every=64)
    ahead = policy.steady(0, trace)  # the oldest rejection leaves the last 32 steps
    assert ahead == 32 - 6 + 1 and plain_answers(ahead) == [0] * (ahead - 1) + [1]
    assert policy.steady(2, trace) == 1 and FixedK(3).steady(3, trace) is None


@pytest.mark.parametrize("seed", range(6))
def test_auto_steady_plain_steps_are_the_ones_it_chooses_step_by_step(seed):
    rng = np.random.default_rng(seed)
    plain = Step((), 0, (1,), "bonus")
    for _ in range(40):
        cost = 1.0 + rng.uniform(0.05, 1.5)
        policy = AutoK(StepCosts((1.0, cost, 2 * cost - 1.0)),
                       alpha0=float(rng.uniform(0.1, 0.9)), window=int(rng.integers(1, 5)),
                       probe_every=int(rng.integers(1, 9)), max_backoff=int(rng.integers(0, 3)))
        trace = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=ids(1, 2))
        k = policy.start
        for _ in range(int(rng.integers(0, 120))):  # a random trace under the policy
            if k == 0:
                trace.steps.append(plain)
            else:
                n = int(rng.integers(0, k + 1))
                trace.steps.append(Step((5,) * k, n, (5,) * n + (6,), "bonus"))
            k = policy.after(k, trace)
        if k != 0:
            continue
        ahead = policy.steady(0, trace)
        for _ in range(ahead - 1):
            trace.steps.append(plain)
            assert policy.after(0, trace) == 0


def test_auto_estimates_alpha_from_its_last_drafting_steps_however_far_back():
    """Plain steps in between do not wash the estimate back to the prior."""
    plain, rejected = Step((), 0, (1,), "bonus"), Step((5, 6), 0, (7,), "correction")
    policy = AutoK(StepCosts((1.0, 1.1)), window=4, alpha0=0.6)
    trace = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=ids(1, 2))
    trace.steps = [rejected] * 4
    low = policy.alpha(trace)
    trace.steps = [rejected] * 4 + [plain] * 20
    assert policy.alpha(trace) == pytest.approx(low) and low < 0.2  # the prior still weighs
    trace.steps = [rejected] * 4 + [plain] * 40  # past 8 x window: only the prior is left
    assert policy.alpha(trace) == pytest.approx(0.6)


def test_time_steps_never_prices_more_drafts_below_fewer(monkeypatch):
    from specdec_lite.engine import costs as costs_module

    clock = [0.0]
    monkeypatch.setattr(costs_module.time, "perf_counter", lambda: clock[0])
    seconds = {0: 1.0, 1: 1.4, 2: 1.3, 3: 1.6, 4: 1.5}  # k = 2 and 4 timed low by noise

    def run_step(k: int) -> None:
        clock[0] += seconds[k]

    measured = costs_module.time_steps(run_step, 4, repeats=3)
    assert measured.step_cost == pytest.approx((1.0, 1.4, 1.4, 1.6, 1.6))


# ---------------------------------------------------------------- named policies


@pytest.mark.parametrize("policy", ["fixed", "heuristic", "confidence", "specdec++", "auto"])
def test_every_named_policy_is_greedy_identical(shipped, policy):
    prompt = shipped.tokenizer.encode(PROMPTS[0])
    expected = generate(shipped.target, prompt, max_new_tokens=48, temperature=0).tokens
    gen = speculative_generate(shipped.target, shipped.draft, prompt, k=5, policy=policy,
                               max_new_tokens=48, temperature=0)
    assert gen.tokens.tolist() == expected.tolist()


def test_auto_with_lookup_is_greedy_identical_and_measures_once(shipped):
    from specdec_lite.engine import decode

    lookup_draft = PromptLookup()
    prompt = shipped.tokenizer.encode(PROMPTS[3])
    expected = generate(shipped.target, prompt, max_new_tokens=40, temperature=0).tokens
    for _ in range(2):
        gen = speculative_generate(shipped.target, lookup_draft, prompt, k=6, policy="auto",
                                   max_new_tokens=40, temperature=0)
        assert gen.tokens.tolist() == expected.tolist()
    measured = [v for key, v in decode._MEASURED.items()
                if key[1] == id(PromptLookup) and key[3] == 6]
    assert len(measured) == 1 and measured[0][2].k_max == 6


def test_a_saved_auto_policy_is_reproducible(shipped):
    prompt = shipped.tokenizer.encode(PROMPTS[1])
    policy = AutoK(StepCosts((1.0, 1.3, 1.5, 1.7)))
    runs = [speculative_generate(shipped.target, shipped.draft, prompt, k=policy,
                                 max_new_tokens=40, seed=9) for _ in range(2)]
    assert runs[0].tokens.tolist() == runs[1].tokens.tolist() and runs[0].steps == runs[1].steps


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [({"policy": "sometimes"}, ValueError, "policy"), ({"policy": 3}, ValueError, "policy"),
     ({"policy": "auto", "k": AdaptiveK()}, TypeError, "k"),
     ({"policy": "heuristic", "k": 0}, ValueError, "k")],
)
def test_bad_policies_name_the_parameter(shipped, kwargs, error, name):
    kwargs = {"k": 3, **kwargs}
    with pytest.raises(error, match=name):
        speculative_generate(shipped.target, shipped.draft, [1, 2], max_new_tokens=5, **kwargs)


@pytest.mark.parametrize("policy", ["confidence", "specdec++"])
def test_a_stop_policy_needs_a_draft_model(shipped, policy):
    with pytest.raises(ValueError, match=re.escape(f"policy '{policy}' needs a draft model")):
        speculative_generate(shipped.target, PromptLookup(), [1, 2], k=3, policy=policy,
                             max_new_tokens=5)


def test_best_rate_k_agrees_with_the_theory_module():
    from specdec_lite.drafting.draft_length import best_rate_k
    from specdec_lite.rules.theory import expected_tokens_per_step

    for alpha in np.linspace(0.0, 0.995, 60):
        for c in (0.0, 0.05, 0.1, 0.3, 1.0):
            cost = tuple(k * c + 1.0 for k in range(11))
            assert best_rate_k(alpha, cost, k_min=1) == optimal_k(alpha, c, 10)
        measured = (1.0, 1.4, 1.6, 1.9, 2.6)
        rates = np.asarray(expected_tokens_per_step(alpha, np.arange(5))) / np.array(measured)
        assert best_rate_k(alpha, measured) == int(np.argmax(rates))


def test_auto_costs_times_steps_in_a_row_as_a_run_takes_them(shipped):
    """Each timing of a k is TIMED_STEPS steps, each after the tokens the step before
    emitted; a prompt near the window is cut so that they fit."""
    from specdec_lite.engine import decode

    contexts: list[int] = []

    class CountingLookup(PromptLookup):  # a class of its own: timed afresh
        def propose(self, context, k, sampling, rng):
            contexts.append(len(context))
            return super().propose(context, k, sampling, rng)

    prompt = shipped.tokenizer.encode(PROMPTS[2])
    decode.auto_costs(shipped.target, CountingLookup(), prompt, k=2, temperature=0)
    runs = [contexts[i : i + decode.TIMED_STEPS]
            for i in range(0, len(contexts), decode.TIMED_STEPS)]
    assert len(runs) == 2 * 16  # k = 1 and 2, one warm-up round and 15 timed
    for run in runs:
        assert run[0] == len(prompt) and all(b > a for a, b in zip(run, run[1:], strict=False))

    class Another(PromptLookup):
        pass

    window = shipped.target.config.max_len
    long_prompt = np.resize(prompt, window - 2)
    costs = decode.auto_costs(shipped.target, Another(), long_prompt, k=4, temperature=0)
    assert costs.k_max == 4


def test_auto_costs_measures_once_per_drafter_class_and_feeds_auto_k(shipped):
    from specdec_lite.engine.decode import auto_costs

    prompt = shipped.tokenizer.encode(PROMPTS[2])
    costs = auto_costs(shipped.target, PromptLookup(), prompt, k=5, temperature=0)
    assert costs.k_max == 5 and costs.step_cost[0] == 1.0
    assert auto_costs(shipped.target, PromptLookup(max_ngram=2), prompt, k=5,
                      temperature=0) is costs  # another lookup object: the same table
    expected = generate(shipped.target, prompt, max_new_tokens=30, temperature=0).tokens
    gen = speculative_generate(shipped.target, PromptLookup(), prompt, k=AutoK(costs),
                               max_new_tokens=30, temperature=0)
    assert gen.tokens.tolist() == expected.tolist()
    with pytest.raises(ValueError, match="k"):
        auto_costs(shipped.target, shipped.draft, prompt, k=0)
