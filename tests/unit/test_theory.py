"""theory.py against brute-force sums, the check values in REFERENCES.md, and the pointwise
formulas its grids tabulate."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from specdec_lite.rules.distributions import apply_temperature
from specdec_lite.rules.theory import (
    acceptance_probability,
    alpha_temperature_grid,
    best_k_table,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
    optimal_k_grid,
    speedup_curve,
    verify_ratio_at,
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


# ---------------------------------------------------------------------------
# The grids the book draws: verification costs, speedup curves, the best k
# ---------------------------------------------------------------------------

RATIO = np.array([1.0, 1.5, 1.8, 2.0, 2.1])  # [5]: T(n)/T(1) for n = 1..5


def test_library_math_needs_no_matplotlib():
    code = ("import sys, numpy as np\n"
            "import specdec_lite.rules.verify, specdec_lite.rules.theory\n"
            "from specdec_lite.rules.verify import output_law, threshold_tradeoff\n"
            "from specdec_lite.rules.theory import best_k_table, optimal_k_grid, speedup_curve\n"
            "p, q = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.5, 0.3])\n"
            "output_law(p, q, 'threshold', theta=1.2); threshold_tradeoff(p, q, [1.0, 2.0])\n"
            "speedup_curve(0.7, np.arange(1, 5), 0.1); optimal_k_grid([0.5], [0.1], 8)\n"
            "best_k_table(0.7, 0.1)\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "MPLBACKEND": "Agg"}, timeout=120)
    assert done.returncode == 0, done.stderr


def test_alpha_temperature_grid_matches_pointwise():
    p, q = np.array([0.43, 0.25, 0.14, 0.12, 0.06]), np.array([0.2, 0.4, 0.3, 0.05, 0.05])
    temps = np.array([0.0, 0.5, 1.0, 2.0])
    grid = alpha_temperature_grid(p, q, temps, temps[1:3])
    assert grid.shape == (4, 2)
    for i, t_p in enumerate(temps):
        for j, t_q in enumerate(temps[1:3]):
            expected = acceptance_probability(apply_temperature(p, t_p),
                                              apply_temperature(q, t_q))
            assert grid[i, j] == pytest.approx(expected)
    with pytest.raises(ValueError, match="t_drafts"):
        alpha_temperature_grid(p, q, temps, np.ones((2, 2)))


def test_verify_ratio_at_measured_flat_sparse_and_simulated():
    n = np.array([1, 3, 5, 6])
    np.testing.assert_allclose(verify_ratio_at(n, RATIO), [1.0, 1.8, 2.1, np.nan])
    np.testing.assert_array_equal(verify_ratio_at(n), np.ones(4))
    np.testing.assert_array_equal(verify_ratio_at(np.array([1, 4, 5, 9]), width=4), [1, 1, 2, 3])
    sparse = verify_ratio_at(np.arange(1, 6), [2.2, 1.0, 1.6], sizes=[4, 1, 2])  # any order
    np.testing.assert_allclose(sparse, [1.0, 1.6, np.nan, 2.2, np.nan])
    assert verify_ratio_at(3, RATIO) == pytest.approx(1.8)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": [0, 1]}, "n"),
        ({"n": [1.5]}, "n"),
        ({"n": [1], "ratio": [1.0, -1.0]}, "ratio"),
        ({"n": [1], "ratio": [[1.0]]}, "ratio"),
        ({"n": [1], "ratio": [1.0, 2.0], "sizes": [1, 1]}, "sizes"),
        ({"n": [1], "ratio": [1.0, 2.0], "sizes": [1]}, "sizes"),
        ({"n": [1], "width": 0}, "width"),
        ({"n": [1], "ratio": [1.0], "width": 4}, "not both"),
    ],
)
def test_verify_ratio_at_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        verify_ratio_at(**kwargs)


def test_speedup_curve_matches_expected_speedup_pointwise():
    ks = np.arange(0, 6)
    for alpha in (0.0, 0.3, 0.7, 1.0):
        for c in (0.0, 0.1, 0.6):
            np.testing.assert_allclose(speedup_curve(alpha, ks, c), expected_speedup(alpha, ks, c))
            measured = speedup_curve(alpha, ks, c, RATIO)  # k + 1 = 6 is beyond the curve
            np.testing.assert_allclose(measured[:5], expected_speedup(alpha, ks[:5], c,
                                                                      verify_cost=RATIO))
            assert np.isnan(measured[5])
            simulated = speedup_curve(alpha, ks, c, width=2)
            np.testing.assert_allclose(simulated, expected_speedup(
                alpha, ks, c, verify_cost=np.ceil((ks + 1) / 2)))
    with pytest.raises(ValueError, match="scalar"):
        speedup_curve([0.5, 0.6], ks, 0.1)


def test_optimal_k_grid_agrees_with_optimal_k():
    alphas, cs = np.array([0.0, 0.3, 0.6, 0.9, 1.0]), np.array([0.0, 0.05, 0.2, 1.0])
    best_k, best = optimal_k_grid(alphas, cs, k_max=20)
    assert best_k.shape == best.shape == (4, 5)
    for i, c in enumerate(cs):
        for j, a in enumerate(alphas):
            assert best_k[i, j] == optimal_k(a, c, k_max=20)
            assert best[i, j] == pytest.approx(expected_speedup(a, best_k[i, j], c))
    best_k, best = optimal_k_grid(alphas, cs, k_max=20, ratio=RATIO)
    assert best_k.max() <= len(RATIO) - 1
    for i, c in enumerate(cs):
        for j, a in enumerate(alphas):
            ks = np.arange(1, len(RATIO))
            assert best[i, j] == pytest.approx(max(speedup_curve(a, ks, c, RATIO)))
    with pytest.raises(ValueError, match="k_max"):
        optimal_k_grid(alphas, cs, k_max=0)


CURVES = {
    "flat": 1.0,
    "linear": 1.0 + 0.15 * np.arange(40),  # r(n) = 1 + 0.15 (n − 1)
    "convex": 1.0 + 0.01 * np.arange(40) ** 2,
    "concave, increasing": 1.0 + 0.3 * np.sqrt(np.arange(40)),
}


@pytest.mark.parametrize("name", list(CURVES))
def test_best_k_table_stops_at_the_argmax(name):
    """The k where α^(k+1) > S(k)(c + Δr) first fails is the k that maximises S, on a grid
    of α and c, for a flat and for increasing verification costs."""
    curve = CURVES[name]
    for alpha in np.linspace(0.0, 1.0, 21):
        for c in np.linspace(0.0, 1.0, 21):
            table = best_k_table(alpha, c, curve, k_max=30)
            n_rows = len(table.k)
            ks = np.arange(1, n_rows + 2)  # every k whose S the table's costs can price
            r = np.full(n_rows + 2, curve) if np.ndim(curve) == 0 else curve[: n_rows + 2]
            speed = np.array([brute_tokens(alpha, int(k)) / (k * c + r[k]) for k in ks])
            top = speed.max()
            assert speed[table.best_k - 1] == pytest.approx(top, rel=1e-12)
            assert speed[table.argmax_k - 1] == pytest.approx(top, rel=1e-12)
            if np.sum(speed >= top * (1 - 1e-9)) == 1:  # a unique best k, not a tie
                assert table.best_k == table.argmax_k == int(ks[np.argmax(speed)])


def test_best_k_table_columns():
    curve = CURVES["linear"][:8]  # r(1..8): rows k = 1..6
    table = best_k_table(0.8, 0.1, curve)
    np.testing.assert_array_equal(table.k, np.arange(1, 7))
    speed = np.array([brute_tokens(0.8, k) / (0.1 * k + curve[k]) for k in range(1, 8)])
    np.testing.assert_allclose(table.speedup, speed[:6])
    np.testing.assert_allclose(table.gain, 0.8 ** (table.k + 1.0))
    np.testing.assert_allclose(table.price, speed[:6] * (0.1 + 0.15))
    np.testing.assert_array_equal(table.pays, speed[1:] > speed[:-1])
    flat = best_k_table(0.8, 0.1, k_max=12)
    assert len(flat.k) == 12 and flat.best_k == flat.argmax_k == optimal_k(0.8, 0.1, k_max=13)
    never = best_k_table(1.0, 0.0, k_max=5)  # every token pays: stop past the table
    assert never.pays.all() and never.best_k == never.argmax_k == 6


def test_best_k_table_can_stop_at_a_local_peak_of_a_bumpy_curve():
    # r dips at n = 4: the step 2 -> 3 costs Δr = 1.0 and fails, the next ones pay again
    bumpy = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    table = best_k_table(0.95, 0.0, bumpy)
    assert table.best_k == 2 and not table.pays[1] and table.pays[2:].all()
    assert table.argmax_k == 9 and table.speedup[8 - 1] > table.speedup[2 - 1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 1.2, "c": 0.1}, "alpha"),
        ({"alpha": 0.5, "c": -0.1}, "c"),
        ({"alpha": [0.5], "c": 0.1}, "scalar"),
        ({"alpha": 0.5, "c": 0.1, "verify_cost": [1.0, 1.2]}, "verify_cost"),
        ({"alpha": 0.5, "c": 0.1, "verify_cost": 0.0}, "verify_cost"),
        ({"alpha": 0.5, "c": 0.1, "k_max": 0}, "k_max"),
    ],
)
def test_best_k_table_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        best_k_table(**kwargs)
