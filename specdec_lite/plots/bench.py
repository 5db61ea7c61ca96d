"""Figures of a benchmark result: the JSON dict of :mod:`specdec_lite.bench`
(``BenchResult.to_json()`` or a loaded ``results/bench.json``), so a chapter can redraw
committed results without running them again. ``write_figures`` saves the set the
command line writes."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ..rules.theory import speedup_curve, verify_ratio_at
from .common import COLORS, figure_axes


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
    fig, ax = figure_axes(ax)
    curve = data["cost_curve"]
    n = np.array(curve["n"])
    ax.plot(n, curve["ratio"], "o-", color=COLORS["target"],
            label=f"measured on this CPU, T(1) = {curve['target_s'][0] * 1e3:.2f} ms")
    width = data["settings"]["simulate_width"] or int(n.max())
    ax.step(n, verify_ratio_at(n, width=width), where="mid", color=COLORS["theory"], ls="--",
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


def plot_kernel_curves(curves: dict) -> plt.Figure:
    """The target's T(n)/T(1) under each OpenBLAS kernel (one panel each), for the numpy
    and the compiled forward, from ``python -m specdec_lite.bench.curves`` (a loaded
    ``results/kernel_curves.json``). T(1) and c of each curve are in its legend."""
    kernels = list(dict.fromkeys(c["kernel"] for c in curves["curves"]))
    fig, axes = plt.subplots(1, len(kernels), figsize=(4.6 * len(kernels), 3.6), sharey=True,
                             squeeze=False)
    styles = {"numpy": ("o-", COLORS["target"]), "numba": ("s--", COLORS["draft"])}
    for ax, kernel in zip(axes[0], kernels, strict=True):
        for curve in (c for c in curves["curves"] if c["kernel"] == kernel):
            marker, color = styles.get(curve["backend"], ("^-", COLORS["theory"]))
            ax.plot(curve["n"], curve["ratio"], marker, color=color,
                    label=f"{curve['backend']}: T(1) = {curve['target_s'][0] * 1e3:.2f} ms, "
                          f"c = {curve['c']:.2f}")
        _ratio_panel(ax, f"OpenBLAS kernel {kernel}", 8)
    return _ratio_figure(fig, axes)


def plot_curves_by_cpu(files: list[dict]) -> plt.Figure:
    """The target's T(n)/T(1) on each machine (one panel each, titled with its CPU): the
    numpy and the compiled forward under each OpenBLAS kernel, from loaded
    ``python -m specdec_lite.bench.curves`` files. T(1) of each curve is in its legend."""
    fig, axes = plt.subplots(1, len(files), figsize=(4.6 * len(files), 3.6), sharey=True,
                             squeeze=False)
    colors = {"numpy": COLORS["target"], "numba": COLORS["draft"]}
    for ax, data in zip(axes[0], files, strict=True):
        for curve in data["curves"]:
            line = "o-" if curve["kernel"] == "SkylakeX" else "s--"
            ax.plot(curve["n"], curve["ratio"], line, color=colors.get(curve["backend"]),
                    mfc="white" if curve["kernel"] != "SkylakeX" else None,
                    label=f"{curve['backend']}, {curve['kernel']}: "
                          f"T(1) = {curve['target_s'][0] * 1e3:.2f} ms")
        machine = data["machine"]
        _ratio_panel(ax, f"{machine['cpu_model']} ({machine['cpu_count']} cores)", 7.5)
    return _ratio_figure(fig, axes)


def _ratio_panel(ax: plt.Axes, title: str, legend_size: float) -> None:
    """A panel of T(n)/T(1) curves: the flat line at 1, its title, axis and legend."""
    ax.axhline(1.0, color="#b0b0b0", lw=0.8)
    ax.set_title(title)
    ax.set_xlabel("n (new tokens in one target forward)")
    ax.legend(fontsize=legend_size, loc="upper left")


def _ratio_figure(fig: plt.Figure, axes: np.ndarray) -> plt.Figure:
    """A row of :func:`_ratio_panel` panels sharing y, labelled on the first, from 0 up."""
    axes[0, 0].set_ylabel("T(n) / T(1)")
    axes[0, 0].set_ylim(0, None)
    fig.tight_layout()
    return fig


def plot_reproduction(comparison: dict, ax: plt.Axes | None = None) -> plt.Figure:
    """Each measured row's speedup in a second run (y) against the reference run (x), both
    with their 95% CIs, from ``bench.compare_runs``; rows whose new median falls outside the
    reference CI are drawn hollow. On the diagonal the two runs agree."""
    fig, ax = figure_axes(ax, figsize=(5.2, 5.0))
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


def plot_engine_split(data: dict, ax: plt.Axes | None = None, top: int = 3) -> plt.Figure:
    """The engine's share of one profiled run per method, the model forwards left out: each
    bar is (run time − forward time) / run time, split into the ``top`` engine functions
    of each method (their union, one colour each) and the rest of the engine."""
    profile = data["profile"]
    fig, ax = figure_axes(ax, figsize=(9, 0.5 * len(profile) + 1.6))
    names = []
    for prof in profile.values():
        names += [name for name, _ in prof["engine"][:top] if name not in names]
    colors = dict(zip(names, plt.get_cmap("tab20")(np.arange(len(names)) % 20), strict=True))
    shares = []
    for i, prof in enumerate(profile.values()):
        wall, engine = prof["wall_s"], dict(prof["engine"])
        parts = [(name, engine.get(name, 0.0) / wall) for name in names]  # [names]
        rest = (wall - prof["forward_s"]) / wall - sum(share for _, share in parts)
        left = 0.0
        for name, share in parts + [("rest of the engine", rest)]:
            ax.barh(i, share, left=left, color=colors.get(name, "#d0d0d0"),
                    label=name if i == 0 else None)
            left += share
        ax.text(left, i, f" {left:.1%}", va="center", fontsize=8)
        shares.append(left)
    ax.set_yticks(range(len(profile)), list(profile), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.2 * max(shares))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x:.0%}"))
    ax.set_xlabel("share of the run's time outside the model forwards (one run under cProfile)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


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
    95% CIs (dots), the prediction from each row's measured τ (crosses), and S(k) =
    E(k)/(k·c + r(k+1)) at one ``alpha`` with the costs the runs paid (dashed, at the k the
    runs verified) and with the isolated cost curve (dotted). SIMULATED rows, if the run
    has them, in grey squares with their own grey dotted S(k) (flat cost up to the width).
    ``method``: ``"speculative"`` (the draft GPT, cost c) or ``"ngram"`` (cost c_ngram)."""
    fig, ax = figure_axes(ax, figsize=(6, 3.8))
    rows = bench_rows(data, method, temperature)
    ks = np.array([r["k"] for r in rows])
    grid = np.arange(1, ks.max() + 1)
    draft = "c" if method == "speculative" else "c_ngram"
    ax.plot(grid, speedup_curve(alpha, grid, data[draft], data["cost_curve"]["ratio"]), ":",
            color=COLORS["target"], alpha=0.6, label=f"S(k), isolated r(n), α = {alpha:.2f}")
    paid = data.get("in_run_costs")
    if paid and paid["n"] and paid[draft] is not None:
        run = speedup_curve(alpha, grid, paid[draft], paid["ratio"], sizes=paid["n"])  # [len(grid)]
        known = np.isfinite(run)  # the k whose k + 1 tokens the runs verified in one forward
        ax.plot(grid[known], run[known], "--",
                color=COLORS["target"], alpha=0.8,
                label=f"S(k), in-run costs, α = {alpha:.2f}")
    _errorbar(ax, rows, ks, fmt="o-", color=COLORS["target"], label="measured (95% CI)")
    ax.plot(ks, _predicted(rows), "x", color=COLORS["theory"],
            ms=8, label="predicted from measured τ")
    sim = bench_rows(data, method, temperature, simulated=True)
    if sim:
        width = data["settings"]["simulate_width"]
        ax.plot(grid, speedup_curve(alpha, grid, data[draft], width=width), ":", color="#888888",
                label=f"S(k), SIMULATED r(n) = ceil(n/{width})")
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
    fig, ax = figure_axes(ax, figsize=(6, 3.8))
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


def write_figures(data: dict, directory: str | Path) -> list[Path]:
    """Save the benchmark figures of one result ``data`` into ``directory`` as PNGs: the
    speedups, the cost curve and the engine's share of each profiled run, plus the
    SIMULATED speedups if the run has them. Returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    figures = {"bench_speedup.png": plot_bench_speedup(data),
               "bench_cost_curve.png": plot_cost_curve(data),
               "bench_overhead.png": plot_engine_split(data)}
    if data["settings"]["simulate_width"]:
        figures["bench_speedup_simulated.png"] = plot_bench_speedup(data, simulated=True)
    paths = []
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=110, bbox_inches="tight")
        plt.close(fig)
        paths.append(out / name)
    return paths
