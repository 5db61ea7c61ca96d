"""The figure of chapter 6's roofline section: a layer's measured r(n) = T(n)/T(1) for each
kernel, against the roofline bound and the line of a product that reads all its weights
again for every row. The measurements and the bound come from :mod:`specdec_lite.bench.roofline`."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..bench.roofline import RowsCost, by_layer, layer_roofline
from .common import COLORS


def _label(cost: RowsCost) -> str:
    """The kernel, with what ran it where that differs (``skinny (numba)``)."""
    return cost.kernel if cost.backend == cost.kernel else f"{cost.kernel} ({cost.backend})"


def _below_above(middle: np.ndarray, ci: np.ndarray) -> np.ndarray:  # [N], [N, 2] -> [2, N]
    """An interval as errorbar's yerr: the distances below and above the middle."""
    return np.clip([middle - ci[:, 0], ci[:, 1] - middle], 0, None)


def _finish(fig: plt.Figure, axes: np.ndarray, machine: str, legend_size: int) -> plt.Figure:
    """The shared y label and legend on the first panel, and the machine in the title."""
    axes[0, 0].set_ylabel("r(n) = T(n) / T(1)")
    axes[0, 0].legend(fontsize=legend_size, loc="upper left")
    if machine:
        fig.suptitle(f"measured on {machine}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_rows_cost(costs: Sequence[RowsCost], peak_flops: float,
                   machine: str = "") -> plt.Figure:
    """One panel per layer: the median r(n) of every kernel measured on it with its 95%
    interval, the roofline through the faster kernel's T(1) (computed, dashed) and r(n) = n
    (dotted). ``machine`` goes into the title: measured timings name their machine."""
    layers = by_layer(costs)
    fig, axes = plt.subplots(1, len(layers), figsize=(3.7 * len(layers), 3.5), sharey=True,
                             squeeze=False)
    styles = {"numpy": ("o-", COLORS["target"]), "skinny": ("s-", COLORS["draft"])}
    top = max(max(float(c.ns[-1]), float(c.ratio.max())) for c in costs)  # intervals may run off
    for ax, mine in zip(axes[0], layers, strict=True):
        ns, (name, d_in, d_out) = mine[0].ns, (mine[0].name, mine[0].d_in, mine[0].d_out)
        for c in mine:
            marker, color = styles.get(c.kernel, ("^-", COLORS["theory"]))
            ax.errorbar(ns, c.ratio, yerr=_below_above(c.ratio, c.ratio_ci), fmt=marker,
                        color=color, ms=4, capsize=2, label=f"{_label(c)}, measured")
        bound = layer_roofline(mine, peak_flops)
        ax.plot(ns, bound, "--", color=COLORS["theory"], label="roofline (computed)")
        ax.plot(ns, ns, ":", color="#b0b0b0", label="r(n) = n")
        ax.set_title(f"{name}, {d_in}×{d_out} ({mine[0].megabytes:.1f} MB)", fontsize=9)
        ax.set_xlabel("n (rows in one product)")
        ax.set_ylim(0, 1.1 * top)
    return _finish(fig, axes, machine, legend_size=7)


def plot_rows_by_size(costs: Sequence[RowsCost], ns: Sequence[int] = (2, 4, 6),
                      machine: str = "") -> plt.Figure:
    """One panel per kernel: r(n) for each n in ``ns`` (median and 95% interval) against
    the size of the layer's weights, from layers the caches hold to layers only main
    memory holds (:func:`specdec_lite.bench.roofline.measure_sizes`). The dotted line is
    a flat r(n) = 1, the roofline's bound wherever the layer is memory-bound."""
    kernels = list(dict.fromkeys(c.kernel for c in costs))
    fig, axes = plt.subplots(1, len(kernels), figsize=(4.6 * len(kernels), 3.4), sharey=True,
                             squeeze=False)
    shades = plt.get_cmap("viridis")(np.linspace(0.1, 0.8, len(ns)))
    top = max(float(c.ratio_ci[list(c.ns).index(n), 1]) for c in costs for n in ns)
    for ax, kernel in zip(axes[0], kernels, strict=True):
        mine = sorted((c for c in costs if c.kernel == kernel), key=lambda c: c.megabytes)
        sizes = [c.megabytes for c in mine]
        for n, shade in zip(ns, shades, strict=True):
            j = list(mine[0].ns).index(n)
            ratio = np.array([c.ratio[j] for c in mine])  # [sizes]
            ci = np.array([c.ratio_ci[j] for c in mine])  # [sizes, 2]
            ax.errorbar(sizes, ratio, yerr=_below_above(ratio, ci), fmt="o-", color=shade,
                        ms=4, capsize=2, label=f"r({n})")
        ax.axhline(1.0, ls=":", color="#b0b0b0")
        ax.set_xscale("log")
        ax.set_title(_label(mine[0]), fontsize=9)
        ax.set_xlabel("weights of the layer (MB, float32)")
        ax.set_ylim(0, 1.1 * top)
    return _finish(fig, axes, machine, legend_size=8)
