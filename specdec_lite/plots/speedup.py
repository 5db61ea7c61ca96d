"""Figures of the speedup S(α, k, c) = E(α, k) / (k·c + r(k+1)) of Thm 3.8: small
multiples against k, the best k over (α, c), one (α, c) explored, and the cost per
emitted token. A *verification cost* ``verify`` is a measured cost curve
r = [T(1)/T(1), T(2)/T(1), ...] (``data["cost_curve"]["ratio"]`` of a benchmark result);
``None`` means the flat cost r(n) = 1 of a memory-bound accelerator."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..rules.theory import expected_speedup, optimal_k, optimal_k_grid, speedup_curve
from .common import COLORS, figure_axes


def plot_theory_multiples(alphas: list[float], cs: list[float], k_max: int = 12,
                          verify: np.ndarray | None = None) -> plt.Figure:
    """Small multiples of Thm 3.8: one panel per draft cost c, one line per α, speedup
    against k, the best k of each line marked. Top row: flat verification (r = 1); bottom
    row, if ``verify`` is given: the measured cost curve (k up to where it ends)."""
    rows = [("flat verification cost (accelerator)", None)]
    if verify is not None:
        rows.append(("measured T(n) of this CPU", verify))
    fig, axes = plt.subplots(len(rows), len(cs), figsize=(3.4 * len(cs), 2.9 * len(rows)),
                             sharex=True, sharey=True, squeeze=False)
    ks = np.arange(1, k_max + 1)
    colors = plt.get_cmap("viridis")(np.linspace(0.1, 0.85, len(alphas)))
    for (name, curve), axes_row in zip(rows, axes, strict=True):
        for c, ax in zip(cs, axes_row, strict=True):
            for a, color in zip(alphas, colors, strict=True):
                s = speedup_curve(a, ks, c, curve)  # [k_max], NaN beyond the curve
                ax.plot(ks, s, "-", color=color, label=f"α = {a:g}")
                if np.isfinite(s).any():
                    best = int(np.nanargmax(s))
                    ax.plot(ks[best], s[best], "o", color=color, ms=5)
            ax.axhline(1.0, color=COLORS["theory"], lw=0.8)
            ax.set_title(f"c = {c:g}, {name}", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("k")
    for ax in axes[:, 0]:
        ax.set_ylabel("speedup")
    axes[0, -1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig


def plot_optimal_k_heatmap(alphas: np.ndarray, cs: np.ndarray, k_max: int = 16,
                           verify: np.ndarray | None = None, ax: plt.Axes | None = None,
                           points: dict[str, tuple[float, float]] | None = None,
                           title: str | None = None) -> plt.Figure:
    """The optimal k over (α, c) (colour), grey where no k gives a speedup above 1, with
    contours of the best speedup. ``points`` marks measured (α, c) pairs by label."""
    fig, ax = figure_axes(ax, figsize=(5.5, 4))
    best_k, best = optimal_k_grid(alphas, cs, k_max, verify)  # [len(cs), len(alphas)]
    shown = np.ma.masked_where(best <= 1.0, best_k)
    levels = np.arange(0.5, best_k.max() + 1.5)
    cmap = plt.get_cmap("viridis", len(levels) - 1).with_extremes(bad="#d9d9d9")
    mesh = ax.pcolormesh(alphas, cs, shown, cmap=cmap, vmin=levels[0], vmax=levels[-1],
                         shading="nearest")
    fig.colorbar(mesh, ax=ax, label="optimal k", ticks=np.arange(1, best_k.max() + 1,
                                                                   max(1, k_max // 8)))
    contours = ax.contour(alphas, cs, best, levels=[1.0, 1.5, 2.0, 3.0, 5.0],
                          colors="white", linewidths=0.8)
    ax.clabel(contours, fmt=lambda v: f"{v:g}×", fontsize=7)
    for i, (label, (a, c)) in enumerate((points or {}).items()):
        ax.plot(a, c, "*", color=COLORS["rejected"], ms=12, mec="white")
        ax.annotate(label, (a, c), xytext=(6, 6 if i % 2 == 0 else -16),  # alternate: no overlap
                    textcoords="offset points", fontsize=8, color=COLORS["rejected"],
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})
    ax.set_xlabel("α (acceptance per checked token)")
    ax.set_ylabel("c (draft cost / target cost)")
    ax.grid(False)
    ax.set_title(title or "optimal k; grey: no k pays", fontsize=10)
    return fig


def plot_speedup_explorer(k: int, alpha: float, c: float, verify: np.ndarray | None = None,
                          k_max: int = 16, ax: plt.Axes | None = None) -> plt.Figure:
    """Thm 3.8 against k at one (α, c): flat verification cost (solid) and, if given, the
    measured cost curve (dashed); the chosen ``k`` is starred on each."""
    fig, ax = figure_axes(ax, figsize=(6.5, 3.6))
    ks = np.arange(1, k_max + 1)
    curves = [("flat T(n) (accelerator)", None, "-", COLORS["target"])]
    if verify is not None:
        curves.append(("measured T(n) (this CPU)", verify, "--", COLORS["draft"]))
    for name, curve, style, color in curves:
        s = speedup_curve(alpha, ks, c, curve)
        ax.plot(ks, s, style, color=color, label=name)
        if k <= len(s) and np.isfinite(s[k - 1]):
            ax.plot(k, s[k - 1], "*", color=color, ms=14)
    ax.axhline(1.0, color=COLORS["theory"], lw=0.8)
    flat = expected_speedup(alpha, k, c)
    ax.set_title(f"α = {alpha:.2f}, c = {c:.2f}, k = {k}: speedup {flat:.2f}× with flat "
                 f"T(n); best k {optimal_k(alpha, c, k_max)}", fontsize=9)
    ax.set_xlabel("k (draft tokens per step)")
    ax.set_ylabel("speedup")
    ax.set_ylim(0, max(2.0, 1.1 * float(np.nanmax(speedup_curve(alpha, ks, c)))))
    ax.set_xticks(ks)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def plot_cost_per_token(items: dict[str, tuple[float, float, float]],
                        ax: plt.Axes | None = None, title: str | None = None) -> plt.Figure:
    """Cost per emitted token in units of T(1), split into verification and drafting:
    ``items`` maps a label to (draft cost per step, verification cost per step, τ).
    Plain decoding costs exactly 1 (dashed line); a bar past it is a slowdown. The number
    at the end of a bar is the speedup this cost model predicts, 1 / (cost per token)."""
    fig, ax = figure_axes(ax, figsize=(8, 0.55 * len(items) + 1.4))
    totals = []
    for i, (draft_cost, verify_cost, tau) in enumerate(items.values()):
        d, v = draft_cost / tau, verify_cost / tau
        ax.barh(i, v, color=COLORS["target"], label="verification" if i == 0 else None)
        ax.barh(i, d, left=v, color=COLORS["draft"], label="drafting" if i == 0 else None)
        ax.text(d + v, i, f" {1 / (d + v):.2f}×", va="center", fontsize=8)
        totals.append(d + v)
    ax.axvline(1.0, color=COLORS["theory"], lw=1, ls="--")
    ax.set_xlim(0, 1.15 * max(totals))
    ax.set_yticks(range(len(items)), list(items), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("target forwards per emitted token (plain decoding = 1)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
