"""Quick checks of the data functions behind the book's figures (chapters 1-3)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from specdec_lite import (
    TableModel,
    acceptance_probability,
    apply_temperature,
    plots,
    speculative_generate,
    verify,
)
from specdec_lite.tokenizer import CharTokenizer

P = np.array([0.43, 0.25, 0.14, 0.12, 0.06])  # target
Q = np.array([0.20, 0.40, 0.30, 0.05, 0.05])  # draft


def test_exact_rule_output_is_target():
    np.testing.assert_allclose(plots.one_token_output(P, Q, "exact"), P, atol=1e-12)


def test_point_mass_draft_is_exact():
    np.testing.assert_allclose(plots.one_token_output(P, np.eye(5)[3]), P, atol=1e-12)


def test_greedy_draft_reporting_softmax_is_biased():
    # a draft that always proposes token 0 but reports its softmax [0.8, 0.2] as q
    p, q = np.array([0.6, 0.4]), np.array([0.8, 0.2])
    rng = np.random.default_rng(0)
    first = [verify([0], q[None, :], np.stack([p, p]), rng).tokens[0] for _ in range(5_000)]
    freq = np.bincount(first, minlength=2) / len(first)
    np.testing.assert_allclose(freq, [0.75, 0.25], atol=0.03)


def test_threshold_output_formula():
    theta = 1.5
    keep = P > theta * Q
    expected = Q * keep + Q[~keep].sum() * P
    np.testing.assert_allclose(plots.one_token_output(P, Q, "threshold", theta=theta), expected)
    tv, acceptance = plots.threshold_curves(P, Q, np.array([theta, 100.0]))
    assert tv[0] > 0.05 and tv[1] == pytest.approx(0.0)
    assert acceptance[0] == pytest.approx(Q[keep].sum()) and acceptance[1] == 0.0


def test_sampled_first_tokens_follow_target():
    first, accepted = plots.sample_first_tokens(P, Q, 5_000, np.random.default_rng(0))
    freq = np.bincount(first, minlength=5) / len(first)
    assert 0.5 * np.abs(freq - P).sum() < 0.04
    assert accepted.mean() == pytest.approx(np.minimum(P, Q).sum(), abs=0.03)


def test_alpha_temperature_grid_matches_pointwise():
    temps = np.array([0.5, 1.0, 2.0])
    grid = plots.alpha_temperature_grid(P, Q, temps, temps[:2])
    assert grid.shape == (3, 2)
    for i, t_p in enumerate(temps):
        for j, t_q in enumerate(temps[:2]):
            expected = acceptance_probability(apply_temperature(P, t_p), apply_temperature(Q, t_q))
            assert grid[i, j] == pytest.approx(expected)


def test_trace_cells_roles():
    tok = CharTokenizer("abcd")
    target, draft = TableModel(np.array([0.7, 0.1, 0.1, 0.1])), TableModel(np.full(4, 0.25))
    gen = speculative_generate(target, draft, [0], k=3, max_new_tokens=30, seed=1)
    for step in gen.steps:
        cells = plots._trace_cells(step)
        roles = [role for _, role in cells]
        assert roles.count("accepted") == step.n_accepted
        assert roles[-1] == step.extra
        emitted = [t for t, role in cells if role in ("accepted", "correction", "bonus")]
        assert tuple(emitted) == step.emitted
    plots.plot_trace(gen, tok, max_steps=4)
    plt.close("all")
