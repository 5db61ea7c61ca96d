"""Chapter 1's figures: next-token distributions, the overlap of target and draft, and
how α = Σ min(p, q) moves with temperature, draft order and position in a text."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.patches import Rectangle

from ..rules.distributions import apply_temperature, check_probs, entropy, tv_distance
from ..rules.theory import alpha_temperature_grid
from .common import COLORS, figure_axes, shown_ids, token_ticks


def plot_distribution(
    probs: np.ndarray,
    labels: list[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    *,
    n_show: int | None = None,
    ids: np.ndarray | None = None,
    color: str | None = None,
) -> plt.Figure:
    """Bars of one next-token distribution ``probs`` [V], labelled by token.

    Draws the ``n_show`` most likely tokens (or exactly ``ids``, in that order), and
    notes the mass of the tokens left out and the entropy in the corner.
    """
    probs = check_probs(probs, "probs")  # [V]
    fig, ax = figure_axes(ax)
    ids = shown_ids(probs, n_show) if ids is None else np.asarray(ids)  # [n]
    ax.bar(np.arange(len(ids)), probs[ids], color=color or COLORS["target"], width=0.75)
    token_ticks(ax, ids, labels)
    hidden = 1.0 - probs[ids].sum()
    note = f"H = {abs(float(entropy(probs))):.2f} nats"
    if hidden > 5e-4:
        note += f"\nnot shown: {hidden:.3f}"
    ax.text(0.98, 0.95, note, transform=ax.transAxes, ha="right", va="top", fontsize=9)
    ax.set_ylim(0, 1.05 * max(float(probs[ids].max()), 1e-9))
    ax.set_ylabel("probability")
    if title:
        ax.set_title(title)
    return fig


def plot_distribution_grid(
    rows: dict[str, np.ndarray],
    labels: list[str] | None = None,
    *,
    n_show: int = 12,
    ncols: int = 3,
    colors: dict[str, str] | None = None,
) -> plt.Figure:
    """Small multiples: one bar panel per named distribution in ``rows`` (each [V]).

    Every panel shows the same tokens, the ``n_show`` most likely under the *first*
    row, so the panels can be compared bar by bar.
    """
    first = check_probs(next(iter(rows.values())), "rows")
    ids = shown_ids(first, n_show)  # [n_show]
    nrows = -(-len(rows) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.6 * ncols, 2.7 * nrows), sharey=True, squeeze=False
    )
    for ax, (name, probs) in zip(axes.flat, rows.items(), strict=False):
        color = (colors or {}).get(name, COLORS["target"])
        plot_distribution(probs, labels, ax=ax, title=name, ids=ids, color=color)
        ax.set_ylim(0, 1.05)
    for ax in axes.flat[len(rows) :]:
        ax.set_visible(False)
    for ax in axes[:, 1:].flat:
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


def plot_overlap(
    p: np.ndarray,
    q: np.ndarray,
    labels: list[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    *,
    n_show: int | None = None,
    legend: bool = True,
    symbol: str = "α",
) -> plt.Figure:
    """The overlap of target ``p`` [V] and draft ``q`` [V], token by token.

    Each token gets one stacked bar: the shared mass min(p, q) (shaded; its total is
    α = Σ min(p, q)), then on top either the residual max(0, p − q), which the target
    still needs, or the excess max(0, q − p), which the draft over-proposes. Short
    horizontal lines mark p(x) and q(x). The corner shows α and TV(p, q) = 1 − α over
    *all* V tokens, even when only the ``n_show`` heaviest (by max(p, q)) are drawn.
    ``symbol`` names the overlap in the corner: "α", or "β" for the overlap at one
    position where a text keeps α for its average over positions.
    """
    p = check_probs(p, "p")  # [V]
    q = check_probs(q, "q", vocab_size=p.shape[-1])  # [V]
    fig, ax = figure_axes(ax)
    ids = shown_ids(np.maximum(p, q), n_show)  # [n]
    x = np.arange(len(ids))
    shared = np.minimum(p, q)[ids]
    missing = np.maximum(0.0, p - q)[ids]
    excess = np.maximum(0.0, q - p)[ids]
    ax.bar(x, shared, width=0.8, color=COLORS["overlap"], label="min(p, q): shared")
    ax.bar(
        x, missing, bottom=shared, width=0.8, facecolor="white", edgecolor=COLORS["residual"],
        hatch="///", linewidth=0.8, label="max(0, p − q): residual mass",
    )
    ax.bar(
        x, excess, bottom=shared, width=0.8, facecolor="white", edgecolor=COLORS["draft"],
        hatch="...", linewidth=0.8, label="max(0, q − p): excess draft",
    )
    ax.hlines(p[ids], x - 0.4, x + 0.4, color=COLORS["target"], lw=2.2, label="p (target)")
    ax.hlines(q[ids], x - 0.4, x + 0.4, color=COLORS["draft"], lw=2.2, ls=(0, (2, 1)),
              label="q (draft)")
    token_ticks(ax, ids, labels)
    alpha = float(shared.sum() if len(ids) == p.shape[0] else np.minimum(p, q).sum())
    note = f"{symbol} = Σ min(p, q) = {alpha:.3f}\nTV(p, q) = {float(tv_distance(p, q)):.3f}"
    ax.text(0.98, 0.95, note, transform=ax.transAxes, ha="right", va="top", fontsize=9,
            bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.9})
    ax.set_ylim(0, 1.12 * float(np.maximum(p, q)[ids].max()))
    ax.set_ylabel("probability")
    if title:
        ax.set_title(title)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return fig


def plot_alpha_vs_temperature(
    p: np.ndarray,
    q: np.ndarray,
    temperatures: np.ndarray,
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> plt.Figure:
    """α against temperature: both models at the same T (solid), and only one of them
    at T with the other left at T = 1 (dashed target-only, dotted draft-only)."""
    temperatures = np.asarray(temperatures, dtype=np.float64)  # [n]
    fig, ax = figure_axes(ax, figsize=(5, 3.5))
    grid = alpha_temperature_grid(p, q, temperatures, np.append(temperatures, 1.0))
    ax.plot(temperatures, np.diag(grid[:, :-1]), color=COLORS["theory"], lw=2.2,
            label="both at T")
    ax.plot(temperatures, grid[:, -1], color=COLORS["target"], ls="--",
            label="target at T, draft at 1")
    ax.plot(temperatures, alpha_temperature_grid(p, q, [1.0], temperatures)[0],
            color=COLORS["draft"], ls=":", lw=2, label="draft at T, target at 1")
    ax.set_xlabel("temperature T")
    ax.set_ylabel("α = Σ min(p, q)")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=9)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_alpha_heatmap(
    p: np.ndarray,
    q: np.ndarray,
    temperatures: np.ndarray,
    ax: plt.Axes | None = None,
    title: str | None = None,
    *,
    mark: tuple[float, float] | None = None,
) -> plt.Figure:
    """Heatmap of α over (T_draft on x, T_target on y), with contours; ``mark`` is one
    (T_target, T_draft) point to circle; the dashed diagonal is 'same T for both'."""
    temperatures = np.asarray(temperatures, dtype=np.float64)  # [n]
    fig, ax = figure_axes(ax, figsize=(4.5, 3.8))
    alpha = alpha_temperature_grid(p, q, temperatures, temperatures)  # [n, n]
    extent = (temperatures[0], temperatures[-1], temperatures[0], temperatures[-1])
    img = ax.imshow(alpha, origin="lower", extent=extent, aspect="auto", cmap="viridis",
                    vmin=0, vmax=1)
    levels = [lv for lv in (0.2, 0.4, 0.6, 0.8, 0.9) if alpha.min() < lv < alpha.max()]
    if levels:
        cs = ax.contour(temperatures, temperatures, alpha, levels=levels, colors="white",
                        linewidths=0.8)
        ax.clabel(cs, fontsize=8, fmt="%.1f")
    ax.plot(extent[:2], extent[2:], color="white", ls="--", lw=0.8)
    if mark is not None:
        ax.plot(mark[1], mark[0], "o", ms=10, mfc="none", mec="red", mew=2)
    ax.grid(False)
    ax.set_xlabel("draft temperature")
    ax.set_ylabel("target temperature")
    fig.colorbar(img, ax=ax, label="α")
    if title:
        ax.set_title(title)
    return fig


def plot_temperature_overlap(
    p: np.ndarray,
    q: np.ndarray,
    t_target: float = 1.0,
    t_draft: float = 1.0,
    labels: list[str] | None = None,
    *,
    n_show: int | None = 12,
    temperatures: np.ndarray | None = None,
) -> plt.Figure:
    """Left: ``plot_overlap`` of p at ``t_target`` and q at ``t_draft``. Right: the α
    heatmap over both temperatures with that point circled."""
    if temperatures is None:
        temperatures = np.linspace(0.1, 3.0, 59)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [2.2, 1]}
    )
    plot_overlap(
        apply_temperature(p, t_target), apply_temperature(q, t_draft), labels, ax=left,
        n_show=n_show, legend=False,
        title=f"target at T = {t_target:.2f}, draft at T = {t_draft:.2f}",
    )
    left.legend(loc="upper center", fontsize=8, ncol=2, frameon=False)
    plot_alpha_heatmap(p, q, temperatures, ax=right, mark=(t_target, t_draft),
                       title="α over both temperatures")
    fig.tight_layout()
    return fig


def plot_draft_orders(
    orders: list[int],
    alphas: np.ndarray,
    cross_entropies: np.ndarray,
    target_ce: float | None = None,
) -> plt.Figure:
    """Two bar panels for n-gram drafts of each order: mean α against the target on
    held-out text, and held-out cross-entropy (nats/char), with the target's as a line."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.3))
    x = np.arange(len(orders))
    names = [f"{n}-gram" for n in orders]
    for ax, values, label, fmt in (
        (left, alphas, "mean α vs the target", "{:.2f}"),
        (right, cross_entropies, "cross-entropy (nats/char)", "{:.2f}"),
    ):
        bars = ax.bar(x, values, color=COLORS["draft"], width=0.6)
        ax.bar_label(bars, [fmt.format(v) for v in values], fontsize=9)
        ax.set_xticks(x, names)
        ax.set_ylabel(label)
        ax.grid(axis="x", visible=False)
    left.set_ylim(0, 1.08)
    if target_ce is not None:
        right.axhline(target_ce, color=COLORS["target"], ls="--", label=f"target: {target_ce:.2f}")
        right.legend(fontsize=9, loc="upper right")
    right.set_ylim(0, 1.15 * float(np.max(cross_entropies)))
    fig.tight_layout()
    return fig


