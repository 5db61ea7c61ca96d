"""Matplotlib figures for the book. Imported on its own: ``from specdec_lite import plots``.

Every function draws onto an optional ``ax`` (or creates its own figure), takes
plain arrays or library objects, and returns the matplotlib ``Figure`` so
notebooks can show it, and widgets can redraw it with new parameters.
The module is organised by chapter; each section only uses the library's
public functions, so a figure always shows what the library computes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

#: One colour per role, used by every figure in the book.
COLORS = {
    "target": "#1f5fa8",  # p
    "draft": "#e07b39",  # q
    "overlap": "#6a9f58",  # min(p, q)
    "residual": "#b8453c",  # max(0, p - q)
    "accepted": "#6a9f58",
    "rejected": "#b8453c",
    "correction": "#e0a839",
    "bonus": "#1f5fa8",
    "theory": "#444444",
}


def setup_style() -> None:
    """The book's figure defaults: readable fonts, light grid, no top/right spines."""
    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "font.size": 11,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "figure.figsize": (7, 3.5),
        }
    )


def _axes(
    ax: plt.Axes | None, figsize: tuple[float, float] = (7, 3.5)
) -> tuple[plt.Figure, plt.Axes]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax


# ---------------------------------------------------------------------------
# Chapter 1: distributions
# ---------------------------------------------------------------------------

#: A probability row [V] (or rows [..., V]); the type hint used by widgets.
Probs = np.ndarray


def char_labels(alphabet: str) -> list[str]:
    """Printable bar labels for a character vocabulary: space → '␣', newline → '↵'."""
    shown = {" ": "␣", "\n": "↵", "\t": "⇥"}
    return [shown.get(ch, ch) for ch in alphabet]


def _shown_ids(weights: np.ndarray, n_show: int | None) -> np.ndarray:
    """Ids to draw: all of them in vocabulary order, or the ``n_show`` heaviest, heaviest first."""
    if n_show is None or n_show >= weights.shape[0]:
        return np.arange(weights.shape[0])
    return np.argsort(-weights, kind="stable")[:n_show]


def _tick_labels(ax: plt.Axes, ids: np.ndarray, labels: list[str] | None) -> None:
    ax.set_xticks(np.arange(len(ids)))
    names = [labels[i] for i in ids] if labels is not None else [str(i) for i in ids]
    ax.set_xticklabels(names, family="monospace")
    ax.grid(axis="x", visible=False)


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
    from .distributions import check_probs, entropy

    probs = check_probs(probs, "probs")  # [V]
    fig, ax = _axes(ax)
    ids = _shown_ids(probs, n_show) if ids is None else np.asarray(ids)  # [n]
    ax.bar(np.arange(len(ids)), probs[ids], color=color or COLORS["target"], width=0.75)
    _tick_labels(ax, ids, labels)
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
    from .distributions import check_probs

    first = check_probs(next(iter(rows.values())), "rows")
    ids = _shown_ids(first, n_show)  # [n_show]
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
) -> plt.Figure:
    """The overlap of target ``p`` [V] and draft ``q`` [V], token by token.

    Each token gets one stacked bar: the shared mass min(p, q) (shaded; its total is
    α = Σ min(p, q)), then on top either the residual max(0, p − q), which the target
    still needs, or the excess max(0, q − p), which the draft over-proposes. Short
    horizontal lines mark p(x) and q(x). The corner shows α and TV(p, q) = 1 − α over
    *all* V tokens, even when only the ``n_show`` heaviest (by max(p, q)) are drawn.
    """
    from .distributions import check_probs, tv_distance

    p = check_probs(p, "p")  # [V]
    q = check_probs(q, "q", vocab_size=p.shape[-1])  # [V]
    fig, ax = _axes(ax)
    ids = _shown_ids(np.maximum(p, q), n_show)  # [n]
    x = np.arange(len(ids))
    shared = np.minimum(p, q)[ids]
    missing = np.maximum(0.0, p - q)[ids]
    excess = np.maximum(0.0, q - p)[ids]
    ax.bar(x, shared, width=0.8, color=COLORS["overlap"], label="min(p, q): shared")
    ax.bar(
        x, missing, bottom=shared, width=0.8, facecolor="white", edgecolor=COLORS["residual"],
        hatch="///", linewidth=0.8, label="max(0, p − q): residual",
    )
    ax.bar(
        x, excess, bottom=shared, width=0.8, facecolor="white", edgecolor=COLORS["draft"],
        hatch="...", linewidth=0.8, label="max(0, q − p): excess draft",
    )
    ax.hlines(p[ids], x - 0.4, x + 0.4, color=COLORS["target"], lw=2.2, label="p (target)")
    ax.hlines(q[ids], x - 0.4, x + 0.4, color=COLORS["draft"], lw=2.2, ls=(0, (2, 1)),
              label="q (draft)")
    _tick_labels(ax, ids, labels)
    alpha = float(shared.sum() if len(ids) == p.shape[0] else np.minimum(p, q).sum())
    note = f"α = Σ min(p, q) = {alpha:.3f}\nTV(p, q) = {float(tv_distance(p, q)):.3f}"
    ax.text(0.98, 0.95, note, transform=ax.transAxes, ha="right", va="top", fontsize=9,
            bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.9})
    ax.set_ylim(0, 1.12 * float(np.maximum(p, q)[ids].max()))
    ax.set_ylabel("probability")
    if title:
        ax.set_title(title)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return fig


