"""verify(): the four rules against hand computations and exact enumeration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specdec_lite.rules.verify import RULES, Verification, check_rule, residual, verify


class ScriptedRng:
    """A stand-in Generator whose uniforms come from a fixed list, in order."""

    def __init__(self, values) -> None:
        self.values = list(values)

    def random(self, size=None):
        if size is None:
            return self.values.pop(0)
        out = np.array(self.values[:size], dtype=float)
        del self.values[:size]
        return out


P = np.array([0.5, 0.3, 0.15, 0.05])
Q = np.array([0.2, 0.5, 0.05, 0.25])
GRID = (np.arange(1000) + 0.5) / 1000  # midpoints: exact quadrature of U(0, 1) up to 1/1000


def one(rows) -> np.ndarray:
    return np.atleast_2d(np.asarray(rows, dtype=float))


def test_residual_hand_computation():
    # max(0, p − q) = [0.3, 0, 0.1, 0] → normalised [0.75, 0, 0.25, 0]
    np.testing.assert_allclose(residual(P, Q), [0.75, 0.0, 0.25, 0.0])
    np.testing.assert_allclose(residual(P, P), P)  # fallback, no NaN
    batch = residual(np.stack([P, Q]), np.stack([Q, P]))
    np.testing.assert_allclose(batch[1], [0.0, 0.5, 0.0, 0.5])  # max(0, q − p) = [0, .2, 0, .2]
    assert np.all(np.isfinite(batch))
    mixed = residual(np.stack([P, P]), np.stack([Q, P]))  # one row falls back, one does not
    np.testing.assert_allclose(mixed, [[0.75, 0.0, 0.25, 0.0], P])


def test_exact_accept_probability_is_min_one_p_over_q():
    """Enumerating the acceptance uniform r over a fine grid gives min(1, p(x)/q(x))."""
    for x in range(4):
        accepted = 0
        for r in GRID:
            res = verify([x], one(Q), np.stack([P, P]), ScriptedRng([r, 0.5]), rule="exact")
            accepted += res.n_accepted
        assert accepted / len(GRID) == pytest.approx(min(1.0, P[x] / Q[x]), abs=1.5e-3)


def test_exact_correction_is_residual():
    """Enumerating the sampling uniform after a certain rejection gives norm(max(0, p − q))."""
    counts = np.zeros(4)
    for u in GRID:
        res = verify([1], one(Q), np.stack([P, P]), ScriptedRng([0.99999, u]), rule="exact")
        assert res.n_accepted == 0 and res.extra == "correction" and len(res.tokens) == 1
        counts[res.tokens[0]] += 1
    np.testing.assert_allclose(counts / len(GRID), residual(P, Q), atol=1.5e-3)


def test_exact_first_token_distribution_equals_p():
    """P(first token = y) = min(p, q)(y) + (1 − Σ min(p, q))·residual(y) = p(y), computed by
    enumerating the draft token x (weight q(x)) and both uniforms on a grid."""
    small = (np.arange(100) + 0.5) / 100
    emitted = np.zeros(4)
    for x in range(4):
        for r in small:
            res = verify([x], one(Q), np.stack([P, P]), ScriptedRng([r] + [0.5]), rule="exact")
            if res.n_accepted:
                emitted[x] += Q[x] / len(small)
            else:  # the correction's distribution, enumerated over its uniform
                for u in small[::2]:
                    res2 = verify([x], one(Q), np.stack([P, P]), ScriptedRng([r, u]), rule="exact")
                    emitted[res2.tokens[0]] += Q[x] / len(small) / len(small[::2])
    beta = np.minimum(P, Q).sum()
    formula = np.minimum(P, Q) + (1 - beta) * residual(P, Q)
    np.testing.assert_allclose(formula, P, atol=1e-15)
    np.testing.assert_allclose(emitted, formula, atol=0.01)


def test_exact_first_token_empirical():
    rng = np.random.default_rng(0)
    n = 10000
    counts = np.zeros(4)
    for x in rng.choice(4, p=Q, size=n).tolist():
        counts[verify([x], one(Q), np.stack([P, P]), rng).tokens[0]] += 1
    np.testing.assert_allclose(counts / n, P, atol=4 * math.sqrt(0.25 / n))


def test_no_nan_edge_cases():
    rng = np.random.default_rng(1)
    # p == q: everything accepted, bonus from the last row
    for _ in range(50):
        res = verify([0, 2], np.stack([P, P]), np.stack([P, P, P]), rng)
        assert res.n_accepted == 2 and res.extra == "bonus" and len(res.tokens) == 3
    # one-hot q (point-mass draft) is accepted with probability p(x)
    hot = np.array([0.0, 1.0, 0.0, 0.0])
    acc = [verify([1], one(hot), np.stack([P, P]), rng).n_accepted for _ in range(4000)]
    assert np.mean(acc) == pytest.approx(P[1], abs=0.03)
    # disjoint supports: never accepted, the correction comes from p
    p = np.array([0.6, 0.4, 0.0, 0.0])
    q = np.array([0.0, 0.0, 0.3, 0.7])
    for _ in range(50):
        res = verify([3], one(q), np.stack([p, p]), rng)
        assert res.n_accepted == 0 and res.tokens[0] in (0, 1)
    # tiny q: p/q is huge, accepted, no overflow or NaN
    tiny = np.array([1e-300, 1 - 1e-300, 0.0, 0.0])
    with np.errstate(all="raise"):
        res = verify([0], one(tiny), np.stack([P, P]), rng)
    assert res.n_accepted == 1
    # tiny p, one-hot-ish q: rejected, residual is finite
    res = verify([1], one(hot), np.stack([np.array([1e-300, 1e-300, 1 - 2e-300, 0.0]), P]), rng)
    assert res.tokens[-1] in (0, 2) and np.all(np.isfinite(residual(P, hot)))


def test_bonus_and_k_zero():
    target = np.stack([P, P, np.array([0.0, 0.0, 0.0, 1.0])])
    res = verify([0, 0], np.stack([P, P]), target, ScriptedRng([0.0, 0.0, 0.3]))
    assert res == Verification(res.tokens, 2, "bonus")
    np.testing.assert_array_equal(res.tokens, [0, 0, 3])
    # k = 0: one token from p_1
    res = verify(
        np.zeros(0, dtype=int),
        np.zeros((0, 4)),
        one([0.0, 1.0, 0.0, 0.0]),
        np.random.default_rng(0),
    )
    assert res.n_accepted == 0 and res.extra == "bonus"
    np.testing.assert_array_equal(res.tokens, [1])
    for rule, params in [("greedy", {}), ("threshold", {"theta": 0.5}), ("typical", {})]:
        res = verify([], np.zeros((0, 4)), one(P), np.random.default_rng(0), rule=rule, **params)
        assert res.n_accepted == 0 and len(res.tokens) == 1


def test_greedy_rule():
    p1 = np.array([0.1, 0.6, 0.3, 0.0])  # argmax 1
    p2 = np.array([0.4, 0.1, 0.1, 0.4])  # argmax 0 (tie → lowest id)
    p3 = np.array([0.0, 0.0, 0.2, 0.8])  # argmax 3
    target = np.stack([p1, p2, p3])
    q = np.stack([P, P])
    cases = [
        ([1, 0], 2, [1, 0, 3], "bonus"),
        ([1, 3], 1, [1, 0], "correction"),
        ([2, 0], 0, [1], "correction"),
    ]
    for draft, n, tokens, extra in cases:
        res = verify(draft, q, target, None, rule="greedy")
        assert res.n_accepted == n and res.extra == extra
        np.testing.assert_array_equal(res.tokens, tokens)


def test_threshold_rule_accepts_while_ratio_exceeds_theta():
    # ratios p/q at x: 0.5/0.2 = 2.5, 0.3/0.5 = 0.6, 0.15/0.05 = 3, 0.05/0.25 = 0.2
    q = np.stack([Q, Q, Q])
    target = np.stack([P, P, P, P])
    rng = np.random.default_rng(0)
    for theta, draft, n in [
        (0.5, [0, 1, 3], 2),
        (1.0, [0, 2, 1], 2),
        (2.9, [2, 0, 2], 1),
        (0.1, [3, 3, 3], 3),
    ]:
        res = verify(draft, q, target, rng, rule="threshold", theta=theta)
        ratios = P[draft] / Q[draft]
        want = next((i for i, r in enumerate(ratios) if not r > theta), 3)
        assert res.n_accepted == want == n


def test_typical_cutoff_hand_computation():
    p = np.array([0.6, 0.25, 0.1, 0.05])
    h = -sum(x * math.log(x) for x in p)
    for eps, delta in [(0.09, 0.3), (0.5, 0.3), (0.2, 1.0)]:
        cutoff = min(eps, delta * math.exp(-h))
        for x in range(4):
            res = verify(
                [x],
                one(Q),
                np.stack([p, p]),
                np.random.default_rng(0),
                rule="typical",
                eps=eps,
                delta=delta,
            )
            assert res.n_accepted == int(p[x] > cutoff), (eps, delta, x, cutoff)
    # defaults eps=0.09, delta=0.3: cutoff = min(0.09, 0.3·e^−H) ≈ 0.09 → token 2 (0.1) kept, 3 not
    assert check_rule("typical", {}) == {"eps": 0.09, "delta": 0.3}
    assert (
        verify([2], one(Q), np.stack([p, p]), np.random.default_rng(0), rule="typical").n_accepted
        == 1
    )
    assert (
        verify([3], one(Q), np.stack([p, p]), np.random.default_rng(0), rule="typical").n_accepted
        == 0
    )


@pytest.mark.parametrize("rule", RULES)
def test_prefix_plus_exactly_one(rule):
    rng = np.random.default_rng(2)
    params = {"theta": 0.8} if rule == "threshold" else {}
    for _ in range(200):
        k = int(rng.integers(0, 6))
        q = rng.dirichlet(np.ones(4), size=k)
        p = rng.dirichlet(np.ones(4), size=k + 1)
        draft = np.array([rng.choice(4, p=row) for row in q], dtype=int)
        res = verify(draft, q, p, rng, rule=rule, **params)
        assert 0 <= res.n_accepted <= k and len(res.tokens) == res.n_accepted + 1
        np.testing.assert_array_equal(res.tokens[:-1], draft[: res.n_accepted])
        assert res.extra == ("bonus" if res.n_accepted == k else "correction")
        assert res.tokens.dtype == np.int64


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (([[0]], one(P), np.stack([P, P])), {}, "draft_tokens"),
        (([0], one(P), one(P)), {}, "target_probs"),
        (([0], one(P), np.stack([P, P])[:, :3]), {}, "draft_probs"),
        (([0], np.stack([P, P]), np.stack([P, P])), {}, "draft_probs"),
        (([4], one(P), np.stack([P, P])), {}, "draft_tokens"),
        (([-1], one(P), np.stack([P, P])), {}, "draft_tokens"),
        (([0], one([0.0, 1.0, 0.0, 0.0]), np.stack([P, P])), {}, "draft_probs"),
        (([0], one(P), np.stack([P, P])), {"rule": "nope"}, "rule"),
        (([0], one(P), np.stack([P, P])), {"rule": "threshold"}, "theta"),
        (([0], one(P), np.stack([P, P])), {"rule": "typical", "eps": 0}, "eps"),
        (([0], one(P), np.stack([P, P])), {"rule": "exact", "theta": 1.0}, "theta"),
    ],
)
def test_verify_errors(args, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        verify(*args, rng=np.random.default_rng(0), **kwargs)


def test_rng_required_for_sampling_rules():
    with pytest.raises(TypeError, match="rng"):
        verify([0], one(P), np.stack([P, P]), None, rule="exact")
