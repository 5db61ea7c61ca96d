"""Helpers for the statistical tests: exact sequence probabilities and a chi-square test."""

from __future__ import annotations

import itertools
import math

import numpy as np

from specdec_lite.distributions import apply_temperature


def enumerate_sequences(model, prompt: list[int], length: int, temperature: float) -> dict:
    """P(x_1..x_length | prompt) under ``model`` at ``temperature``, for every sequence."""
    V = model.vocab_size
    out = {}
    for seq in itertools.product(range(V), repeat=length):
        rows = apply_temperature(model.probs(np.asarray(prompt + list(seq[:-1]))), temperature)
        rows = rows[len(prompt) - 1 :]  # [length, V]: the row before each new token
        out[seq] = float(np.prod(rows[np.arange(length), seq]))
    return out


def chi2_critical(df: int, upper_tail: float = 1e-3) -> float:
    """Wilson–Hilferty approximation of the chi-square quantile (accurate for df >= 10)."""
    z = {1e-3: 3.090232, 1e-4: 3.719016, 1e-6: 4.753424}[upper_tail]
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2_statistic(
    samples: list[tuple], expected: dict, min_expected: float = 5.0
) -> tuple[float, int]:
    """Pearson's chi-square of ``samples`` against ``expected`` probabilities.

    Cells whose expected count is below ``min_expected`` are pooled into one cell.
    Returns (statistic, degrees of freedom).
    """
    n = len(samples)
    counts: dict = {}
    for s in samples:
        counts[s] = counts.get(s, 0) + 1
    stat, cells, pooled_obs, pooled_exp = 0.0, 0, 0, 0.0
    for seq, prob in expected.items():
        e, o = n * prob, counts.pop(seq, 0)
        if e < min_expected:
            pooled_obs, pooled_exp = pooled_obs + o, pooled_exp + e
            continue
        stat += (o - e) ** 2 / e
        cells += 1
    assert not counts, f"sampled sequences with zero probability: {list(counts)[:3]}"
    if pooled_exp > 0:
        stat += (pooled_obs - pooled_exp) ** 2 / pooled_exp
        cells += 1
    return stat, cells - 1