def alpha_temperature_grid(
    p: np.ndarray, q: np.ndarray, t_targets: np.ndarray, t_drafts: np.ndarray
) -> np.ndarray:
    """α(T_target, T_draft) = Σ min(p_T, q_T') on a grid: [len(t_targets), len(t_drafts)]."""
    from .distributions import apply_temperature
    from .theory import acceptance_probability

    p_t = np.stack([apply_temperature(p, t) for t in t_targets])  # [A, V]
    q_t = np.stack([apply_temperature(q, t) for t in t_drafts])  # [B, V]
    return acceptance_probability(
        np.repeat(p_t, len(t_drafts), axis=0), np.tile(q_t, (len(t_targets), 1))
    ).reshape(len(t_targets), len(t_drafts))


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
    fig, ax = _axes(ax, figsize=(5, 3.5))
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
    fig, ax = _axes(ax, figsize=(4.5, 3.8))
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
    from .distributions import apply_temperature

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
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    alphas = np.asarray(alphas, dtype=np.float64)  # [len(text)]
    if alphas.shape != (len(text),):
        raise ValueError(f"alphas must have shape ({len(text)},), got {alphas.shape}")
    rows = text.split("\n")
    ncols = max(len(r) for r in rows) + (1 if len(rows) > 1 else 0)
    nrows = len(rows)
    fig, ax = _axes(ax, figsize=(0.13 * ncols + 1.4, 0.3 * nrows + 0.5))
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



# ---------------------------------------------------------------------------
# Chapter 2: acceptance
# ---------------------------------------------------------------------------

#: Default θ grid for the threshold rule's TV(θ) curve.
THETA_GRID = np.linspace(0.25, 4.0, 301)


def _accept_probs(p: np.ndarray, q: np.ndarray, rule: str, **rule_params: float) -> np.ndarray:
    """a(x) [V]: the chance that a one-token step keeps the drafted token x.

    For ``"exact"`` it is min(1, p(x)/q(x)); the other rules are deterministic,
    so a(x) is read off ``verify`` itself (0 or 1). Tokens with q(x) = 0 are
    never drafted and get a(x) = 0.
    """
    from .verify import verify

    p = np.asarray(p, dtype=np.float64)  # [V]
    q = np.asarray(q, dtype=np.float64)  # [V]
    if rule == "exact":
        return np.where(q > 0, np.minimum(1.0, p / np.where(q > 0, q, 1.0)), 0.0)
    target_probs = np.stack([p, p])  # [2, V]: p at the drafted position, p for the bonus
    rng = np.random.default_rng(0)  # only the extra token is random; n_accepted is not
    return np.array(
        [
            verify([x], q[None, :], target_probs, rng, rule=rule, **rule_params).n_accepted
            if q[x] > 0
            else 0
            for x in range(len(q))
        ],
        dtype=np.float64,
    )


def one_token_output(
    p: np.ndarray, q: np.ndarray, rule: str = "exact", **rule_params: float
) -> np.ndarray:
    """Exact distribution [V] of the first token emitted by a one-draft-token step (k = 1).

    Enumerates the drafted token x ~ q: the step keeps x with probability a(x)
    (see ``_accept_probs``), otherwise it emits the rule's correction, drawn from
    norm(max(0, p − q)) for ``"exact"``, argmax p for ``"greedy"`` and p for the
    lossy rules. Output(y) = q(y)·a(y) + (Σ_x q(x)(1 − a(x)))·correction(y).
    """
    from .verify import residual

    p = np.asarray(p, dtype=np.float64)  # [V]
    q = np.asarray(q, dtype=np.float64)  # [V]
    accept = _accept_probs(p, q, rule, **rule_params)  # [V]
    if rule == "exact":
        correction = residual(p, q)  # [V]
    elif rule == "greedy":
        correction = np.eye(len(p))[np.argmax(p)]  # [V] one-hot
    else:
        correction = p
    return q * accept + (q @ (1.0 - accept)) * correction


