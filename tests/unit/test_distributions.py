"""distributions.py against direct formulas and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specdec_lite.rules.distributions import (
    apply_temperature,
    as_generator,
    check_probs,
    check_temperature,
    entropy,
    overlap,
    sample,
    softmax,
    top_k_filter,
    top_p_filter,
    tv_distance,
)

RNG = np.random.default_rng(0)
P = RNG.dirichlet(np.ones(6), size=4)  # [4, 6]
P[1, 2] = 0.0
P[1] /= P[1].sum()


class FixedUniform:
    """A stand-in rng whose random() returns a fixed value."""

    def __init__(self, u: float) -> None:
        self.u = u

    def random(self, size=None):
        return self.u if size is None else np.full(size, self.u)


def test_softmax_matches_formula_and_handles_minus_inf():
    z = np.array([1.0, -2.0, 0.5, 1000.0])
    e = [math.exp(v - 1000.0) for v in z]
    np.testing.assert_allclose(softmax(z), np.array(e) / sum(e))
    out = softmax(np.array([[0.0, -np.inf, 0.0]]))
    np.testing.assert_allclose(out, [[0.5, 0.0, 0.5]])


@pytest.mark.parametrize("temperature", [0.3, 0.7, 1.0, 1.5, 4.0])
def test_apply_temperature_matches_power_formula(temperature):
    out = apply_temperature(P, temperature)
    for row, p in zip(out, P, strict=True):
        w = [x ** (1 / temperature) if x > 0 else 0.0 for x in p]
        np.testing.assert_allclose(row, np.array(w) / sum(w), rtol=1e-12)
    assert out[1, 2] == 0.0  # zero stays zero


def test_apply_temperature_zero_is_argmax_with_lowest_id_ties():
    out = apply_temperature(np.array([[0.2, 0.4, 0.4], [0.7, 0.1, 0.2]]), 0)
    np.testing.assert_array_equal(out, [[0, 1, 0], [1, 0, 0]])


@pytest.mark.parametrize("temperature", [1e-300, 1e-310, 5e-324])
def test_apply_temperature_tiny_is_finite(temperature):
    out = apply_temperature(np.array([[0.5, 0.5], [0.3, 0.7], [0.0, 1.0]]), temperature)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=-1), 1.0)
    np.testing.assert_allclose(out[1:], [[0, 1], [0, 1]])


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "1", True, None])
def test_check_temperature_rejects(bad):
    with pytest.raises((ValueError, TypeError), match="temperature"):
        check_temperature(bad)


def test_top_k_matches_brute_force():
    for top_k in range(1, 8):
        out = top_k_filter(P, top_k)
        for row, p in zip(out, P, strict=True):
            keep = sorted(range(6), key=lambda i: (-p[i], i))[:top_k]
            want = np.array([p[i] if i in keep else 0.0 for i in range(6)])
            np.testing.assert_allclose(row, want / want.sum())
    with pytest.raises(ValueError, match="top_k"):
        top_k_filter(P, 0)


def test_top_p_matches_brute_force():
    for top_p in (0.05, 0.3, 0.5, 0.9, 1.0):
        out = top_p_filter(P, top_p)
        for row, p in zip(out, P, strict=True):
            order = sorted(range(6), key=lambda i: (-p[i], i))
            keep, mass = [], 0.0
            for i in order:
                if mass >= top_p:
                    break
                keep.append(i)
                mass += p[i]
            want = np.array([p[i] if i in keep else 0.0 for i in range(6)])
            np.testing.assert_allclose(row, want / want.sum())
    for bad in (0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="top_p"):
            top_p_filter(P, bad)


def test_sample_is_inverse_cdf():
    p = np.array([0.1, 0.0, 0.6, 0.3])
    cdf = np.cumsum(p)
    for u in np.linspace(0, 1, 1001)[:-1]:
        want = next(i for i in range(4) if u < cdf[i])
        assert sample(p, FixedUniform(u)) == want
    assert sample(p, FixedUniform(np.nextafter(1.0, 0))) == 3
    # unnormalised rows, and zero-mass tokens are never drawn even at u = 0
    assert sample(np.array([0.0, 0.0, 2.0]), FixedUniform(0.0)) == 2
    assert sample(np.array([0.0, 2.0, 0.0]), FixedUniform(np.nextafter(1.0, 0))) == 1
    assert sample([0.1, 0.0, 0.6, 0.3], FixedUniform(0.65)) == 2  # a plain list works too


def test_sample_frequencies():
    p = np.array([0.2, 0.5, 0.3])
    rng = np.random.default_rng(1)
    counts = np.bincount([sample(p, rng) for _ in range(20000)], minlength=3)
    np.testing.assert_allclose(counts / 20000, p, atol=0.015)


def test_overlap_tv_entropy_brute_force():
    p, q = P[0], P[1]
    assert overlap(p, q) == pytest.approx(sum(min(a, b) for a, b in zip(p, q, strict=True)))
    assert tv_distance(p, q) == pytest.approx(
        0.5 * sum(abs(a - b) for a, b in zip(p, q, strict=True))
    )
    assert tv_distance(p, q) == pytest.approx(1 - overlap(p, q))
    assert entropy(q) == pytest.approx(-sum(x * math.log(x) for x in q if x > 0))
    assert entropy(np.array([0.0, 1.0])) == 0.0
    np.testing.assert_allclose(entropy(P), [entropy(r) for r in P])


def test_check_probs():
    np.testing.assert_array_equal(check_probs([0.5, 0.5]), [0.5, 0.5])
    cases = [
        ([np.nan, 1.0], "NaN"),
        ([1.5, -0.5], "negative"),
        ([0.5, 0.4], "sum to 1"),
        (np.float64(1.0), "axis"),
    ]
    for bad, msg in cases:
        with pytest.raises(ValueError, match=msg) as info:
            check_probs(bad, "mything")
        assert "mything" in str(info.value)
    with pytest.raises(ValueError, match="vocab_size=3"):
        check_probs([0.5, 0.5], vocab_size=3)
    with pytest.raises(TypeError, match="probs"):
        check_probs(["a", "b"])


def test_as_generator():
    g = np.random.default_rng(5)
    assert as_generator(g) is g
    assert as_generator(3).random() == np.random.default_rng(3).random()
    assert as_generator(np.int64(3)).random() == np.random.default_rng(3).random()
    for bad in (1.5, "3", True, [1]):
        with pytest.raises(TypeError, match="seed"):
            as_generator(bad)
    with pytest.raises(ValueError, match="seed"):
        as_generator(-1)