def plot_alpha_along_text(
    text: str,
    alphas: np.ndarray,
    ax: plt.Axes | None = None,
    title: str | None = None,
    *,
    cmap: str = "RdYlGn",
) -> plt.Figure:
    """Each character of ``text`` in a cell coloured by ``alphas`` [len(text)], the α of
    the position that predicts it (red = draft and target disagree, green = they agree).

    Newlines start a new row (drawn as '↵'); NaN entries are grey.
    """
    alphas = np.asarray(alphas, dtype=np.float64)  # [len(text)]
    if alphas.shape != (len(text),):
        raise ValueError(f"alphas must have shape ({len(text)},), got {alphas.shape}")
    rows = text.split("\n")
    ncols = max(len(r) for r in rows) + (1 if len(rows) > 1 else 0)
    nrows = len(rows)
    fig, ax = figure_axes(ax, figsize=(0.13 * ncols + 1.4, 0.3 * nrows + 0.5))
    colormap = plt.get_cmap(cmap)
    norm = Normalize(0.0, 1.0)
    row, col = 0, 0
    for ch, a in zip(text, alphas, strict=True):
        face = "0.85" if np.isnan(a) else colormap(norm(a))
        ax.add_patch(Rectangle((col, -row - 1), 1, 1, facecolor=face, edgecolor="white", lw=0.5))
        ax.text(col + 0.5, -row - 0.5, "↵" if ch == "\n" else ch, ha="center", va="center",
                family="monospace", fontsize=10)
        if ch == "\n":
            row, col = row + 1, 0
        else:
            col += 1
    ax.set_xlim(0, ncols)
    ax.set_ylim(-nrows, 0)
    ax.set_axis_off()
    fig.colorbar(ScalarMappable(norm, colormap), ax=ax, label="α", fraction=0.025, pad=0.01,
                 aspect=8)
    if title:
        ax.set_title(title, loc="left")
    return fig
