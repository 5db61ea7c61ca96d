"""Decoders: greedy equivalence, budgets, EOS, traces, and τ against theory.

Temperature 0: speculative decoding with the exact, greedy and typical rules
emits the target's greedy tokens exactly. So does the threshold rule: at T = 0
both p and q are one-hot, so p/q is 1 for a draft token equal to argmax p and 0
otherwise; with θ < 1 it accepts exactly the greedy matches, with θ ≥ 1 it
accepts nothing, and either way the correction is sampled from the one-hot p,
i.e. it is argmax p. Only the acceptance rate differs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from specdec_lite import (
    CharTokenizer,
    MarkovModel,
    NGramModel,
    TableModel,
    generate,
    load_text,
    speculative_generate,
    verify,
)
from specdec_lite.rules.theory import acceptance_probability, expected_tokens_per_step

RULE_CASES = [
    ("exact", {}),
    ("greedy", {}),
    ("typical", {}),
    ("threshold", {"theta": 0.5}),
    ("threshold", {"theta": 2.0}),
]
RULE_IDS = ["exact", "greedy", "typical", "threshold-0.5", "threshold-2"]


def markov(seed: int, V: int = 6, concentration: float = 0.5) -> MarkovModel:
    return MarkovModel(np.random.default_rng(seed).dirichlet(np.full(V, concentration), size=V))


@pytest.fixture(scope="module")
def ngrams():
    tok = CharTokenizer.ascii()
    ids = tok.encode(load_text("train")[:200_000])
    target = NGramModel(5, tok.vocab_size).fit(ids)
    draft = NGramModel(3, tok.vocab_size).fit(ids)
    return target, draft, tok.encode("def __init__(s")


def check_trace(gen, max_new_tokens: int) -> None:
    assert len(gen.tokens) <= max_new_tokens
    emitted = [t for s in gen.steps for t in s.emitted]
    assert emitted == gen.tokens.tolist()
    assert gen.n_target_calls == len(gen.steps)
    assert gen.n_draft_calls == sum(len(s.proposed) for s in gen.steps) == gen.n_proposed
    assert gen.accepted == [s.n_accepted for s in gen.steps]
    for s in gen.steps:
        assert 1 <= len(s.emitted) <= s.n_accepted + 1 and s.n_accepted <= len(s.proposed)
        assert list(s.emitted[: s.n_accepted]) == list(s.proposed[: len(s.emitted)])[: s.n_accepted]
        assert s.extra in ("correction", "bonus", "sample")
    if gen.n_proposed:
        assert gen.acceptance_rate == sum(gen.accepted) / gen.n_proposed
    if gen.n_target_calls:
        assert gen.tau == len(gen.tokens) / gen.n_target_calls


def greedy_reference(model, prompt, n: int) -> list[int]:
    """Greedy decoding written out: append argmax of the last row n times."""
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(np.argmax(model.probs(np.array(seq))[-1])))
    return seq[len(prompt) :]


def test_generate_greedy_matches_reference():
    model = markov(0)
    gen = generate(model, [1], max_new_tokens=15, temperature=0)
    assert gen.tokens.tolist() == greedy_reference(model, [1], 15)
    assert gen.n_target_calls == 15 and gen.n_draft_calls == 0 and gen.tau == 1.0
    check_trace(gen, 15)


@pytest.mark.parametrize(("rule", "params"), RULE_CASES, ids=RULE_IDS)
def test_greedy_speculative_equals_greedy_target_ngram(ngrams, rule, params):
    target, draft, prompt = ngrams
    n = 20
    want = generate(target, prompt, max_new_tokens=n, temperature=0).tokens.tolist()
    assert want == greedy_reference(target, prompt, n)
    # θ ≥ 1 accepts nothing at T = 0 (slowest case): fewer k there; the Markov test covers 1..8
    for k in range(1, 9) if params.get("theta", 0) < 1 else (1, 8):
        gen = speculative_generate(
            target, draft, prompt, k=k, max_new_tokens=n, temperature=0, rule=rule, **params
        )
        assert gen.tokens.tolist() == want, (rule, k)
        check_trace(gen, n)
        if rule == "threshold" and params["theta"] >= 1:
            assert gen.acceptance_rate == 0.0


@pytest.mark.parametrize(("rule", "params"), RULE_CASES, ids=RULE_IDS)
def test_greedy_speculative_equals_greedy_target_markov(rule, params):
    for seed in range(3):
        target, draft = markov(10 + seed), markov(20 + seed)
        want = greedy_reference(target, [0], 25)
        for k in range(1, 9):
            gen = speculative_generate(
                target,
                draft,
                [0],
                k=k,
                max_new_tokens=25,
                temperature=0,
                rule=rule,
                seed=seed,
                **params,
            )
            assert gen.tokens.tolist() == want, (rule, k, seed)


def test_same_seed_same_tokens_different_seeds_differ():
    target, draft = markov(1), markov(2)
    runs = {}
    for seed in range(6):
        a = speculative_generate(target, draft, [0], k=3, max_new_tokens=20, seed=seed)
        b = speculative_generate(target, draft, [0], k=3, max_new_tokens=20, seed=seed)
        assert a.tokens.tolist() == b.tokens.tolist() and a.accepted == b.accepted
        runs[seed] = tuple(a.tokens.tolist())
    assert len(set(runs.values())) >= 5
    g1 = generate(target, [0], max_new_tokens=20, seed=7)
    g2 = generate(target, [0], max_new_tokens=20, seed=7)
    assert g1.tokens.tolist() == g2.tokens.tolist()
    assert g1.tokens.tolist() != generate(target, [0], max_new_tokens=20, seed=8).tokens.tolist()


def test_never_more_than_max_new_tokens():
    target, draft = markov(3), markov(4)
    rng = np.random.default_rng(0)
    for k in range(1, 9):
        for n in range(13):
            temperature = 0.0 if n % 3 == 0 else 1.0
            gen = speculative_generate(
                target, draft, [0, 1], k=k, max_new_tokens=n, temperature=temperature, seed=rng
            )
            assert len(gen.tokens) == n, (k, n)
            check_trace(gen, n)
            # a step drafts k tokens unless fewer than k + 1 remain: truncation only at the end
            done = 0
            for s in gen.steps:
                assert len(s.proposed) == min(k, n - done - 1)
                done += len(s.emitted)
    for n in range(5):
        assert len(generate(target, [0], max_new_tokens=n, seed=0).tokens) == n


def test_zero_new_tokens_makes_no_calls():
    class Counting:
        vocab_size = 3
        calls = 0

        def probs(self, tokens):
            Counting.calls += 1
            return np.full((len(tokens), 3), 1 / 3)

    for gen in (
        generate(Counting(), [0], max_new_tokens=0),
        speculative_generate(Counting(), Counting(), [0], k=4, max_new_tokens=0),
    ):
        assert gen.tokens.size == 0 and gen.steps == []
        assert gen.n_target_calls == gen.n_draft_calls == 0
        assert gen.acceptance_rate == 0.0 and gen.tau == 0.0
    assert Counting.calls == 0


def test_eos_stops_and_is_included():
    # token 3 is likely after every token, so EOS comes early
    trans = np.full((4, 4), 0.1)
    trans[:, 3] = 0.7
    target = MarkovModel(trans)
    draft = markov(5, V=4)
    hits = 0
    for seed in range(20):
        for k in (1, 3, 6):
            full = speculative_generate(
                target, draft, [0], k=k, max_new_tokens=12, seed=seed
            ).tokens.tolist()
            gen = speculative_generate(
                target, draft, [0], k=k, max_new_tokens=12, seed=seed, eos_id=3
            )
            cut = full[: full.index(3) + 1] if 3 in full else full
            assert gen.tokens.tolist() == cut
            check_trace(gen, 12)
            hits += 3 in full
        plain_full = generate(target, [0], max_new_tokens=12, seed=seed).tokens.tolist()
        plain = generate(target, [0], max_new_tokens=12, seed=seed, eos_id=3).tokens.tolist()
        assert plain == (plain_full[: plain_full.index(3) + 1] if 3 in plain_full else plain_full)
    assert hits > 50
    # EOS at T = 0: greedy target emits 3 first
    gen = speculative_generate(target, draft, [0], k=4, max_new_tokens=10, temperature=0, eos_id=3)
    assert gen.tokens.tolist() == [3]


def test_temperature_zero_draft_calls_and_trace_on_markov():
    target, draft = markov(6), markov(6)  # identical models: everything accepted
    gen = speculative_generate(target, draft, [0], k=4, max_new_tokens=20, temperature=0.7, seed=0)
    assert gen.acceptance_rate == 1.0
    assert [len(s.emitted) for s in gen.steps] == [5, 5, 5, 5]
    assert all(s.extra == "bonus" for s in gen.steps)
    assert gen.tau == 5.0


P_TABLE = np.array([0.45, 0.3, 0.15, 0.1])
Q_TABLE = np.array([0.4, 0.25, 0.25, 0.1])  # α = Σ min = 0.9


def full_steps(k: int, n_steps: int, seed: int) -> list:
    """Steps that drafted all k tokens (the truncated last steps are left out: whether a step
    drafts k tokens depends only on earlier steps, so this selection is unbiased)."""
    rng = np.random.default_rng(seed)
    steps = []
    while len(steps) < n_steps:
        gen = speculative_generate(
            TableModel(P_TABLE), TableModel(Q_TABLE), [0], k=k, max_new_tokens=300, seed=rng
        )
        steps += [s for s in gen.steps if len(s.proposed) == k]
    return steps[:n_steps]


@pytest.mark.parametrize("k", [1, 2, 4])
def test_tokens_per_target_call_match_theory(k):
    alpha = acceptance_probability(P_TABLE, Q_TABLE)
    assert alpha == pytest.approx(0.9)
    # exact mean and variance of 1 + N, N = accepted ~ truncated geometric
    probs = [alpha**n * (1 - alpha) for n in range(k)] + [alpha**k]
    mean = sum((n + 1) * pr for n, pr in enumerate(probs))
    var = sum((n + 1) ** 2 * pr for n, pr in enumerate(probs)) - mean**2
    assert mean == pytest.approx(expected_tokens_per_step(alpha, k))
    # enough steps that the 2% tolerance is 3 standard errors
    n_steps = math.ceil(var * (3 / (0.02 * mean)) ** 2)
    steps = full_steps(k, n_steps, seed=k)
    tau = sum(len(s.emitted) for s in steps) / len(steps)
    assert tau == pytest.approx(expected_tokens_per_step(alpha, k), rel=0.02)
    # per-token acceptance (accepted / evaluated; evaluation stops at the first rejection)
    # does not depend on k, and P(all k accepted) = α^k
    accepted = sum(s.n_accepted for s in steps)
    rejected = sum(s.n_accepted < k for s in steps)
    per_token = accepted / (accepted + rejected)
    assert abs(per_token - alpha) < 4 * math.sqrt(alpha * (1 - alpha) / (accepted + rejected))
    all_acc = np.mean([s.n_accepted == k for s in steps])
    assert abs(all_acc - alpha**k) < 4 * math.sqrt(alpha**k * (1 - alpha**k) / n_steps)
    # acceptance_rate = accepted / proposed = E[N]/k = α(1 − α^k)/((1 − α)k): it falls with k
    rate = accepted / (k * len(steps))
    assert rate == pytest.approx(alpha * (1 - alpha**k) / ((1 - alpha) * k), rel=0.03)


def test_per_token_acceptance_estimates_alpha():
    # accepted / checked is an unbiased-in-the-limit estimate of α; accepted / proposed is not
    alpha = acceptance_probability(P_TABLE, Q_TABLE)
    gen = speculative_generate(
        TableModel(P_TABLE), TableModel(Q_TABLE), [0], k=4, max_new_tokens=3000, seed=11
    )
    se = math.sqrt(alpha * (1 - alpha) / gen.n_checked)
    assert abs(gen.alpha - alpha) < 4 * se
    assert gen.acceptance_rate < alpha - 4 * se
    assert gen.n_checked <= gen.n_proposed


# ---------------------------------------------------------------- metric vocabulary


def test_metrics_by_their_definitions_and_deprecated_aliases(ngrams):
    target, draft, prompt = ngrams
    gen = speculative_generate(target, draft, prompt, k=4, max_new_tokens=60, seed=11)
    steps = gen.steps
    n_accepted = sum(s.n_accepted for s in steps)
    n_checked = sum(min(s.n_accepted + 1, len(s.proposed)) for s in steps)
    n_proposed = sum(len(s.proposed) for s in steps)
    assert (gen.n_accepted, gen.n_checked, gen.n_proposed) == (n_accepted, n_checked, n_proposed)
    assert n_checked < n_proposed  # some step was rejected early, so the two rates differ
    assert gen.alpha == n_accepted / n_checked
    assert gen.acceptance_rate == n_accepted / n_proposed < gen.alpha
    assert gen.tau == len(gen.tokens) / gen.n_target_calls
    assert gen.n_draft_calls == n_proposed and gen.n_head_calls == 0
    # one name per metric: the old names are gone
    for old in ("per_token_acceptance", "mean_tokens_per_step", "target_calls", "draft_calls",
                "proposed", "checked"):
        assert not hasattr(gen, old), old


# ---------------------------------------------------------------- 32-bit token arrays


@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.uint8])
def test_narrow_token_arrays_give_the_same_result(ngrams, dtype):
    """Token arrays of any integer dtype decode exactly like int64 ones (as on a platform
    whose index type np.intp is 32 bits)."""
    target, draft, prompt = ngrams
    narrow = np.asarray(prompt).astype(dtype)
    for temperature in (0.0, 0.9):
        wide = speculative_generate(target, draft, np.asarray(prompt, dtype=np.int64), k=3,
                                    max_new_tokens=30, temperature=temperature, seed=4)
        same = speculative_generate(target, draft, narrow, k=3, max_new_tokens=30,
                                    temperature=temperature, seed=4)
        assert same.tokens.tolist() == wide.tokens.tolist() and same.steps == wide.steps
        plain = generate(target, narrow, max_new_tokens=20, temperature=temperature, seed=4)
        assert plain.tokens.tolist() == generate(
            target, prompt, max_new_tokens=20, temperature=temperature, seed=4).tokens.tolist()
    rows = target.probs(prompt)[-4:]  # [4, V]
    drafted = rows[:3].argmax(axis=1)  # [3]
    draft_rows = np.full((3, rows.shape[1]), 1 / rows.shape[1])
    for rule in ("exact", "greedy"):
        want = verify(drafted, draft_rows, rows, np.random.default_rng(2), rule)
        got = verify(drafted.astype(dtype), draft_rows, rows, np.random.default_rng(2), rule)
        assert got.tokens.tolist() == want.tokens.tolist() and got.n_accepted == want.n_accepted
