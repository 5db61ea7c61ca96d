"""The figure of appendix B, "Bring your own model": the ``hf`` benchmark
(``results/bench_hf.json``, written by :mod:`specdec_lite.bench.hf`) as bars. It takes the
plain rows of that file and computes nothing but what it shows."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from .common import COLORS

#: Bar colour of each engine/model pairing, found from a row's label.
_FAMILY = (("over numpy", COLORS["target"]), ("over HF", COLORS["draft"]),
           ("HF ", COLORS["theory"]))


def family_color(label: str) -> str:
    """The bar colour of a method: HF's own loops grey, ours over the HF adapter orange,
    ours over the numpy GPTs blue. Raises ``ValueError`` for a label of none of them."""
    if not isinstance(label, str):
        raise TypeError(f"label must be str, got {type(label).__name__}")
    for key, color in _FAMILY:
        if key in label:
            return color
    raise ValueError(f"label {label!r} names no known method family "
                     f"(HF ..., ... over HF, ... over numpy)")


def plot_hf_rates(result: dict, axes: np.ndarray | None = None) -> plt.Figure:
    """Left: tokens per second of each method with its 95% CI. Right: where a token's
    time goes, model forwards (solid) and the engine around them (hatched), in ms per
    token (medians over runs, so the two parts need not add up to 1000 / tokens per s)."""
    rows = result.get("rows") if isinstance(result, dict) else None
    if not rows:
        raise ValueError("result must be a bench_hf result with a non-empty 'rows' list")
    labels = [r["label"] for r in rows]
    colors = [family_color(label) for label in labels]
    y = np.arange(len(rows))[::-1]  # first row on top
    rate = np.array([r["tokens_per_s"] for r in rows])  # [m]
    ci = np.array([r["tokens_per_s_ci"] for r in rows])  # [m, 2]
    fwd = np.array([r["ms_per_token_forward"] for r in rows])  # [m]
    eng = np.array([r["ms_per_token_engine"] for r in rows])  # [m]
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    left, right = axes
    xerr = np.abs(np.stack([rate - ci[:, 0], ci[:, 1] - rate]))  # [2, m]
    left.barh(y, rate, color=colors, xerr=xerr, capsize=3)
    left.set_yticks(y, labels)
    left.set_xlabel("tokens / s (median, 95% CI)")
    same = ", same tokens from every method" if result.get("same_tokens") else ""
    left.set_title(f"greedy, k = {result.get('k', '?')}{same}")
    right.barh(y, fwd, color=colors)
    right.barh(y, eng, left=fwd, color=colors, alpha=0.45, hatch="//")
    right.set_xlabel("ms per token (median)")
    right.set_title("where a token's time goes")
    right.legend(handles=[Patch(facecolor="0.45", label="model forwards"),
                          Patch(facecolor="0.85", hatch="//", label="engine")],
                 fontsize=8, loc="lower right")
    for ax in axes:
        ax.grid(axis="y", visible=False)
    fig = left.figure
    fig.tight_layout()
    return fig
