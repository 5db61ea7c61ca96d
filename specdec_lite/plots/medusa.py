"""Medusa's figures: candidate trees and their attention masks, the heads' accuracy and
training, and typical acceptance's trade-off between τ and distortion."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .common import COLORS, figure_axes


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
    fig, ax = figure_axes(ax, figsize=(1.6 * tree.max_depth + 2.5, 0.32 * xy[:, 1].max() + 1.6))
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
    fig, ax = figure_axes(ax, figsize=(4.8, 4.4))
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
    fig, ax = figure_axes(ax, figsize=(6.5, 3.4))
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
    ax.set_title("Medusa heads: top-1 and top-5 accuracy by offset")
    fig.tight_layout()
    return fig


def plot_head_training(losses: np.ndarray, ax: plt.Axes | None = None) -> plt.Figure:
    """Cross-entropy per step of each head ([steps, H]), smoothed over 20 steps."""
    fig, ax = figure_axes(ax, figsize=(6.5, 3.2))
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
    fig, ax = figure_axes(ax, figsize=(6.5, 3.4))
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
