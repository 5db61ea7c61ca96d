"""The figure of chapter 6's roofline section: a layer's measured r(n) = T(n)/T(1) for each
kernel, against the roofline bound and the line of a product that reads all its weights
again for every row. The measurements and the bound come from :mod:`specdec_lite.bench.roofline`."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..bench.roofline import RowsCost, roofline_ratio
from .common import COLORS


def plot_rows_cost(costs: Sequence[RowsCost], peak_flops: float,
                   machine: str = "") -> plt.Figure:
    """One panel per layer: the median r(n) of every kernel measured on it with its 95%
    interval, the roofline through the faster kernel's T(1) (computed, dashed) and r(n) = n
    (dotted). ``machine`` goes into the title: measured timings name their machine."""
    layers = list(dict.fromkeys((c.name, c.d_in, c.d_out) for c in costs))
    fig, axes = plt.subplots(1, len(layers), figsize=(3.7 * len(layers), 3.5), sharey=True,
                             squeeze=False)
    styles = {"numpy": ("o-", COLORS["target"]), "streaming": ("s-", COLORS["draft"])}
    top = max(max(float(c.ns[-1]), float(c.ratio.max())) for c in costs)  # intervals may run off
    for ax, (name, d_in, d_out) in zip(axes[0], layers, strict=True):
        mine = [c for c in costs if (c.name, c.d_in, c.d_out) == (name, d_in, d_out)]
        ns = mine[0].ns
        for c in mine:
            marker, color = styles.get(c.kernel, ("^-", COLORS["theory"]))
            err = np.clip([c.ratio - c.ratio_ci[:, 0], c.ratio_ci[:, 1] - c.ratio], 0, None)
            name_of = c.kernel if c.backend == c.kernel else f"{c.kernel} ({c.backend})"
            ax.errorbar(ns, c.ratio, yerr=err, fmt=marker, color=color, ms=4, capsize=2,
                        label=f"{name_of}, measured")
        bound = roofline_ratio(ns, d_in, d_out, min(c.median[0] for c in mine), peak_flops)
        ax.plot(ns, bound, "--", color=COLORS["theory"], label="roofline (computed)")
        ax.plot(ns, ns, ":", color="#b0b0b0", label="r(n) = n")
        ax.set_title(f"{name}, {d_in}×{d_out} ({mine[0].megabytes:.1f} MB)", fontsize=9)
        ax.set_xlabel("n (rows in one product)")
        ax.set_ylim(0, 1.1 * top)
    axes[0, 0].set_ylabel("r(n) = T(n) / T(1)")
    axes[0, 0].legend(fontsize=7, loc="upper left")
    if machine:
        fig.suptitle(f"measured on {machine}", fontsize=9)
    fig.tight_layout()
    return fig