def sample_first_tokens(
    p: np.ndarray,
    q: np.ndarray,
    n: int,
    rng: np.random.Generator,
    rule: str = "exact",
    **rule_params: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``n`` one-token steps through ``verify``; return (first tokens [n], n_accepted [n]).

    Each step drafts x ~ q (all n drafts are drawn at once), then calls
    ``verify([x], q, [p, p], rng, rule)``, exactly as the decode loop would.
    """
    from .verify import verify

    p = np.asarray(p, dtype=np.float64)  # [V]
    q = np.asarray(q, dtype=np.float64)  # [V]
    drafts = rng.choice(len(q), size=n, p=q)  # [n]
    draft_probs = q[None, :]  # [1, V]
    target_probs = np.stack([p, p])  # [2, V]
    first = np.empty(n, dtype=np.int64)
    accepted = np.empty(n, dtype=np.int64)
    for i in range(n):
        step = verify(drafts[i : i + 1], draft_probs, target_probs, rng, rule=rule, **rule_params)
        first[i], accepted[i] = step.tokens[0], step.n_accepted
    return first, accepted


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
    from .verify import residual

    p = np.asarray(p, dtype=np.float64)  # [V]
    q = np.asarray(q, dtype=np.float64)  # [V]
    fig, ax = _axes(ax)
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
    from .distributions import tv_distance

    p = np.asarray(p, dtype=np.float64)  # [V]
    output = np.asarray(output, dtype=np.float64)  # [V]
    fig, ax = _axes(ax)
    x = _token_axis(ax, labels, len(p))
    ax.bar(x - 0.2, p, 0.4, color=COLORS["target"], label="target p")
    ax.bar(x + 0.2, output, 0.4, color=COLORS["theory"], alpha=0.75, label=output_label)
    if sampled is not None:
        ax.plot(x + 0.2, sampled, "o", color="black", ms=4, label="sampled")
    ax.set_ylim(0, 1.2 * max(p.max(), output.max()))
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or f"TV(output, p) = {float(tv_distance(output, p)):.3f}")
    return fig


def threshold_curves(
    p: np.ndarray, q: np.ndarray, thetas: np.ndarray = THETA_GRID
) -> tuple[np.ndarray, np.ndarray]:
    """Exact (TV(output, p) [T], acceptance rate [T]) of the threshold rule at each θ."""
    from .distributions import tv_distance

    tv = np.empty(len(thetas))
    acceptance = np.empty(len(thetas))
    for i, theta in enumerate(thetas):
        tv[i] = tv_distance(one_token_output(p, q, "threshold", theta=theta), p)
        acceptance[i] = np.asarray(q) @ _accept_probs(p, q, "threshold", theta=theta)
    return tv, acceptance


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
    fig, ax = _axes(ax)
    tv, acceptance = threshold_curves(p, q, thetas)
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
    from .distributions import tv_distance

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    output = one_token_output(p, q, "threshold", theta=theta)  # [V]
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


# ---------------------------------------------------------------------------
# Chapter 3: the decode loop
# ---------------------------------------------------------------------------

#: How whitespace is drawn in token traces, so that spaces and newlines stay visible.
VISIBLE_WHITESPACE = {" ": "·", "\n": "↵", "\t": "→"}


def _visible(text: str) -> str:
    return "".join(VISIBLE_WHITESPACE.get(ch, ch) for ch in text)


def _trace_cells(step) -> list[tuple[int, str]]:
    """(token, role) for every cell of one trace row: the proposal, then the extra token.

    Roles: ``accepted``, ``rejected`` (the first rejected draft token), ``unverified``
    (draft tokens after it, or accepted ones cut off by EOS), then ``correction``,
    ``bonus`` or ``sample`` for the one extra token, if it was emitted.
    """
    n_emitted = len(step.emitted)
    cells = []
    for i, token in enumerate(step.proposed):
        if i < step.n_accepted:
            cells.append((token, "accepted" if i < n_emitted else "unverified"))
        elif i == step.n_accepted:
            cells.append((token, "rejected"))
        else:
            cells.append((token, "unverified"))
    if n_emitted == step.n_accepted + 1:  # the extra token survived (no EOS before it)
        cells.append((step.emitted[-1], step.extra))
    return cells


def _trace_legend_handles() -> list:
    from matplotlib.patches import Patch

    return [
        Patch(facecolor=COLORS["accepted"], alpha=0.45, label="accepted draft"),
        Patch(facecolor=COLORS["rejected"], alpha=0.3, label="rejected draft"),
        Patch(facecolor="none", edgecolor="#bbbbbb", label="never checked"),
        Patch(facecolor=COLORS["correction"], alpha=0.7, label="correction"),
        Patch(facecolor=COLORS["bonus"], alpha=0.4, label="bonus"),
    ]


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
    emitted: a correction (amber) or a bonus (blue). The number on the right is how many
    tokens the step emitted. Spaces are drawn as '·' and newlines as '↵'. Only the first
    ``max_steps`` steps are drawn (all by default). The default title gives k, the tokens
    emitted and the target calls of the whole generation, and τ.
    """
    from matplotlib.patches import Rectangle

    steps = generation.steps if max_steps is None else generation.steps[:max_steps]
    rows = [_trace_cells(s) for s in steps]  # [n_steps] lists of (token, role)
    width = max([len(r) for r in rows] + [2])  # cells in the widest row
    fig, ax = _axes(ax, figsize=(max(4.5, 0.36 * (width + 4)), 0.36 * len(rows) + 1.4))
    fill = {
        "accepted": (COLORS["accepted"], 0.45),
        "rejected": (COLORS["rejected"], 0.3),
        "unverified": ("none", 1.0),
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
                          edgecolor="#bbbbbb" if role == "unverified" else "none", lw=0.8)
            )
            struck = role in ("rejected", "unverified")
            color = {"rejected": COLORS["rejected"], "unverified": "#999999"}.get(role, "black")
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
            f"k = {k}: {len(generation.tokens)} tokens in {generation.target_calls} target "
            f"calls, τ = {generation.mean_tokens_per_step:.2f}"
        )
    ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(handles=_trace_legend_handles(), loc="upper center", ncol=3, fontsize=8,
                  frameon=False, bbox_to_anchor=(0.5, 0.0), handlelength=1.2)
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
        title = f"k = {k}: τ = {g.mean_tokens_per_step:.2f}"
        plot_trace(g, tokenizer, max_steps=max_steps, ax=ax, legend=False, title=title)
        ax.set_anchor("N")  # top-align panels of different widths
    fig.legend(handles=_trace_legend_handles(), loc="lower center", ncol=5, fontsize=8,
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
    from .decode import speculative_generate

    gen = speculative_generate(
        target, draft, tokenizer.encode(prompt), k=k, max_new_tokens=max_new_tokens,
        temperature=temperature, seed=seed,
    )
    title = (
        f"k = {k}, T = {temperature:.2f}: {len(gen.tokens)} tokens in {gen.target_calls} "
        f"target calls, τ = {gen.mean_tokens_per_step:.2f}"
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
    from .theory import expected_tokens_per_step

    fig, ax = _axes(ax)
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
    fig, ax = _axes(ax)
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
    from .theory import expected_tokens_per_step

    fig, ax = _axes(ax)
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


# ---------------------------------------------------------------------------
# Chapter 4: Medusa
# ---------------------------------------------------------------------------


def _tree_layout(tree) -> np.ndarray:
    """(x, y) of every node [N+1, 2]: x = depth, leaves on consecutive rows, each parent
    centred on its children."""
    n = tree.n_nodes
    children = [[] for _ in range(n)]
    for node in range(1, n):
        children[tree.parent[node]].append(node)
    y = np.zeros(n)
    next_row = [0.0]

    def place(node: int) -> float:
        if not children[node]:
            y[node] = next_row[0]
            next_row[0] += 1
        else:
            y[node] = np.mean([place(child) for child in children[node]])
        return y[node]

    place(0)
    return np.stack([tree.depth.astype(float), y], axis=1)


def plot_tree(tree, node_labels: list[str] | None = None, ax: plt.Axes | None = None, *,
              highlight: list[int] | None = None, title: str | None = None) -> plt.Figure:
    """Draw a candidate tree left to right: the root, then one column per depth (per head).

    Nodes are labelled with ``node_labels`` (e.g. candidate characters) or their rank
    path; ``highlight`` nodes (e.g. an accepted path) are filled green."""
    xy = _tree_layout(tree)
    fig, ax = _axes(ax, figsize=(1.6 * tree.max_depth + 2.5, 0.32 * xy[:, 1].max() + 1.6))
    for node in range(1, tree.n_nodes):
        parent = tree.parent[node]
        ax.plot(xy[[parent, node], 0], xy[[parent, node], 1], color="#999999", lw=1, zorder=1)
    marked = set(highlight or [])
    for node, (x, y) in enumerate(xy):
        label = node_labels[node] if node_labels else ("root" if node == 0 else
                                                       ",".join(map(str, tree.paths[node - 1])))
        face = COLORS["accepted"] if node in marked else ("#dddddd" if node == 0 else "white")
        ax.text(x, y, label, ha="center", va="center", fontsize=9, zorder=2,
                bbox={"boxstyle": "round,pad=0.25", "facecolor": face, "edgecolor": "#777777"})
    ax.set_xticks(range(tree.max_depth + 1))
    ax.set_xticklabels(["root"] + [f"head {i}\n(token t+{i + 2})" for i in range(tree.max_depth)])
    ax.set_yticks([])
    ax.grid(False)
    ax.invert_yaxis()
    ax.set_xlim(-0.5, tree.max_depth + 0.5)
    ax.set_title(title or f"candidate tree: {tree.n_nodes - 1} nodes + root")
    fig.tight_layout()
    return fig


def plot_tree_mask(tree, ax: plt.Axes | None = None, *, title: str | None = None) -> plt.Figure:
    """The tree attention mask as a heatmap: row i, column j is filled when node i may
    attend node j (j is i or one of its ancestors). Every node also sees the whole prefix,
    which is not drawn."""
    fig, ax = _axes(ax, figsize=(4.8, 4.4))
    ax.imshow(tree.mask, cmap="Greens", vmin=0, vmax=1.4, interpolation="nearest")
    ticks = range(tree.n_nodes)
    names = ["root"] + ["".join(map(str, p)) for p in tree.paths]
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.set_xticklabels(names, rotation=90, fontsize=7)
    ax.set_yticklabels(names, fontsize=7)
    ax.grid(False)
    ax.set_xlabel("attends to node (rank path)")
    ax.set_ylabel("node (rank path)")
    ax.set_title(title or "tree attention mask (prefix columns omitted)")
    fig.tight_layout()
    return fig


def plot_head_accuracy(accuracies: dict[str, np.ndarray], ax: plt.Axes | None = None, *,
                       ranks: tuple[int, ...] = (1, 5)) -> plt.Figure:
    """Top-r accuracy of each Medusa head by the offset it predicts.

    ``accuracies`` maps a name to an [H, s] array of per-rank hit rates (as returned by
    ``medusa.top_k_accuracy``); top-r accuracy is the sum of the first r columns."""
    fig, ax = _axes(ax, figsize=(6.5, 3.4))
    styles = ["-", "--", ":", "-."]
    for (name, acc), style in zip(accuracies.items(), styles, strict=False):
        offsets = np.arange(acc.shape[0]) + 2
        for r, color in zip(ranks, (COLORS["target"], COLORS["draft"]), strict=False):
            ax.plot(offsets, acc[:, :r].sum(axis=1), style, marker="o", color=color,
                    label=f"{name}, top-{r}")
    ax.set_xticks(offsets)
    ax.set_xticklabels([f"head {i}\nt+{o}" for i, o in enumerate(offsets)])
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy on held-out text")
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    ax.set_title("Medusa heads: accuracy falls with the offset")
    fig.tight_layout()
    return fig


def plot_head_training(losses: np.ndarray, ax: plt.Axes | None = None) -> plt.Figure:
    """Cross-entropy per step of each head ([steps, H]), smoothed over 20 steps."""
    fig, ax = _axes(ax, figsize=(6.5, 3.2))
    window = min(20, len(losses))
    kernel = np.ones(window) / window
    for i in range(losses.shape[1]):
        smooth = np.convolve(losses[:, i], kernel, mode="valid")
        ax.plot(np.arange(window - 1, len(losses)), smooth, label=f"head {i} (t+{i + 2})")
    ax.set_xlabel("Adam step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title("training the heads in numpy on frozen hidden states")
    fig.tight_layout()
    return fig


def plot_typical_tradeoff(eps: np.ndarray, tau: np.ndarray, tv: np.ndarray,
                          ax: plt.Axes | None = None, *, current: float | None = None,
                          title: str | None = None) -> plt.Figure:
    """Typical acceptance: τ (tokens per target call) and the distortion of each step's
    first token (mean TV distance from the target) against the threshold ε."""
    fig, ax = _axes(ax, figsize=(6.5, 3.4))
    ax.plot(eps, tau, marker="o", color=COLORS["accepted"], label="τ (left)")
    ax.set_xscale("log")
    ax.set_xlabel("ε (typical-acceptance threshold; δ = √ε)")
    ax.set_ylabel("τ, tokens per target call", color=COLORS["accepted"])
    twin = ax.twinx()
    twin.plot(eps, tv, marker="s", color=COLORS["rejected"], label="TV (right)")
    twin.set_ylabel("mean TV from target, first token", color=COLORS["rejected"])
    twin.set_ylim(0, max(0.05, 1.15 * float(np.max(tv))))
    twin.grid(False)
    if current is not None:
        ax.axvline(current, color=COLORS["theory"], ls=":", lw=1)
    ax.set_title(title or "typical acceptance: more tokens per call, further from p")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------
# Chapter 5: benchmarks
# ---------------------------------------------------------------------------
# These take the JSON dict of ``specdec_lite.bench`` (``BenchResult.to_json()`` or a loaded
# ``results/bench.json``), so the chapter can redraw committed results without re-running.


def _bench_title(data: dict, what: str, simulated: bool) -> str:
    if simulated:
        width = data["settings"]["simulate_width"]
        return f"SIMULATED accelerator (flat cost up to {width} tokens): {what}"
    return f"{what} (measured, {data['machine']['cpu_model']})"


def plot_bench_speedup(data: dict, simulated: bool = False) -> plt.Figure:
    """Left: draft-model speedup against k per temperature and draft (the draft GPT,
    solid dots; the n-gram, open squares), median with its 95% CI, and the theory
    E(α,k)/(kc + T(k+1)/T(1)) at the measured α and the costs the runs paid (dotted).
    Right: Medusa, one bar per tree (or chain) with its CI and prediction (x)."""
    rows = [r for r in data["rows"] if r["simulated"] == simulated]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), width_ratios=(3, 2))
    drafts = [("speculative", "GPT draft", "o-", None), ("ngram", "n-gram draft", "s--", "white")]
    for i, t in enumerate(sorted({r["temperature"] for r in rows})):
        color = COLORS["target"] if i == 0 else COLORS["draft"]
        for method, name, fmt, face in drafts:
            spec = bench_rows(data, method, t, simulated)
            if not spec:
                continue
            ks = [r["k"] for r in spec]
            speed = np.array([r["speedup"] for r in spec])  # [n]
            err = np.abs(np.array([r["speedup_ci"] for r in spec]).T - speed)  # [2, n]
            left.errorbar(ks, speed, yerr=err, fmt=fmt, color=color, mfc=face, capsize=3,
                          label=f"{name}, {spec[0]['rule']} T={t:g}")
            pred = [np.nan if r["predicted_speedup"] is None else r["predicted_speedup"]
                    for r in spec]
            left.plot(ks, pred, ":", color=color, alpha=0.7)
    left.axhline(1.0, color=COLORS["theory"], lw=0.8)
    left.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("k (draft tokens per step)")
    left.set_ylabel("speedup over autoregressive")
    left.plot([], [], ":", color=COLORS["theory"], label="theory (dotted)")
    left.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    left.set_title(_bench_title(data, "draft models", simulated), fontsize=9)
    medusa = [r for r in rows if r["method"] == "medusa"]
    x = np.arange(len(medusa))
    if medusa:
        speed = np.array([r["speedup"] for r in medusa])
        err = np.abs(np.array([r["speedup_ci"] for r in medusa]).T - speed)
        right.bar(x, speed, yerr=err, capsize=3, color=COLORS["accepted"], alpha=0.8,
                  label="measured")
        right.plot(x, [r["predicted_speedup"] or np.nan for r in medusa], "x",
                   color=COLORS["theory"], ms=9, label="predicted")
        right.set_xticks(x, [r["label"].replace("SIMULATED ", "").replace("medusa ", "")
                             .replace(" T=", "\nT=") for r in medusa], fontsize=8)
        right.legend(fontsize=8)
    right.axhline(1.0, color=COLORS["theory"], lw=0.8)
    right.set_title("Medusa heads" + (" (SIMULATED)" if simulated else ""), fontsize=9)
    fig.tight_layout()
    return fig


def plot_cost_curve(data: dict, ax: plt.Axes | None = None) -> plt.Figure:
    """Measured T(n)/T(1) of one target forward over n new tokens, against the flat cost
    of a memory-bound accelerator (the SIMULATED mode's model)."""
    fig, ax = _axes(ax)
    curve = data["cost_curve"]
    n = np.array(curve["n"])
    ax.plot(n, curve["ratio"], "o-", color=COLORS["target"],
            label=f"measured on this CPU, T(1) = {curve['target_s'][0] * 1e3:.2f} ms")
    width = data["settings"]["simulate_width"] or int(n.max())
    ax.step(n, np.ceil(n / width), where="mid", color=COLORS["theory"], ls="--",
            label=f"SIMULATED accelerator: ceil(n/{width})")
    ax.axhline(data["c"], color=COLORS["draft"], ls=":",
               label=f"draft GPT forward, c = {data['c']:.2f}")
    if data.get("c_ngram") is not None:
        ax.axhline(data["c_ngram"], color=COLORS["overlap"], ls="-.",
                   label=f"n-gram draft row, c = {data['c_ngram']:.2f}")
    ax.set_xlabel("n (new tokens in one target forward)")
    ax.set_ylabel("T(n) / T(1)")
    ax.set_ylim(0, None)
    ax.legend(fontsize=8)
    return fig


def plot_reproduction(comparison: dict, ax: plt.Axes | None = None) -> plt.Figure:
    """Each measured row's speedup in a second run (y) against the reference run (x), both
    with their 95% CIs, from ``bench.compare_runs``; rows whose new median falls outside the
    reference CI are drawn hollow. On the diagonal the two runs agree."""
    fig, ax = _axes(ax, figsize=(5.2, 5.0))
    rows = comparison["rows"]
    ref = np.array([r["reference"] for r in rows])  # [R, 3]: median, lo, hi
    new = np.array([r["new"] for r in rows])  # [R, 3]
    inside = np.array([r["in_reference_ci"] for r in rows], dtype=bool)  # [R]
    for mask, fill, label in ((inside, COLORS["target"], "new median inside the first CI"),
                              (~inside, "white", "outside it")):
        if not mask.any():
            continue
        xerr = np.clip([ref[mask, 0] - ref[mask, 1], ref[mask, 2] - ref[mask, 0]], 0, None)
        yerr = np.clip([new[mask, 0] - new[mask, 1], new[mask, 2] - new[mask, 0]], 0, None)
        ax.errorbar(ref[mask, 0], new[mask, 0], xerr=xerr, yerr=yerr, fmt="o", mfc=fill,
                    mec=COLORS["target"], ecolor="#b0b0b0", elinewidth=1, capsize=0,
                    label=f"{label} ({int(mask.sum())})")
    lo = min(ref[:, 1].min(), new[:, 1].min()) - 0.05
    hi = max(ref[:, 2].max(), new[:, 2].max()) + 0.05
    ax.plot([lo, hi], [lo, hi], ls="--", color=COLORS["theory"], lw=1)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel(f"speedup, first run ({comparison['reference'][:16]})")
    ax.set_ylabel(f"speedup, second run ({comparison['new'][:16]})")
    ax.legend(fontsize=8, loc="upper left")
    return fig


def plot_overhead_split(data: dict, ax: plt.Axes | None = None, top: int = 4) -> plt.Figure:
    """Where the time of one profiled run per method goes: the model forwards, the ``top``
    engine functions, and the rest of the engine (fractions of the cProfile'd time)."""
    profile = data["profile"]
    fig, ax = _axes(ax, figsize=(9, 0.6 * len(profile) + 1.4))
    labels = list(profile)
    names = []
    for prof in profile.values():
        names += [name for name, _ in prof["engine"][:top] if name not in names]
    names = names[: 2 * top]
    colors = plt.get_cmap("tab10")(np.arange(1, len(names) + 1) % 10)  # C0 is the forwards
    for i, label in enumerate(labels):
        prof = profile[label]
        wall = prof["wall_s"]
        parts = [("model forwards", prof["forward_s"], COLORS["target"])]
        engine = dict(prof["engine"])
        parts += [(name, engine.get(name, 0.0), colors[j]) for j, name in enumerate(names)]
        parts.append(("other engine", wall - sum(s for _, s, _ in parts), "#e8e8e8"))
        left = 0.0
        for name, seconds, color in parts:
            ax.barh(i, seconds / wall, left=left, color=color,
                    label=name if i == 0 else None)
            left += seconds / wall
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("fraction of the run's time (one run under cProfile)")
    ax.set_xlim(0, 1)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


# ---------------------------------------------------------------------------
# Chapter 5 (book figures)
# ---------------------------------------------------------------------------
# The chapter's own figures. They read a loaded ``results/bench.json`` (``data``) and the
# closed forms of :mod:`specdec_lite.theory`. A *verification cost* ``verify`` is a
# measured cost curve r = [T(1)/T(1), T(2)/T(1), ...] (``data["cost_curve"]["ratio"]``);
# ``None`` means the flat cost r(n) = 1 of Thm 3.8 (the memory-bound accelerator).


def verify_ratio_at(n: np.ndarray, verify: np.ndarray | None = None,
                    width: int | None = None) -> np.ndarray:
    """r(n) = T(n)/T(1) for n = k + 1 tokens [len(n)]: from the measured curve ``verify``
    (NaN beyond its range), ceil(n / width) for the SIMULATED accelerator, else 1."""
    n = np.asarray(n)
    if width is not None:
        return np.ceil(n / width)
    if verify is None:
        return np.ones(n.shape)
    r = np.asarray(verify, dtype=np.float64)  # [N]: r[n - 1] = T(n)/T(1)
    inside = (n >= 1) & (n <= len(r))
    return np.where(inside, r[np.clip(n, 1, len(r)) - 1], np.nan)


def theory_speedup(alpha: float, ks: np.ndarray, c: float, verify: np.ndarray | None = None,
                   width: int | None = None) -> np.ndarray:
    """E(α, k) / (k·c + r(k+1)) for every k in ``ks`` [len(ks)]; NaN where r is unknown."""
    from .theory import expected_speedup

    ks = np.asarray(ks)
    r = verify_ratio_at(ks + 1, verify, width)  # [len(ks)]
    known = np.isfinite(r)
    out = np.full(ks.shape, np.nan)
    out[known] = expected_speedup(alpha, ks[known], c, verify_cost=r[known])
    return out


def optimal_k_grid(alphas: np.ndarray, cs: np.ndarray, k_max: int,
                   verify: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The best k in 1..k_max and its speedup for every (c, α): two arrays [len(cs),
    len(alphas)]. With a measured ``verify``, k stops where the curve ends."""
    from .theory import expected_speedup

    ks = np.arange(1, k_max + 1)
    if verify is not None:
        ks = ks[ks + 1 <= len(verify)]
    surface = expected_speedup(np.asarray(alphas)[None, :, None], ks,
                               np.asarray(cs)[:, None, None],
                               verify_cost=verify_ratio_at(ks + 1, verify))
    best = np.argmax(surface, axis=-1)  # surface: [len(cs), len(alphas), len(ks)]
    return ks[best], np.take_along_axis(surface, best[..., None], -1)[..., 0]


def bench_rows(data: dict, method: str, temperature: float,
               simulated: bool = False) -> list[dict]:
    """The rows of one method at one temperature, measured or SIMULATED, sorted by k
    (Medusa: by tree size, the chain last)."""
    rows = [r for r in data["rows"] if r["method"] == method and r["simulated"] == simulated
            and r["temperature"] == temperature]
    return sorted(rows, key=lambda r: (r["k"] or 0, r["tree_nodes"] or 10**9))


def _predicted(rows: list[dict]) -> list[float]:
    return [np.nan if r["predicted_speedup_tau"] is None else r["predicted_speedup_tau"]
            for r in rows]


def _errorbar(ax: plt.Axes, rows: list[dict], x: np.ndarray, **style: object) -> None:
    speed = np.array([r["speedup"] for r in rows])  # [n]
    err = np.abs(np.array([r["speedup_ci"] for r in rows]).T - speed)  # [2, n]
    ax.errorbar(x, speed, yerr=err, capsize=3, **style)


def plot_speedup_vs_k(data: dict, temperature: float, alpha: float,
                      ax: plt.Axes | None = None, title: str | None = None,
                      method: str = "speculative") -> plt.Figure:
    """Draft-model speedup against k at one temperature: the measured medians with their
    95% CIs (dots), the prediction from each row's measured τ (crosses), and Thm 3.8 at
    one ``alpha`` with the costs the runs paid (dashed, at the k the runs verified) and
    with the isolated cost curve (dotted). SIMULATED rows, if the run has them, in grey
    squares with their own theory curve (flat cost up to the width).
    ``method``: ``"speculative"`` (the draft GPT, cost c) or ``"ngram"`` (cost c_ngram)."""
    from .theory import expected_speedup

    fig, ax = _axes(ax, figsize=(6, 3.8))
    rows = bench_rows(data, method, temperature)
    ks = np.array([r["k"] for r in rows])
    grid = np.arange(1, ks.max() + 1)
    draft = "c" if method == "speculative" else "c_ngram"
    ax.plot(grid, theory_speedup(alpha, grid, data[draft], data["cost_curve"]["ratio"]), ":",
            color=COLORS["target"], alpha=0.6, label=f"Thm 3.8, isolated T(n), α = {alpha:.2f}")
    paid = data.get("in_run_costs")
    if paid and paid[draft] is not None:
        run_ratio = dict(zip(paid["n"], paid["ratio"], strict=True))
        run_ks = np.array([k for k in grid if k + 1 in run_ratio])  # [m]
        run_r = np.array([run_ratio[k + 1] for k in run_ks])  # [m]
        ax.plot(run_ks, expected_speedup(alpha, run_ks, paid[draft], verify_cost=run_r), "--",
                color=COLORS["target"], alpha=0.8,
                label=f"Thm 3.8, costs in the runs, α = {alpha:.2f}")
    _errorbar(ax, rows, ks, fmt="o-", color=COLORS["target"], label="measured (95% CI)")
    ax.plot(ks, _predicted(rows), "x", color=COLORS["theory"],
            ms=8, label="predicted from measured τ")
    sim = bench_rows(data, method, temperature, simulated=True)
    if sim:
        width = data["settings"]["simulate_width"]
        ax.plot(grid, theory_speedup(alpha, grid, data[draft], width=width), ":", color="#888888")
        _errorbar(ax, sim, np.array([r["k"] for r in sim]), fmt="s-", color="#888888",
                  mfc="white", label=f"SIMULATED accelerator (W = {width})")
    ax.axhline(1.0, color=COLORS["theory"], lw=0.8)
    ax.set_xticks(grid)
    ax.set_xlabel("k (draft tokens per step)")
    ax.set_ylabel("speedup over autoregressive")
    ax.set_ylim(0, None)
    ax.legend(fontsize=7, loc="best")
    rule = rows[0]["rule"]
    name = "draft GPT" if method == "speculative" else "n-gram draft"
    ax.set_title(title or f"{name}, T = {temperature:g} ({rule} rule)", fontsize=10)
    return fig


def plot_medusa_speedups(data: dict, ax: plt.Axes | None = None) -> plt.Figure:
    """Medusa: one group per configuration, the measured speedup (CI) and, if the run has
    them, the SIMULATED one (hatched); crosses are the predictions from measured τ."""
    fig, ax = _axes(ax, figsize=(6, 3.8))
    temps = sorted({r["temperature"] for r in data["rows"]})
    rows = [r for t in temps for r in bench_rows(data, "medusa", t)]
    sim = {r["label"].removeprefix("SIMULATED "): r
           for t in temps for r in bench_rows(data, "medusa", t, simulated=True)}
    x = np.arange(len(rows))
    width = 0.38 if sim else 0.6
    paired = [i for i, r in enumerate(rows) if r["label"] in sim]
    for positions, group, style in [
        (x - width / 2 if sim else x, rows, {"color": COLORS["accepted"], "label": "measured"}),
        (x[paired] + width / 2, [sim[rows[i]["label"]] for i in paired],
         {"color": "white", "edgecolor": "#888888", "hatch": "//",
          "label": f"SIMULATED (W = {data['settings']['simulate_width']})"}),
    ]:
        if not group:
            continue
        speed = np.array([r["speedup"] for r in group])
        err = np.abs(np.array([r["speedup_ci"] for r in group]).T - speed)
        ax.bar(positions, speed, width, yerr=err, capsize=3, **style)
        ax.plot(positions, _predicted(group), "x",
                color=COLORS["theory"], ms=8)
    ax.plot([], [], "x", color=COLORS["theory"], label="predicted from measured τ")
    ax.axhline(1.0, color=COLORS["theory"], lw=0.8)
    ax.set_xticks(x, [r["label"].removeprefix("medusa ").replace(" T=", "\nT=")
                      for r in rows], fontsize=8)
    ax.set_ylabel("speedup over autoregressive")
    ax.legend(fontsize=7, loc="best")
    ax.set_title("Medusa heads", fontsize=10)
    return fig


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
                s = theory_speedup(a, ks, c, curve)  # [k_max], NaN beyond the curve
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
    fig, ax = _axes(ax, figsize=(5.5, 4))
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
    from .theory import expected_speedup, optimal_k

    fig, ax = _axes(ax, figsize=(6.5, 3.6))
    ks = np.arange(1, k_max + 1)
    curves = [("flat T(n) (accelerator)", None, "-", COLORS["target"])]
    if verify is not None:
        curves.append(("measured T(n) (this CPU)", verify, "--", COLORS["draft"]))
    for name, curve, style, color in curves:
        s = theory_speedup(alpha, ks, c, curve)
        ax.plot(ks, s, style, color=color, label=name)
        if k <= len(s) and np.isfinite(s[k - 1]):
            ax.plot(k, s[k - 1], "*", color=color, ms=14)
    ax.axhline(1.0, color=COLORS["theory"], lw=0.8)
    flat = expected_speedup(alpha, k, c)
    ax.set_title(f"α = {alpha:.2f}, c = {c:.2f}, k = {k}: speedup {flat:.2f}× with flat "
                 f"T(n); best k {optimal_k(alpha, c, k_max)}", fontsize=9)
    ax.set_xlabel("k (draft tokens per step)")
    ax.set_ylabel("speedup")
    ax.set_ylim(0, max(2.0, 1.1 * float(np.nanmax(theory_speedup(alpha, ks, c)))))
    ax.set_xticks(ks)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def plot_cost_per_token(items: dict[str, tuple[float, float, float]],
                        ax: plt.Axes | None = None, title: str | None = None) -> plt.Figure:
    """Cost per emitted token in units of T(1), split into verification and drafting:
    ``items`` maps a label to (draft cost per step, verification cost per step, τ).
    Plain decoding costs exactly 1 (dashed line); a bar past it is a slowdown. The number
    at the end of a bar is the speedup this cost model predicts, 1 / (cost per token)."""
    fig, ax = _axes(ax, figsize=(8, 0.55 * len(items) + 1.4))
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
