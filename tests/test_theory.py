"""theory.py against brute-force sums and the check values in REFERENCES.md."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite.theory import (
    acceptance_probability,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
)


def brute_tokens(alpha: float, k: int) -> float:
    """E[accepted + 1] with i.i.d. acceptance: Σ_{n=0}^{k} P(N = n)(n + 1)."""
    total = sum(alpha**n * (1 - alpha) * (n + 1) for n in range(k))
    return total + alpha**k * (k + 1)


def test_reference_check_values():
    assert expected_tokens_per_step(0.8, 5) == pytest.approx(3.689, abs=5e-4)
    assert expected_tokens_per_step(0.9, 10) == pytest.approx(6.862, abs=5e-4)
    assert expected_speedup(0.44, 5, 0.11) == pytest.approx(1.14, abs=5e-3)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.44, 0.8, 0.99, 1 - 1e-9, 1 - 1e-13, 1.0])
@pytest.mark.parametrize("k", [0, 1, 2, 5, 10])
def test_tokens_per_step_matches_brute_force(alpha, k):
    assert expected_tokens_per_step(alpha, k) == pytest.approx(brute_tokens(alpha, k), rel=1e-9)
    assert expected_tokens_per_step(alpha, k) == pytest.approx(
        sum(alpha**i for i in range(k + 1)), rel=1e-12
    )


def test_alpha_one_limit_and_vectors():
    assert expected_tokens_per_step(1.0, 7) == 8.0
    alphas = np.array([0.0, 0.5, 0.9, 1.0])
    ks = np.array([[1], [4]])
    got = expected_tokens_per_step(alphas, ks)
    assert got.shape == (2, 4)
    want = [[brute_tokens(a, int(k)) for a in alphas] for k in ks[:, 0]]
    np.testing.assert_allclose(got, want)
    sp = expected_speedup(alphas, 3, np.array([[0.0], [0.5]]))
    np.testing.assert_allclose(
        sp, [[brute_tokens(a, 3) / (3 * c + 1) for a in alphas] for c in (0.0, 0.5)]
    )
    assert isinstance(expected_tokens_per_step(0.5, 2), float)


def test_speedup_bound_when_alpha_exceeds_c():
    """Leviathan: if α > c some k gives speedup >= (1 + α)/(1 + c) (k = 1 does)."""
    for alpha, c in [(0.3, 0.1), (0.6, 0.5), (0.9, 0.05)]:
        best = expected_speedup(alpha, optimal_k(alpha, c), c)
        assert best >= (1 + alpha) / (1 + c) - 1e-12


@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.44, 0.7, 0.9, 0.99])
@pytest.mark.parametrize("c", [0.0, 0.01, 0.11, 0.5, 1.0])
def test_optimal_k_brute_force(alpha, c):
    speed = [brute_tokens(alpha, k) / (k * c + 1) for k in range(1, 17)]
    k = optimal_k(alpha, c, k_max=16)
    assert speed[k - 1] == pytest.approx(max(speed), rel=1e-12)
    assert 1 <= k <= 16


def test_acceptance_probability():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.2, 0.6])
    assert acceptance_probability(p, q) == pytest.approx(0.2 + 0.2 + 0.2)
    assert acceptance_probability(p, p) == pytest.approx(1.0)
    assert acceptance_probability([1.0, 0.0], [0.0, 1.0]) == 0.0
    rows = np.random.default_rng(0).dirichlet(np.ones(3), size=5)
    np.testing.assert_allclose(
        acceptance_probability(rows, q), [sum(map(min, zip(r, q, strict=True))) for r in rows]
    )
    with pytest.raises(ValueError, match="q"):
        acceptance_probability(p, [0.5, 0.5])
    with pytest.raises(ValueError, match="p"):
        acceptance_probability([0.5, 0.6], [0.5, 0.5])


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: expected_tokens_per_step(1.1, 2), "alpha"),
        (lambda: expected_tokens_per_step(float("nan"), 2), "alpha"),
        (lambda: expected_tokens_per_step(0.5, -1), "k"),
        (lambda: expected_tokens_per_step(0.5, 2.0), "k"),
        (lambda: expected_tokens_per_step(0.5, True), "k"),
        (lambda: expected_speedup(0.5, 2, -0.1), "c"),
        (lambda: optimal_k(0.5, 0.1, k_max=0), "k_max"),
        (lambda: optimal_k([0.5, 0.6], 0.1), "scalar"),
    ],
)
def test_theory_errors(call, name):
    with pytest.raises(ValueError, match=name):
        call()
