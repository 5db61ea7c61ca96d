"""Chapter 2's figures: where the exact rule's output mass comes from, and how far the
lossy rules' output drifts from the target. The laws drawn here are computed in
:mod:`specdec_lite.rules.verify` (``output_law``, ``threshold_tradeoff``,
``sample_first_tokens``)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..rules.distributions import tv_distance
from ..rules.verify import output_law, residual, sample_first_tokens, threshold_tradeoff
from .common import COLORS, figure_axes

#: Default θ grid for the threshold rule's TV(θ) curve.
THETA_GRID = np.linspace(0.25, 4.0, 301)


def _token_axis(ax: plt.Axes, labels: list[str] | None, vocab_size: int) -> np.ndarray:
    x = np.arange(vocab_size)
    ax.set_xticks(x)
    ax.set_xticklabels(labels if labels is not None else [str(i) for i in x])
    ax.set_ylabel("probability")
    return x


def plot_rule_decomposition(
    p: np.ndarray,
    q: np.ndarray,
    labels: list[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> plt.Figure:
    """Where each token's output mass comes from under the exact rule.

    Stacked bars per token: min(p, q) (drafted and accepted) plus
    (1 − β)·norm(max(0, p − q)) (rejected, then resampled); black ticks mark p,
    orange dashes mark q. The stacks reach the ticks exactly.
    """
    p = np.asarray(p, dtype=np.float64)  # [V]
    q = np.asarray(q, dtype=np.float64)  # [V]
    fig, ax = figure_axes(ax)
    x = _token_axis(ax, labels, len(p))
    kept = np.minimum(p, q)  # [V]
    beta = kept.sum()
    resampled = (1.0 - beta) * residual(p, q)  # [V]
    ax.bar(x, kept, 0.6, color=COLORS["accepted"], label="accepted: min(p, q)")
    ax.bar(
        x,
        resampled,
        0.6,
        bottom=kept,
        color=COLORS["correction"],
        label=f"resampled: (1 − β)·residual, 1 − β = {1 - beta:.2f}",
    )
    ax.hlines(p, x - 0.38, x + 0.38, colors=COLORS["target"], lw=2.2, label="target p")
    ax.hlines(q, x - 0.38, x + 0.38, colors=COLORS["draft"], lw=2, ls="--", label="draft q")
    ax.set_ylim(0, 1.1 * max(p.max(), q.max()))
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(title or "Exact rule: accepted mass + resampled mass = p")
    return fig


def plot_output_vs_target(
    p: np.ndarray,
    output: np.ndarray,
    labels: list[str] | None = None,
    sampled: np.ndarray | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    output_label: str = "output",
) -> plt.Figure:
    """Side-by-side bars of the target p and a rule's output distribution [V].

    ``sampled`` (optional, [V]) adds black dots: output frequencies measured by
    sampling. The title reports TV(output, p) unless ``title`` is given.
    """
    p = np.asarray(p, dtype=np.float64)  # [V]
    output = np.asarray(output, dtype=np.float64)  # [V]
    fig, ax = figure_axes(ax)
    x = _token_axis(ax, labels, len(p))
    ax.bar(x - 0.2, p, 0.4, color=COLORS["target"], label="target p")
    ax.bar(x + 0.2, output, 0.4, color=COLORS["theory"], alpha=0.75, label=output_label)
    if sampled is not None:
        ax.plot(x + 0.2, sampled, "o", color="black", ms=4, label="sampled")
    ax.set_ylim(0, 1.2 * max(p.max(), output.max()))
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or f"TV(output, p) = {float(tv_distance(output, p)):.3f}")
    return fig


def plot_threshold_tv(
    p: np.ndarray,
    q: np.ndarray,
    theta: float | None = None,
    sampled: tuple[np.ndarray, np.ndarray] | None = None,
    thetas: np.ndarray = THETA_GRID,
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> plt.Figure:
    """TV(output, p) and acceptance rate of the threshold rule against θ (exact, by enumeration).

    Dashed lines give the exact rule for comparison (TV = 0, acceptance β).
    ``sampled`` = (θ values, measured TVs) adds black dots; ``theta`` adds a marker line.
    """
    fig, ax = figure_axes(ax)
    tv, acceptance = threshold_tradeoff(p, q, thetas)
    beta = float(np.minimum(p, q).sum())
    ax.step(thetas, tv, where="post", color=COLORS["rejected"], lw=2, label="threshold: TV(out, p)")
    ax.step(
        thetas,
        acceptance,
        where="post",
        color=COLORS["accepted"],
        lw=2,
        label="threshold: acceptance",
    )
    ax.axhline(0.0, color=COLORS["rejected"], ls="--", lw=1, label="exact rule: TV = 0")
    ax.axhline(beta, color=COLORS["accepted"], ls="--", lw=1, label=f"exact rule: β = {beta:.2f}")
    if sampled is not None:
        ax.plot(sampled[0], sampled[1], "o", color="black", ms=5, label="threshold: sampled TV")
    if theta is not None:
        ax.axvline(theta, color=COLORS["theory"], lw=1, ls=":")
    ax.set_xlabel("θ (accept x while p(x)/q(x) > θ)")
    ax.set_ylim(-0.03, 1.05)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or "Threshold rule: bias and acceptance against θ")
    return fig


def plot_threshold_drift(
    p: np.ndarray,
    q: np.ndarray,
    theta: float = 1.5,
    labels: list[str] | None = None,
    n_samples: int = 0,
    seed: int = 0,
) -> plt.Figure:
    """Two panels for the threshold rule at one θ: its output vs p (left), TV(θ) curve (right).

    With ``n_samples`` > 0 the left panel adds the frequencies of that many
    sampled one-token steps (``sample_first_tokens``).
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    output = output_law(p, q, "threshold", theta=theta)  # [V]
    sampled = None
    if n_samples > 0:
        first, _ = sample_first_tokens(
            p, q, n_samples, np.random.default_rng(seed), "threshold", theta=theta
        )
        sampled = np.bincount(first, minlength=len(p)) / n_samples
    plot_output_vs_target(
        p,
        output,
        labels,
        sampled,
        ax=left,
        title=f"θ = {theta:.2f}: TV(output, p) = {float(tv_distance(output, p)):.3f}",
    )
    plot_threshold_tv(p, q, theta=theta, ax=right)
    fig.tight_layout()
    return fig
