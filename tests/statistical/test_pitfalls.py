"""specdec_lite.teaching.pitfalls: each wrong rule fails the whole-sequence test that the exact rule
passes, at the same seed and sample size.

Thresholds: a pitfall must score a p-value below 1e-6 (or emit sequences the target
forbids); the exact rule must score above 1e-3, a level a correct sampler misses once in
a thousand seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import TINY, random_heads, target_model

from specdec_lite.rules.verify import verify
from specdec_lite.teaching.exactness import (
    chi_square,
    draft_proposer,
    sample_continuations,
    sequence_law,
    small_pair,
    speculative_loop,
)
from specdec_lite.teaching.pitfalls import (
    DRAFT_PITFALLS,
    chain_heads_generate,
    greedy_draft_generate,
    independent_heads_generate,
    medusa_heads_fn,
    nonprefix_generate,
    nonprefix_verify,
    threshold_generate,
    threshold_verify,
)

LENGTH, N, SEED = 4, 3000, 2024
TARGET, DRAFT, PROMPT = small_pair()  # V = 3; the target forbids 0 -> 2 and 2 -> 1
LAW = sequence_law(TARGET, PROMPT, LENGTH)


def run(decoder, second=DRAFT, k: int = 3, **kwargs):
    samples = sample_continuations(TARGET, second, PROMPT, LENGTH, N, SEED, k=k,
                                   decoder=decoder, **kwargs)
    return chi_square(samples, LAW)


def markov_heads(prefix: np.ndarray) -> np.ndarray:
    """Medusa-style heads from the draft chain: row i is the draft's law of the token i + 1
    steps ahead, given only the prefix's last token (not the tokens drafted before it)."""
    rows, row = [], np.eye(3)[prefix[-1]]
    for _ in range(4):
        row = row @ DRAFT.transition
        rows.append(row)
    return np.array(rows)  # [4, V]


def test_the_exact_rule_passes_on_this_pair():
    result = run(None)
    assert result.passed() and result.p_value > 1e-3, result


@pytest.mark.parametrize("theta", [0.5, 1.0, 1.5])
def test_threshold_rule_fails(theta):
    result = run(threshold_generate, theta=theta)
    assert result.p_value < 1e-6 and not result.passed(), result


def test_threshold_verify_is_verify_with_the_threshold_rule():
    tokens, q, p = np.array([0, 1]), np.full((2, 3), 1 / 3), np.full((3, 3), 1 / 3)
    ours = threshold_verify(tokens, q, p, np.random.default_rng(0), theta=0.9)
    theirs = verify(tokens, q, p, np.random.default_rng(0), rule="threshold", theta=0.9)
    assert (ours.tokens.tolist(), ours.n_accepted, ours.extra) == (
        theirs.tokens.tolist(), theirs.n_accepted, theirs.extra)


@pytest.mark.parametrize("k", [2, 3])
def test_nonprefix_acceptance_emits_impossible_sequences(k):
    result = run(nonprefix_generate, k=k)
    assert result.n_impossible > 0 and result.p_value < 1e-6 and not result.passed(), result
    assert all(LAW.get(s, 0.0) == 0.0 for s in result.impossible_examples)


def test_nonprefix_verify_keeps_a_token_after_a_rejection():
    # x_1 = 2 has p = 0 and is always rejected; x_2 = 0 has p = 1 >= q and always passes
    tokens = np.array([2, 0])
    q = np.array([[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]])  # [k, V]
    p = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])  # [k + 1, V]
    out = nonprefix_verify(tokens, q, p, np.random.default_rng(0))
    assert out.tokens[0] == 0 and out.n_accepted == 1 and out.extra == "correction"
    exact = verify(tokens, q, p, np.random.default_rng(0))
    assert exact.n_accepted == 0  # the exact rule stops at the first rejection


def test_nonprefix_verify_needs_a_generator():
    with pytest.raises(TypeError, match="rng"):
        nonprefix_verify(np.array([0]), np.full((1, 3), 1 / 3), np.full((2, 3), 1 / 3))


def test_independent_head_acceptance_fails_where_path_acceptance_passes():
    independent = run(independent_heads_generate, markov_heads)
    assert independent.n_impossible > 0 and independent.p_value < 1e-6, independent
    path = run(chain_heads_generate, markov_heads)
    assert path.passed() and path.p_value > 1e-3, path


def test_independent_acceptance_of_medusa_heads_fails_where_the_chain_passes():
    """The same comparison with a transformer and MedusaHeads (V = 3, three heads)."""
    target = target_model(TINY, seed=2)
    heads_fn = medusa_heads_fn(target, random_heads(TINY, n_heads=3, seed=9))
    prompt = [0, 1]
    law = sequence_law(target, prompt, LENGTH)

    def result(decoder):
        samples = sample_continuations(target, heads_fn, prompt, LENGTH, 2000, SEED, k=3,
                                       decoder=decoder)
        return chi_square(samples, law)

    independent = result(independent_heads_generate)
    assert independent.p_value < 1e-6 and not independent.passed(), independent
    chain = result(chain_heads_generate)
    assert chain.passed() and chain.p_value > 1e-3, chain


def test_medusa_heads_fn_checks_its_inputs():
    target = target_model(TINY, seed=2)
    with pytest.raises(TypeError, match="target"):
        medusa_heads_fn(object(), random_heads(TINY))
    with pytest.raises(TypeError, match="heads"):
        medusa_heads_fn(target, object())
    with pytest.raises(ValueError, match="2 tokens"):
        medusa_heads_fn(target, random_heads(TINY))(np.array([0]))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_greedy_draft_reporting_its_softmax_fails(temperature):
    law = sequence_law(TARGET, PROMPT, LENGTH, temperature)

    def result(decoder):
        return chi_square(sample_continuations(TARGET, DRAFT, PROMPT, LENGTH, N, SEED, k=3,
                                               temperature=temperature, decoder=decoder), law)

    biased = result(greedy_draft_generate)
    assert biased.p_value < 1e-6 and not biased.passed(), biased
    exact = result(None)
    assert exact.passed() and exact.p_value > 1e-3, exact


def test_every_draft_pitfall_fails():
    for name, decoder in DRAFT_PITFALLS.items():
        result = run(decoder, k=2)
        assert result.p_value < 1e-6 and not result.passed(), f"{name}: {result}"


def test_a_greedy_draft_that_reports_its_one_hot_is_exact():
    """The fix the docstring names: q = the one-hot the greedy draft really samples from."""
    rng = np.random.default_rng(SEED)
    propose = draft_proposer(DRAFT, temperature=0.0)  # argmax, reported as a one-hot
    samples = [tuple(speculative_loop(TARGET, PROMPT, propose, verify, k=3,
                                      max_new_tokens=LENGTH, seed=rng).tokens.tolist())
               for _ in range(N)]
    result = chi_square(samples, LAW)
    assert result.passed() and result.p_value > 1e-3, result


def test_a_p_value_that_underflows_reads_as_a_bound():
    assert "< 1e-300" in str(run(nonprefix_generate, k=3))
