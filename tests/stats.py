"""The statistical tests' helpers, as the older tests call them; the work is done by
:mod:`specdec_lite.exactness`, which the newer tests import directly."""

from __future__ import annotations

from specdec_lite.exactness import chi2_isf, chi_square, sequence_law


def enumerate_sequences(model, prompt: list[int], length: int, temperature: float) -> dict:
    """P(x_1..x_length | prompt) under ``model`` at ``temperature``, for every sequence of
    positive probability (see :func:`specdec_lite.exactness.sequence_law`)."""
    return sequence_law(model, prompt, length, temperature)


def chi2_critical(df: int, upper_tail: float = 1e-3) -> float:
    """The chi-square value exceeded with probability ``upper_tail`` at ``df``."""
    return chi2_isf(upper_tail, df)


def chi2_statistic(
    samples: list[tuple], expected: dict, min_expected: float = 5.0
) -> tuple[float, int]:
    """Pearson's chi-square of ``samples`` against ``expected`` and its degrees of freedom
    (see :func:`specdec_lite.exactness.chi_square`); fails on any impossible sample."""
    result = chi_square(samples, expected, min_expected)
    assert result.n_impossible == 0, f"sampled sequences with zero probability: {result}"
    return result.statistic, result.df
