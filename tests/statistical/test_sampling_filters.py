"""Top-k and top-p in the decode loops: validated, applied after temperature to both p and
q, and the exact rule still reproduces the warped target's law (chi-square, seeded).

The same test catches the two ways a pipeline gets the cuts wrong: a draft that samples
from its cut rows but reports its uncut rows as q, and a cut applied to q but not to p.
Cutting p only is *not* wrong: the exact rule accepts any proposal as long as q is the
distribution its tokens were drawn from, so a test below checks that it passes.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import TINY, random_heads, target_model

from specdec_lite import MarkovModel, generate, medusa_generate, speculative_generate
from specdec_lite.drafting.medusa import chain_tree
from specdec_lite.rules.distributions import (
    apply_temperature,
    check_top_k,
    check_top_p,
    sample,
    top_k_filter,
    top_p_filter,
    truncate,
    warp,
)
from specdec_lite.rules.verify import verify
from specdec_lite.teaching.exactness import (
    chi_square,
    draft_proposer,
    sample_continuations,
    sequence_law,
    speculative_loop,
)

V, LENGTH, N, SEED = 4, 4, 2000, 5
PROMPT = [0]
_rng = np.random.default_rng(3)
TARGET = MarkovModel(_rng.dirichlet(np.ones(V), size=V))
DRAFT = MarkovModel(_rng.dirichlet(np.ones(V), size=V))
CUTS = [{"top_k": 2}, {"top_p": 0.7}, {"top_k": 3, "top_p": 0.9}]
CUT_IDS = ["top_k=2", "top_p=0.7", "top_k=3,top_p=0.9"]

# ---------------------------------------------------------------- warp and validation


def test_warp_is_temperature_then_top_k_then_top_p():
    row = np.array([0.05, 0.4, 0.3, 0.15, 0.1])
    by_hand = top_p_filter(top_k_filter(apply_temperature(row, 0.7), 3), 0.8)
    assert np.allclose(warp(row, 0.7, top_k=3, top_p=0.8), by_hand)
    assert np.allclose(warp(row, 0.7), apply_temperature(row, 0.7))
    assert truncate(row) is row  # no cut, no copy


def test_greedy_warp_ignores_the_cuts():
    row = np.array([0.05, 0.4, 0.3, 0.15, 0.1])
    assert np.array_equal(warp(row, 0.0, top_k=1, top_p=0.1), apply_temperature(row, 0.0))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"top_k": 0}, ValueError),
        ({"top_k": -2}, ValueError),
        ({"top_k": 2.0}, TypeError),
        ({"top_k": True}, TypeError),
        ({"top_p": 0.0}, ValueError),
        ({"top_p": 1.5}, ValueError),
        ({"top_p": float("nan")}, ValueError),
        ({"top_p": "0.9"}, TypeError),
    ],
)
def test_decoders_reject_bad_cuts_naming_the_parameter(kwargs, error):
    name = next(iter(kwargs))
    for call in (
        lambda: generate(TARGET, PROMPT, max_new_tokens=2, seed=0, **kwargs),
        lambda: speculative_generate(TARGET, DRAFT, PROMPT, k=2, max_new_tokens=2, seed=0,
                                     **kwargs),
        lambda: warp(np.full(V, 1 / V), 1.0, **kwargs),
    ):
        with pytest.raises(error, match=name):
            call()


def test_check_functions_pass_none_and_good_values_through():
    assert check_top_k(None) is None and check_top_k(np.int64(3)) == 3
    assert check_top_p(None) is None and check_top_p(1) == 1.0


# ---------------------------------------------------------------- plain and greedy decoding


def test_generate_with_top_k_1_is_greedy():
    sampled = generate(TARGET, PROMPT, max_new_tokens=12, temperature=1.3, top_k=1, seed=0)
    greedy = generate(TARGET, PROMPT, max_new_tokens=12, temperature=0)
    assert np.array_equal(sampled.tokens, greedy.tokens)


def test_greedy_decoding_ignores_the_cuts():
    plain = speculative_generate(TARGET, DRAFT, PROMPT, k=3, max_new_tokens=12, temperature=0)
    cut = speculative_generate(TARGET, DRAFT, PROMPT, k=3, max_new_tokens=12, temperature=0,
                               top_k=2, top_p=0.3)
    assert np.array_equal(plain.tokens, cut.tokens)
    assert np.array_equal(cut.tokens, generate(TARGET, PROMPT, max_new_tokens=12,
                                               temperature=0).tokens)


@pytest.mark.parametrize("cut", CUTS, ids=CUT_IDS)
def test_generate_follows_the_warped_law(cut):
    rng = np.random.default_rng(SEED)
    samples = [tuple(generate(TARGET, PROMPT, max_new_tokens=LENGTH, seed=rng, **cut)
                     .tokens.tolist()) for _ in range(N)]
    result = chi_square(samples, sequence_law(TARGET, PROMPT, LENGTH, **cut))
    assert result.passed() and result.p_value > 1e-3, result


# ---------------------------------------------------------------- speculative sampling


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("cut", CUTS, ids=CUT_IDS)
def test_speculative_sampling_preserves_the_warped_law(cut, temperature):
    samples = sample_continuations(TARGET, DRAFT, PROMPT, LENGTH, N, SEED, k=3,
                                   temperature=temperature, **cut)
    warped = chi_square(samples, sequence_law(TARGET, PROMPT, LENGTH, temperature, **cut))
    assert warped.passed() and warped.p_value > 1e-3, warped
    # and it is the cut that matters: the same samples are far from the uncut law
    uncut = chi_square(samples, sequence_law(TARGET, PROMPT, LENGTH, temperature))
    assert not uncut.passed()


def loop_samples(propose, **target_cut) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(SEED)
    return [tuple(speculative_loop(TARGET, PROMPT, propose, verify, k=3, max_new_tokens=LENGTH,
                                   seed=rng, **target_cut).tokens.tolist()) for _ in range(N)]


def cut_sampled_raw_reported(cut: dict):
    """A draft that samples from its cut rows but hands verification its uncut rows."""

    def propose(prefix, k, rng):
        n = len(prefix)
        ctx = np.concatenate([prefix, np.zeros(k, dtype=np.int64)])  # [n + k]
        q = np.zeros((k, V))  # [k, V] what verification is told
        for i in range(k):
            q[i] = DRAFT.probs(ctx[: n + i])[-1]
            ctx[n + i] = sample(warp(q[i], 1.0, **cut), rng)  # what the draft actually does
        return ctx[n:], q

    return propose


@pytest.mark.parametrize("cut", CUTS[:2], ids=CUT_IDS[:2])
def test_reporting_the_uncut_q_is_caught(cut):
    result = chi_square(loop_samples(cut_sampled_raw_reported(cut), **cut),
                        sequence_law(TARGET, PROMPT, LENGTH, **cut))
    assert result.p_value < 1e-6 and not result.passed(), result


@pytest.mark.parametrize("cut", CUTS[:2], ids=CUT_IDS[:2])
def test_cutting_q_but_not_p_is_caught(cut):
    result = chi_square(loop_samples(draft_proposer(DRAFT, **cut)),
                        sequence_law(TARGET, PROMPT, LENGTH, **cut))
    assert result.n_impossible > 0 and not result.passed(), result


@pytest.mark.parametrize("cut", CUTS[:2], ids=CUT_IDS[:2])
def test_cutting_p_only_is_still_exact(cut):
    """An uncut draft, honestly reported, is just a worse proposal: the output is exact."""
    result = chi_square(loop_samples(draft_proposer(DRAFT), **cut),
                        sequence_law(TARGET, PROMPT, LENGTH, **cut))
    assert result.passed() and result.p_value > 1e-3, result


# ---------------------------------------------------------------- Medusa's exact chain


@pytest.mark.parametrize("cut", [{"top_k": 2}, {"top_p": 0.8}], ids=["top_k=2", "top_p=0.8"])
def test_medusa_exact_chain_preserves_the_warped_law(cut):
    target = target_model(TINY, seed=2)
    heads = random_heads(TINY, n_heads=3, seed=9)
    rng = np.random.default_rng(SEED)
    samples = [tuple(medusa_generate(target, heads, [0], max_new_tokens=LENGTH, rule="exact",
                                     temperature=1.0, tree=chain_tree(3), seed=rng, **cut)
                     .tokens.tolist()) for _ in range(2000)]
    result = chi_square(samples, sequence_law(target, [0], LENGTH, **cut))
    assert result.passed() and result.p_value > 1e-3, result


def test_medusa_cuts_need_the_exact_rule():
    target = target_model(TINY, seed=2)
    with pytest.raises(ValueError, match="top_k and top_p"):
        medusa_generate(target, random_heads(TINY), [0], max_new_tokens=2, temperature=1.0,
                        rule="typical", top_k=2, seed=0)
    with pytest.raises(ValueError, match="top_p"):
        medusa_generate(target, random_heads(TINY), [0], max_new_tokens=2, temperature=1.0,
                        rule="exact", tree=chain_tree(3), top_p=2.0, seed=0)
