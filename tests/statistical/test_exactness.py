"""specdec_lite.teaching.exactness: the chi-square tail, the enumerated law, Pearson's test, and the
harness that runs a reader's own verify."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specdec_lite import MarkovModel, speculative_generate
from specdec_lite.rules.verify import Verification, verify
from specdec_lite.teaching.exactness import (
    ChiSquare,
    check_verify,
    chi2_isf,
    chi2_sf,
    chi_square,
    draft_proposer,
    gamma_q,
    sample_continuations,
    sequence_law,
    small_pair,
    speculative_loop,
)

# ---------------------------------------------------------------- the chi-square tail


@pytest.mark.parametrize("a", [1, 2, 3, 7, 20, 60])
@pytest.mark.parametrize("x", [0.01, 0.5, 2.0, 6.5, 19.0, 45.0, 90.0])
def test_gamma_q_matches_the_poisson_sum_for_integer_a(a, x):
    # for integer a, Q(a, x) = P(Poisson(x) < a) = e^-x sum_{j<a} x^j / j!
    exact = math.exp(-x) * sum(x**j / math.factorial(j) for j in range(a))
    assert gamma_q(a, x) == pytest.approx(exact, rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("x", [1e-4, 0.3, 1.0, 3.84, 10.8, 40.0, 300.0])
def test_one_degree_of_freedom_is_erfc(x):
    # a chi-square with 1 df is Z^2, so P(Z^2 >= x) = erfc(sqrt(x / 2))
    assert chi2_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize(
    ("statistic", "df", "tail"),
    [
        (3.841458820694124, 1, 0.05),
        (10.827566170662733, 1, 1e-3),
        (1.1454762260617697, 5, 0.95),
        (18.307038053275146, 10, 0.05),
        (29.58829844507442, 10, 1e-3),
        (124.34211340400407, 100, 0.05),
    ],
)
def test_chi2_sf_at_known_quantiles(statistic, df, tail):
    assert chi2_sf(statistic, df) == pytest.approx(tail, rel=1e-9)
    assert chi2_isf(tail, df) == pytest.approx(statistic, rel=1e-9)


def test_chi2_tail_far_out_is_tiny_but_positive():
    assert 0 < chi2_sf(400.0, 10) < 1e-70
    assert chi2_sf(0.0, 3) == 1.0


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: gamma_q(0.0, 1.0), ValueError, "a must"),
        (lambda: gamma_q(1.0, -1.0), ValueError, "x must"),
        (lambda: chi2_sf(-1.0, 3), ValueError, "statistic"),
        (lambda: chi2_sf(1.0, 0), ValueError, "df"),
        (lambda: chi2_sf(1.0, 2.0), TypeError, "df"),
        (lambda: chi2_isf(0.0, 3), ValueError, "upper_tail"),
    ],
)
def test_tail_functions_reject_bad_input(call, error, name):
    with pytest.raises(error, match=name):
        call()


# ---------------------------------------------------------------- the law


def test_sequence_law_of_a_markov_chain_is_the_product_of_its_transitions():
    target, _, prompt = small_pair()
    law = sequence_law(target, prompt, 3)
    t = target.transition
    assert law[(1, 2, 0)] == pytest.approx(t[0, 1] * t[1, 2] * t[2, 0])
    assert sum(law.values()) == pytest.approx(1.0)
    assert (0, 2, 0) not in law  # t[0, 2] == 0: impossible continuations are left out
    assert all(prob > 0 for prob in law.values())


def test_sequence_law_applies_temperature_and_both_cuts():
    target, _, prompt = small_pair()
    assert sequence_law(target, prompt, 2, temperature=0) == {(0, 0): 1.0}
    law = sequence_law(target, prompt, 3, top_k=1)
    assert law == sequence_law(target, prompt, 3, temperature=0)
    nucleus = sequence_law(target, prompt, 3, top_p=0.5)  # keeps only the top token of rows
    assert sum(nucleus.values()) == pytest.approx(1.0) and len(nucleus) < len(
        sequence_law(target, prompt, 3)
    )


def test_sequence_law_rejects_bad_input():
    target, _, prompt = small_pair()
    with pytest.raises(ValueError, match="prompt"):
        sequence_law(target, [], 2)
    with pytest.raises(ValueError, match="length"):
        sequence_law(target, prompt, -1)
    with pytest.raises(ValueError, match="max_sequences"):
        sequence_law(target, prompt, 8, max_sequences=100)
    with pytest.raises(ValueError, match="top_k"):
        sequence_law(target, prompt, 2, top_k=0)
    with pytest.raises(TypeError, match="model"):
        sequence_law(object(), prompt, 2)


# ---------------------------------------------------------------- Pearson's test


LAW = {(0,): 0.5, (1,): 0.3, (2,): 0.2}


def test_counts_equal_to_expectations_score_zero():
    samples = [(0,)] * 50 + [(1,)] * 30 + [(2,)] * 20
    result = chi_square(samples, LAW)
    assert result.statistic == pytest.approx(0.0) and result.df == 2
    assert result.p_value == pytest.approx(1.0) and result.passed()
    assert "p-value" in str(result) and "0 of 100" in str(result)


def test_an_impossible_sample_fails_whatever_the_p_value():
    samples = [(0,)] * 50 + [(1,)] * 30 + [(2,)] * 19 + [(3,)]
    result = chi_square(samples, LAW)
    assert result.n_impossible == 1 and result.impossible_examples == ((3,),)
    assert result.p_value > 0.5 and not result.passed()
    assert "(3,)" in str(result)


def test_rare_cells_are_pooled():
    law = {(0,): 0.9, (1,): 0.04, (2,): 0.03, (3,): 0.03}
    result = chi_square([(0,)] * 90 + [(1,)] * 4 + [(2,)] * 3 + [(3,)] * 3, law)
    assert result.n_cells == 2 and result.df == 1  # (0,) alone, the other three pooled
    assert result.statistic == pytest.approx(0.0)


def test_a_single_cell_is_not_a_test():
    result = chi_square([(0,)] * 10, {(0,): 0.99, (1,): 0.01})
    assert result.df == 0
    with pytest.raises(ValueError, match="single cell"):
        result.passed()


@pytest.mark.statistical
def test_p_values_of_a_correct_sampler_are_uniform():
    """Draw straight from the law: about 10% of the p-values fall below 0.1."""
    target, _, prompt = small_pair()
    law = sequence_law(target, prompt, 3)
    keys = list(law)
    probs = np.array([law[s] for s in keys])
    rng = np.random.default_rng(7)
    p_values = [
        chi_square([keys[i] for i in rng.choice(len(keys), 500, p=probs)], law).p_value
        for _ in range(300)
    ]
    assert 0.05 < np.mean(np.array(p_values) < 0.1) < 0.16
    assert 0.4 < np.mean(p_values) < 0.6


@pytest.mark.parametrize(
    ("samples", "law", "message"),
    [
        ([], LAW, "samples"),
        ([(0,)], {(0,): 0.5}, "sum to 1"),
        ([(0,)], {(0,): 1.5, (1,): -0.5}, "non-negative"),
        ([(0, 1)], LAW, "one length"),
    ],
)
def test_chi_square_rejects_bad_input(samples, law, message):
    with pytest.raises(ValueError, match=message):
        chi_square(samples, law)


def test_chi_square_rejects_a_bad_min_expected():
    with pytest.raises(ValueError, match="min_expected"):
        chi_square([(0,)], LAW, min_expected=0)


@pytest.mark.statistical
def test_chi_square_has_power_against_a_slightly_wrong_sampler():
    """A sampler 10% of the way to another chain fails at the sample size the tests use."""
    target, draft, prompt = small_pair()
    wrong = MarkovModel(0.9 * target.transition + 0.1 * draft.transition)
    samples = sample_continuations(wrong, wrong, prompt, 4, 4000, 3, k=1)
    result = chi_square(samples, sequence_law(target, prompt, 4))
    assert result.p_value < 1e-6 and not result.passed()


# ---------------------------------------------------------------- running decoders


def test_sample_continuations_runs_the_exact_decoder_reproducibly():
    target, draft, prompt = small_pair()
    samples = sample_continuations(target, draft, prompt, 4, 3000, 11, k=2)
    assert samples == sample_continuations(target, draft, prompt, 4, 3000, 11, k=2)
    result = chi_square(samples, sequence_law(target, prompt, 4))
    assert result.passed(), result


def test_sample_continuations_passes_decoder_arguments_through():
    target, draft, prompt = small_pair()
    samples = sample_continuations(target, draft, prompt, 4, 3000, 11, k=2,
                                   rule="threshold", theta=1.0)
    assert chi_square(samples, sequence_law(target, prompt, 4)).p_value < 1e-6


def test_sample_continuations_needs_enough_tokens():
    target, draft, prompt = small_pair()
    with pytest.raises(ValueError, match="fewer than"):
        sample_continuations(target, draft, prompt, 4, 2, 0, k=2,
                             decoder=lambda *a, **kw: speculative_generate(
                                 *a, **{**kw, "max_new_tokens": 2}))


def test_speculative_loop_with_the_exact_rule_is_exact_and_keeps_a_trace():
    target, draft, prompt = small_pair()
    gen = speculative_loop(target, prompt, draft_proposer(draft), verify, k=3,
                           max_new_tokens=10, seed=0)
    assert len(gen.tokens) == 10
    assert gen.n_target_calls == len(gen.steps)
    assert sum(len(s.emitted) for s in gen.steps) == 10


def test_speculative_loop_rejects_a_bad_judge():
    target, draft, prompt = small_pair()
    too_many = lambda tokens, q, p, rng: np.zeros(len(tokens) + 2, dtype=int)  # noqa: E731
    with pytest.raises(ValueError, match="1 to k"):
        speculative_loop(target, prompt, draft_proposer(draft), too_many, k=2,
                         max_new_tokens=4, seed=0)
    floats = lambda tokens, q, p, rng: np.array([1.0])  # noqa: E731
    with pytest.raises(TypeError, match="integer ids"):
        speculative_loop(target, prompt, draft_proposer(draft), floats, k=2,
                         max_new_tokens=4, seed=0)
    out_of_range = lambda tokens, q, p, rng: np.array([7])  # noqa: E731
    with pytest.raises(ValueError, match="outside"):
        speculative_loop(target, prompt, draft_proposer(draft), out_of_range, k=2,
                         max_new_tokens=4, seed=0)


# ---------------------------------------------------------------- testing your own verify


def test_check_verify_passes_the_library_verify():
    result = check_verify(verify, seed=0)
    assert isinstance(result, ChiSquare) and result.passed(), result


def my_verify(draft_tokens, draft_probs, target_probs, rng):
    """A reader's exact rule, returning a plain array of the tokens to emit."""
    for i, x in enumerate(draft_tokens):
        if rng.random() * draft_probs[i, x] >= target_probs[i, x]:  # rejected
            residual = np.maximum(target_probs[i] - draft_probs[i], 0)
            return np.append(draft_tokens[:i], rng.choice(len(residual),
                                                          p=residual / residual.sum()))
    last = target_probs[len(draft_tokens)]
    return np.append(draft_tokens, rng.choice(len(last), p=last))


def no_residual_verify(draft_tokens, draft_probs, target_probs, rng):
    """The classic mistake: the correction is drawn from p instead of max(0, p - q)."""
    out = verify(draft_tokens, draft_probs, target_probs, rng)
    if out.extra == "correction":
        n = out.n_accepted
        out = Verification(np.append(out.tokens[:n], rng.choice(target_probs.shape[1],
                                                                  p=target_probs[n])),
                           n, "correction")
    return out


def test_check_verify_accepts_plain_arrays_and_passes_a_correct_rule():
    assert check_verify(my_verify, seed=1).passed()


def test_check_verify_catches_a_missing_residual():
    result = check_verify(no_residual_verify, seed=1)
    assert result.p_value < 1e-6 and not result.passed(), result


def test_check_verify_rejects_a_non_function():
    with pytest.raises(TypeError, match="fn"):
        check_verify("verify")
