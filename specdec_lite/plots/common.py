"""What every figure of the book shares: the colours of each role, the style, and the
helpers that make axes and label tokens."""

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


def figure_axes(
    ax: plt.Axes | None, figsize: tuple[float, float] = (7, 3.5)
) -> tuple[plt.Figure, plt.Axes]:
    """``ax`` and its figure, or a new figure of ``figsize`` with one axes."""
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax


#: A probability row [V] (or rows [..., V]); the type hint used by widgets.
Probs = np.ndarray


def char_labels(alphabet: str) -> list[str]:
    """Printable bar labels for a character vocabulary: space → '␣', newline → '↵'."""
    shown = {" ": "␣", "\n": "↵", "\t": "⇥"}
    return [shown.get(ch, ch) for ch in alphabet]


def shown_ids(weights: np.ndarray, n_show: int | None) -> np.ndarray:
    """Ids to draw: all of them in vocabulary order, or the ``n_show`` heaviest, heaviest first."""
    if n_show is None or n_show >= weights.shape[0]:
        return np.arange(weights.shape[0])
    return np.argsort(-weights, kind="stable")[:n_show]


def token_ticks(ax: plt.Axes, ids: np.ndarray, labels: list[str] | None) -> None:
    """One x tick per drawn token ``ids`` [n], named by ``labels`` (or by id), monospace."""
    ax.set_xticks(np.arange(len(ids)))
    names = [labels[i] for i in ids] if labels is not None else [str(i) for i in ids]
    ax.set_xticklabels(names, family="monospace")
    ax.grid(axis="x", visible=False)
