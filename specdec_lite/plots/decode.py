"""Chapter 3's figures: traces of the decode loop, one row per target call, and τ and the
acceptance rates against k and temperature next to their closed forms."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch, Rectangle

from ..engine.decode import speculative_generate
from ..rules.theory import expected_tokens_per_step
from .common import COLORS, figure_axes

#: How whitespace is drawn in token traces, so that spaces and newlines stay visible.
VISIBLE_WHITESPACE = {" ": "·", "\n": "↵", "\t": "→"}


def _visible(text: str) -> str:
    return "".join(VISIBLE_WHITESPACE.get(ch, ch) for ch in text)


def _trace_legend_handles(cut: bool = False, sample: bool = False) -> list:
    """The trace legend; ``cut`` adds drafts accepted but cut off (by EOS, or by
    ``max_new_tokens`` in Medusa's loop), ``sample`` the target's own token of a step
    that drafted nothing (a prefill call)."""
    handles = [
        Patch(facecolor=COLORS["accepted"], alpha=0.45, label="accepted draft"),
        Patch(facecolor=COLORS["rejected"], alpha=0.3, label="rejected draft"),
        Patch(facecolor="none", edgecolor="#bbbbbb", label="never checked"),
        Patch(facecolor=COLORS["correction"], alpha=0.7, label="correction"),
        Patch(facecolor=COLORS["bonus"], alpha=0.4, label="bonus"),
    ]
    if cut:
        handles.append(Patch(facecolor=COLORS["accepted"], alpha=0.15, edgecolor="#999999",
                             label="accepted, cut off"))
    if sample:
        handles.append(Patch(facecolor=COLORS["target"], alpha=0.15,
                             label="target's token, nothing drafted"))
    return handles


def _has_cut(steps) -> bool:
    return any(role == "cut" for s in steps for _, role in s.token_kinds())


def plot_trace(
    generation,
    tokenizer,
    max_steps: int | None = None,
    ax: plt.Axes | None = None,
    *,
    title: str | None = None,
    legend: bool = True,
) -> plt.Figure:
    """Draw ``generation.steps`` as coloured character cells, one row per target call.

    Each row shows what the draft proposed, left to right: accepted tokens (green), the
    first rejected token (red, struck through), the proposal after it, which the target
    never checked (faded, struck through), and then the one extra token the step
    emitted: a correction (amber) or a bonus (blue). Drafts accepted but cut off (by EOS,
    or Medusa's ``max_new_tokens``) are drawn pale green and struck through: judged,
    accepted, never emitted. A step that drafted nothing (Medusa's first, prefill call)
    shows only the target's own token, pale blue. The number on the right is how many
    tokens the step emitted.
    Spaces are drawn as '·' and newlines as '↵'. Only the first ``max_steps`` steps are
    drawn (all by default). The default title gives k, the tokens emitted and the target
    calls of the whole generation, and τ.
    """
    steps = generation.steps if max_steps is None else generation.steps[:max_steps]
    rows = [s.token_kinds() for s in steps]  # [n_steps] lists of (token, role)
    width = max([len(r) for r in rows] + [2])  # cells in the widest row
    fig, ax = figure_axes(ax, figsize=(max(4.5, 0.36 * (width + 4)), 0.36 * len(rows) + 1.4))
    fill = {
        "accepted": (COLORS["accepted"], 0.45),
        "rejected": (COLORS["rejected"], 0.3),
        "unchecked": ("none", 1.0),
        "cut": (COLORS["accepted"], 0.15),
        "correction": (COLORS["correction"], 0.7),
        "bonus": (COLORS["bonus"], 0.4),
        "sample": (COLORS["target"], 0.15),
    }
    for y, cells in enumerate(rows):
        ax.text(-0.4, y, str(y + 1), ha="right", va="center", fontsize=8, color="#777777")
        for x, (token, role) in enumerate(cells):
            face, alpha = fill[role]
            ax.add_patch(
                Rectangle((x - 0.46, y - 0.42), 0.92, 0.84, facecolor=face, alpha=alpha,
                          edgecolor="#bbbbbb" if role in ("unchecked", "cut") else "none",
                          lw=0.8)
            )
            struck = role in ("rejected", "unchecked", "cut")
            color = {"rejected": COLORS["rejected"], "unchecked": "#999999",
                     "cut": "#999999"}.get(role, "black")
            ax.text(x, y, _visible(tokenizer.decode([token])), ha="center", va="center",
                    family="monospace", fontsize=11, color=color)
            if struck:
                ax.plot([x - 0.36, x + 0.36], [y, y], color=color, lw=1.1)
        ax.text(len(cells) - 0.2, y, f"+{len(steps[y].emitted)}", va="center", fontsize=8,
                color="#777777")
    ax.set_xlim(-1.2, width + 0.8)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    if title is None:
        k = max((len(s.proposed) for s in generation.steps), default=0)
        title = (
            f"k = {k}: {len(generation.tokens)} tokens in {generation.n_target_calls} target "
            f"calls, τ = {generation.tau:.2f}"
        )
    ax.set_title(title, fontsize=10)
    if legend:
        sample = any(s.extra == "sample" and s.emitted for s in steps)
        ax.legend(handles=_trace_legend_handles(_has_cut(steps), sample), loc="upper center",
                  ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0),
                  handlelength=1.2)
    return fig


def plot_traces(generations: list, tokenizer, max_steps: int = 8) -> plt.Figure:
    """Small multiples: :func:`plot_trace` of each generation side by side (first
    ``max_steps`` steps each), panel widths proportional to the longest row, one legend."""
    widths = [max(len(s.proposed) for s in g.steps[:max_steps]) + 4 for g in generations]
    fig, axes = plt.subplots(
        1, len(generations), figsize=(0.36 * sum(widths) + 1.0, 0.36 * max_steps + 1.6),
        gridspec_kw={"width_ratios": widths},
    )
    for ax, g in zip(np.atleast_1d(axes), generations, strict=True):
        k = max(len(s.proposed) for s in g.steps)
        title = f"k = {k}: τ = {g.tau:.2f}"
        plot_trace(g, tokenizer, max_steps=max_steps, ax=ax, legend=False, title=title)
        ax.set_anchor("N")  # top-align panels of different widths
    cut = any(_has_cut(g.steps[:max_steps]) for g in generations)
    fig.legend(handles=_trace_legend_handles(cut), loc="lower center", ncol=5, fontsize=8,
               frameon=False)
    fig.subplots_adjust(bottom=0.12, wspace=0.05)
    return fig


def plot_speculative_run(
    target,
    draft,
    tokenizer,
    prompt: str,
    *,
    k: int = 4,
    temperature: float = 1.0,
    max_new_tokens: int = 60,
    seed: int = 0,
    max_steps: int | None = 12,
    ax: plt.Axes | None = None,
) -> plt.Figure:
    """Run :func:`specdec_lite.speculative_generate` on ``prompt`` and draw its trace with
    :func:`plot_trace`; the title gives k, T, the tokens and target calls, and τ."""
    gen = speculative_generate(
        target, draft, tokenizer.encode(prompt), k=k, max_new_tokens=max_new_tokens,
        temperature=temperature, seed=seed,
    )
    title = (
        f"k = {k}, T = {temperature:.2f}: {len(gen.tokens)} tokens in {gen.n_target_calls} "
        f"target calls, τ = {gen.tau:.2f}"
    )
    return plot_trace(gen, tokenizer, max_steps=max_steps, ax=ax, title=title)


def plot_tau_vs_k(
    ks: np.ndarray,
    tau: np.ndarray,
    alpha: float,
    ax: plt.Axes | None = None,
    *,
    label: str = "measured",
    color: str | None = None,
    title: str | None = None,
) -> plt.Figure:
    """Measured tokens per target call τ [len(ks)] against k (dots), with the i.i.d.
    closed form (1 − α^(k+1)) / (1 − α) at ``alpha`` (dashed) and the ceiling k + 1
    (dotted)."""
    fig, ax = figure_axes(ax)
    ks = np.asarray(ks)
    grid = np.arange(0, ks.max() + 1)
    ax.plot(grid, grid + 1, ":", color="#aaaaaa", label="k + 1 (all accepted)")
    ax.plot(grid, expected_tokens_per_step(alpha, grid), "--", color=COLORS["theory"],
            label=f"closed form, α = {alpha:.3f}")
    ax.plot(ks, tau, "o", color=color or COLORS["target"], label=label)
    ax.set_xlabel("k (draft tokens per step)")
    ax.set_ylabel("τ (tokens per target call)")
    ax.set_xticks(grid)
    ax.legend(fontsize=8, loc="upper left")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_acceptance_vs_k(
    ks: np.ndarray,
    per_token: np.ndarray,
    all_accepted: np.ndarray,
    of_proposed: np.ndarray,
    alpha: float,
    ax: plt.Axes | None = None,
    *,
    title: str | None = None,
) -> plt.Figure:
    """Three acceptance measures against k, each [len(ks)], with their i.i.d. predictions.

    ``per_token``: accepted / draft tokens the target checked (flat at α);
    ``of_proposed``: accepted / draft tokens proposed, α(1 − α^k) / (k(1 − α));
    ``all_accepted``: fraction of steps that accepted all k, α^k.
    """
    fig, ax = figure_axes(ax)
    ks = np.asarray(ks)
    grid = np.linspace(1, ks.max(), 100)
    series = [
        ("per checked token", per_token, np.full_like(grid, alpha), COLORS["accepted"]),
        ("per proposed token", of_proposed, alpha * (1 - alpha**grid) / (grid * (1 - alpha)),
         COLORS["draft"]),
        ("P(all k accepted)", all_accepted, alpha**grid, COLORS["rejected"]),
    ]
    for label, measured, predicted, color in series:
        ax.plot(grid, predicted, "--", color=color, lw=1, alpha=0.8)
        ax.plot(ks, measured, "o-", color=color, label=label, ms=5, lw=1)
    ax.set_ylim(0, 1.02)
    ax.set_xticks(ks)
    ax.set_xlabel("k (draft tokens per step)")
    ax.set_ylabel("rate")
    ax.legend(fontsize=8, loc="lower left")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_tau_vs_temperature(
    temperatures: np.ndarray,
    tau: np.ndarray,
    alpha: np.ndarray,
    k: int,
    ax: plt.Axes | None = None,
) -> plt.Figure:
    """Measured τ [len(temperatures)] against T (dots), with the closed form at each
    temperature's measured α (crosses); α itself on a second axis (faded line)."""
    fig, ax = figure_axes(ax)
    ax.plot(temperatures, tau, "o-", color=COLORS["target"], label="measured τ")
    ax.plot(temperatures, expected_tokens_per_step(np.asarray(alpha), k), "x",
            color=COLORS["theory"], label="closed form at measured α")
    ax.set_xlabel("temperature T (both models)")
    ax.set_ylabel(f"τ at k = {k}")
    ax.set_ylim(1, k + 1)
    ax.legend(fontsize=8, loc="upper right")
    twin = ax.twinx()
    twin.plot(temperatures, alpha, "-", color=COLORS["accepted"], alpha=0.6)
    twin.set_ylabel("α (per checked token)", color=COLORS["accepted"])
    twin.set_ylim(0, 1)
    twin.grid(False)
    return fig
