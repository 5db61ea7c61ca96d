"""The exact law of each rule's first emitted token (verify.accept_probs, output_law,
threshold_tradeoff) against hand-derived formulas and the verifier itself, and
sample_first_tokens against those laws."""

import numpy as np
import pytest
from support import chi2_critical, chi2_statistic

from specdec_lite.rules.distributions import entropy, tv_distance
from specdec_lite.rules.verify import (
    accept_probs,
    output_law,
    sample_first_tokens,
    threshold_tradeoff,
    verify,
)

P = np.array([0.43, 0.25, 0.14, 0.12, 0.06])  # target
Q = np.array([0.20, 0.40, 0.30, 0.05, 0.05])  # draft
RULES = [("exact", {}), ("greedy", {}), ("threshold", {"theta": 1.5}), ("typical", {}),
         ("typical", {"eps": 0.3, "delta": 0.9})]


def _pairs(n: int = 20, seed: int = 0):
    """Random (p, q) pairs of several sizes, some with zeros in p or q."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        v = int(rng.integers(2, 40))
        p, q = rng.dirichlet(np.full(v, 0.5)), rng.dirichlet(np.full(v, 0.5))
        if i % 3 == 1:
            p[rng.integers(v)] = 0.0
            p /= p.sum()
        if i % 3 == 2:
            q[rng.integers(v)] = 0.0
            q /= q.sum()
        yield p, q


def test_exact_law_is_the_target():
    for p, q in _pairs():
        np.testing.assert_allclose(output_law(p, q, "exact"), p, atol=1e-12)
    np.testing.assert_allclose(output_law(P, np.eye(5)[3]), P, atol=1e-12)  # point-mass draft


def test_greedy_law_is_one_hot_at_argmax_p():
    for p, q in _pairs():
        np.testing.assert_allclose(output_law(p, q, "greedy"), np.eye(len(p))[p.argmax()],
                                   atol=1e-12)


def test_threshold_law_differs_from_p_by_the_formula():
    # keep x while p(x) > θ q(x); a rejection draws from p, so out − p = q·keep − (Σ q·keep)·p
    for theta in (0.5, 1.0, 1.5, 3.0):
        for p, q in _pairs(seed=1):
            keep = (p > theta * q) & (q > 0)
            kept = q @ keep
            out = output_law(p, q, "threshold", theta=theta)
            np.testing.assert_allclose(out - p, q * keep - kept * p, atol=1e-12)
            assert float(tv_distance(out, p)) == pytest.approx(
                0.5 * np.abs(q * keep - kept * p).sum(), abs=1e-12)
    out = output_law(P, Q, "threshold", theta=1.5)
    assert float(tv_distance(out, P)) == pytest.approx(0.1125)  # worked by hand: lossy


def test_typical_law_formula():
    for p, q in _pairs(seed=2):
        keep = (p > min(0.09, 0.3 * np.exp(-entropy(p)))) & (q > 0)
        np.testing.assert_allclose(output_law(p, q, "typical"),
                                   q * keep + (q @ ~keep) * p, atol=1e-12)


@pytest.mark.parametrize(("rule", "params"), RULES)
def test_accept_probs_agree_with_the_verifier(rule, params):
    """a(x) of the deterministic rules is read off verify() itself, token by token; the
    exact rule's min(1, p/q) is checked against its acceptance frequency."""
    rng = np.random.default_rng(3)
    for p, q in _pairs(n=6, seed=3):
        a = accept_probs(p, q, rule, **params)
        assert a.shape == p.shape and np.all((a >= 0) & (a <= 1))
        assert np.all(a[q == 0] == 0)
        for x in np.flatnonzero(q > 0):
            if rule == "exact":
                assert a[x] == pytest.approx(min(1.0, p[x] / q[x]))
                continue
            step = verify([x], q[None, :], np.stack([p, p]), rng, rule=rule, **params)
            assert a[x] == step.n_accepted


def test_threshold_tradeoff_matches_the_laws():
    thetas = np.array([0.5, 1.5, 100.0])
    tv, acceptance = threshold_tradeoff(P, Q, thetas)
    for i, theta in enumerate(thetas):
        assert tv[i] == pytest.approx(float(tv_distance(output_law(P, Q, "threshold",
                                                                   theta=theta), P)))
        assert acceptance[i] == pytest.approx(Q[P > theta * Q].sum())
    assert tv[1] > 0.05 and tv[2] == pytest.approx(0.0) and acceptance[2] == 0.0


@pytest.mark.statistical
@pytest.mark.parametrize(("rule", "params"), RULES[:4])
def test_sampled_first_tokens_follow_the_law(rule, params):
    n = 20_000
    first, accepted = sample_first_tokens(P, Q, n, np.random.default_rng(4), rule, **params)
    law = output_law(P, Q, rule, **params)
    stat, df = chi2_statistic([(int(t),) for t in first],
                              {(y,): float(law[y]) for y in np.flatnonzero(law > 0)})
    assert stat < chi2_critical(max(df, 1))
    assert accepted.mean() == pytest.approx(Q @ accept_probs(P, Q, rule, **params), abs=0.015)


def test_sampled_first_tokens_are_reproducible():
    a = sample_first_tokens(P, Q, 50, np.random.default_rng(5), "threshold", theta=1.2)
    b = sample_first_tokens(P, Q, 50, np.random.default_rng(5), "threshold", theta=1.2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_greedy_draft_reporting_softmax_is_biased():
    # a draft that always proposes token 0 but reports its softmax [0.8, 0.2] as q: the
    # law assumes x ~ q, so the output is no longer p
    p, q = np.array([0.6, 0.4]), np.array([0.8, 0.2])
    rng = np.random.default_rng(0)
    first = [verify([0], q[None, :], np.stack([p, p]), rng).tokens[0] for _ in range(5_000)]
    freq = np.bincount(first, minlength=2) / len(first)
    np.testing.assert_allclose(freq, [0.75, 0.25], atol=0.03)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: output_law([0.5, 0.6], Q[:2]), ValueError, "p"),
        (lambda: output_law(P, Q[:3] / Q[:3].sum()), ValueError, "q"),
        (lambda: output_law(np.stack([P, P]), Q), ValueError, "p"),
        (lambda: output_law(P, Q, "nope"), ValueError, "rule"),
        (lambda: output_law(P, Q, "threshold"), ValueError, "theta"),
        (lambda: accept_probs(P, Q, "exact", theta=1.0), TypeError, "theta"),
        (lambda: accept_probs(P, Q, "typical", eps=-1.0), ValueError, "eps"),
        (lambda: threshold_tradeoff(P, Q, np.ones((2, 2))), ValueError, "thetas"),
        (lambda: sample_first_tokens(P, Q, 0, np.random.default_rng(0)), ValueError, "n"),
        (lambda: sample_first_tokens(P, Q, 5, 0), TypeError, "rng"),
    ],
)
def test_errors_name_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()
