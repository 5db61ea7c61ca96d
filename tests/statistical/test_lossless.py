"""Statistical proof that the exact rule samples from the target, and the lossy rules do not.

Each test samples N short continuations with ``speculative_generate`` from a
context-dependent (first-order Markov) target and draft over V = 4 tokens, and
compares the empirical distribution of whole sequences with the target's,
enumerated exactly. Pearson's chi-square must stay below its 0.1% critical
value for the exact rule; the lossy rules exceed it by a wide margin at the
same N and seed.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from support import chi2_critical, chi2_statistic, enumerate_sequences

from specdec_lite import MarkovModel, speculative_generate

V, LENGTH, N = 3, 5, 3000
PROMPT = [0]


def markov(seed: int, concentration: float = 1.0) -> MarkovModel:
    rng = np.random.default_rng(seed)
    return MarkovModel(rng.dirichlet(np.full(V, concentration), size=V))


TARGET = markov(1)
DRAFT = markov(2)
# A draft that almost never proposes token 2, which the target often wants.
SHY = DRAFT.transition.copy()
SHY[:, 2] = 1e-4
SHY /= SHY.sum(axis=1, keepdims=True)
SHY_DRAFT = MarkovModel(SHY)


def sample_sequences(
    draft, k: int, temperature: float, rule: str = "exact", **params
) -> list[tuple]:
    rng = np.random.default_rng(12345)
    return [
        tuple(
            speculative_generate(
                TARGET,
                draft,
                PROMPT,
                k=k,
                max_new_tokens=LENGTH,
                temperature=temperature,
                rule=rule,
                seed=rng,
                **params,
            ).tokens.tolist()
        )
        for _ in range(N)
    ]


@pytest.mark.parametrize(
    ("draft", "k", "temperature"),
    [
        (DRAFT, 1, 1.0),
        (DRAFT, 2, 1.0),
        (DRAFT, 4, 1.0),
        (DRAFT, 2, 0.6),
        (DRAFT, 4, 1.7),
        (SHY_DRAFT, 2, 1.0),
    ],
    ids=["k1-T1", "k2-T1", "k4-T1", "k2-T0.6", "k4-T1.7", "shy-draft-k2"],
)
def test_exact_rule_matches_target_distribution(draft, k, temperature):
    expected = enumerate_sequences(TARGET, PROMPT, LENGTH, temperature)
    stat, df = chi2_statistic(sample_sequences(draft, k, temperature), expected)
    assert stat < chi2_critical(df), f"chi2={stat:.1f} exceeds the 0.1% critical value for df={df}"


def test_chi2_test_has_power_against_a_slightly_wrong_target():
    """The same test at the same N rejects a sampler that is only a little off."""
    wrong = MarkovModel(0.9 * TARGET.transition + 0.1 * DRAFT.transition)
    expected = enumerate_sequences(TARGET, PROMPT, LENGTH, 1.0)
    rng = np.random.default_rng(12345)
    samples = []
    for _ in range(N):
        seq = list(PROMPT)
        for _ in range(LENGTH):
            seq.append(int(rng.choice(V, p=wrong.transition[seq[-1]])))
        samples.append(tuple(seq[1:]))
    stat, df = chi2_statistic(samples, expected)
    assert stat > chi2_critical(df), f"chi2={stat:.1f} did not detect a 10% error (df={df})"


@pytest.mark.parametrize(
    ("rule", "params"),
    [("threshold", {"theta": 1.5}), ("threshold", {"theta": 0.5}), ("typical", {})],
    ids=["threshold-1.5", "threshold-0.5", "typical"],
)
def test_lossy_rules_fail_the_same_test(rule, params):
    expected = enumerate_sequences(TARGET, PROMPT, LENGTH, 1.0)
    stat, df = chi2_statistic(sample_sequences(DRAFT, 2, 1.0, rule, **params), expected)
    assert stat > chi2_critical(df), f"{rule} {params}: chi2={stat:.1f} looks lossless"


def test_rule_that_skips_the_residual_is_caught():
    """Sampling the correction from p instead of norm(max(0, p - q)) is a classic bug;
    the chi-square test must catch it. We patch the residual to return p."""
    verify_module = importlib.import_module("specdec_lite.rules.verify")
    original = verify_module.residual
    verify_module.residual = lambda p, q: p
    try:
        samples = sample_sequences(DRAFT, 2, 1.0)
    finally:
        verify_module.residual = original
    stat, df = chi2_statistic(samples, enumerate_sequences(TARGET, PROMPT, LENGTH, 1.0))
    assert stat > chi2_critical(df), f"chi2={stat:.1f}: the missing residual went unnoticed"
