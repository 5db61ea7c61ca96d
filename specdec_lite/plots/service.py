"""Figures of the chapter "From a loop to a service": throughput against batch size (the
``batch`` section of a benchmark, ``results/batch_throughput.json``), the accepted-tokens
histogram scraped from a server's ``/metrics``, and the load test of the service
(``results/service_load.json``, as a figure and as a text table). They take the plain data
those files and the Prometheus parser give, and compute nothing but what they show."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .common import COLORS, figure_axes

#: Line style of each method in the batch figures: plain decoding is the target alone.
_METHOD_STYLE = {"plain": (COLORS["target"], "o", "plain"),
                 "speculative": (COLORS["draft"], "s", "speculative")}


def batch_rows(section: dict, method: str, temperature: float) -> list[dict]:
    """The rows of ``section`` (a benchmark's ``batch`` section) for one method and
    temperature, in order of batch size."""
    if method not in _METHOD_STYLE:
        raise ValueError(f"method must be 'plain' or 'speculative', got {method!r}")
    rows = [r for r in section["rows"]
            if r["method"] == method and r["temperature"] == temperature]
    if not rows:
        raise ValueError(f"section has no rows for method={method!r}, "
                         f"temperature={temperature!r}")
    return sorted(rows, key=lambda r: r["batch"])


def _errorbar(ax: plt.Axes, x: np.ndarray, y: np.ndarray, ci: np.ndarray, **style) -> None:
    """Points ``y`` [n] at ``x`` [n] with their intervals ``ci`` [n, 2] as bars."""
    yerr = np.abs(np.stack([y - ci[:, 0], ci[:, 1] - y]))  # [2, n]
    ax.errorbar(x, y, yerr=yerr, capsize=3, **style)


def plot_batch_throughput(section: dict, temperatures: tuple[float, ...] | None = None,
                          axes: np.ndarray | None = None) -> plt.Figure:
    """Left: tokens per second over the whole batch against batch size B, plain and
    speculative, with 95% CIs; the first temperature solid, the others dashed. Right: the
    speedup (speculative over plain, paired by repeat) with its CI, and the line 1 below
    which speculation loses."""
    temperatures = tuple(section["settings"]["temperatures"] if temperatures is None
                         else temperatures)
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    fig = axes[0].figure
    left, right = axes
    for i, t in enumerate(temperatures):
        line = "-" if i == 0 else "--"
        for method, (color, marker, name) in _METHOD_STYLE.items():
            rows = batch_rows(section, method, t)
            b = np.array([r["batch"] for r in rows])  # [n_sizes]
            rate = np.array([r["tokens_per_s"] for r in rows])  # [n_sizes]
            ci = np.array([r["tokens_per_s_ci"] for r in rows])  # [n_sizes, 2]
            _errorbar(left, b, rate, ci, color=color, marker=marker, ls=line,
                      label=f"{name}, T = {t:g}")
        rows = batch_rows(section, "speculative", t)
        b = np.array([r["batch"] for r in rows])
        _errorbar(right, b, np.array([r["speedup"] for r in rows]),
                  np.array([r["speedup_ci"] for r in rows]), color=COLORS["draft"],
                  marker="s", ls=line, label=f"T = {t:g}")
    right.axhline(1.0, color=COLORS["theory"], lw=0.9)
    k = section["settings"]["k"]
    for ax, ylabel, title in ((left, "tokens / s (whole batch)", "throughput"),
                              (right, "speculative / plain", f"speedup of speculation (k = {k})")):
        ax.set_xscale("log", base=2)
        sizes = section["settings"]["sizes"]
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("batch size B")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def bucket_counts(upper_bounds: list[float], cumulative: list[float]) -> np.ndarray:
    """Per-bucket counts [n] from a Prometheus histogram's cumulative ``_bucket`` values
    [n], given in the order of their ``le`` bounds ``upper_bounds`` [n] (``+Inf`` last)."""
    bounds = np.asarray(upper_bounds, dtype=float)  # [n]
    totals = np.asarray(cumulative, dtype=float)  # [n]
    if bounds.shape != totals.shape or bounds.ndim != 1 or not len(bounds):
        raise ValueError("upper_bounds and cumulative must be equally long, non-empty lists")
    if np.any(np.diff(bounds) <= 0):
        raise ValueError("upper_bounds must increase")
    counts = np.diff(totals, prepend=0.0)  # [n]
    if np.any(counts < 0):
        raise ValueError("cumulative must not decrease")
    return counts


def plot_accepted_histogram(upper_bounds: list[float], cumulative: list[float], k: int,
                            ax: plt.Axes | None = None, title: str | None = None
                            ) -> plt.Figure:
    """The share of speculative steps that accepted 0, 1, .., k draft tokens, from the
    ``specdec_accepted_tokens`` histogram (integer ``le`` bounds 0, 1, ..). Buckets past
    ``k`` must be empty: a step cannot accept more than it drafted."""
    fig, ax = figure_axes(ax, figsize=(6, 3.2))
    counts = bucket_counts(upper_bounds, cumulative)  # [n]
    if counts[k + 1:].sum() > 0:
        raise ValueError(f"the histogram has steps that accepted more than k={k} tokens")
    shares = counts[:k + 1] / max(counts.sum(), 1)  # [k + 1]
    ax.bar(np.arange(k + 1), shares, color=COLORS["accepted"], width=0.7)
    for n, share in enumerate(shares):
        ax.text(n, share, f"{share:.0%}", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(np.arange(k + 1))
    ax.set_xlabel("draft tokens accepted in a step")
    ax.set_ylabel("share of steps")
    ax.set_title(title or f"accepted tokens per step, {int(counts.sum())} steps")
    ax.grid(axis="x", visible=False)
    return fig


def plot_service_load(load: dict, axes: np.ndarray | None = None) -> plt.Figure:
    """The load test (``results/service_load.json``): left, tokens per second of each
    configuration; right, its median (p50) and 99th-percentile (p99) request latency."""
    runs = load["runs"]
    if not runs:
        raise ValueError("load has no runs")
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    fig = axes[0].figure
    left, right = axes
    labels = [r["label"].replace(", ", ",\n") for r in runs]
    y = np.arange(len(runs))  # [n_runs]
    colors = [COLORS["draft"] if r["method"] != "plain" else COLORS["target"] for r in runs]
    left.barh(y, [r["tokens_per_s"] for r in runs], color=colors)
    left.set_yticks(y, labels)
    left.invert_yaxis()
    left.set_xlabel("tokens / s (all requests)")
    left.set_title("throughput")
    height = 0.38
    right.barh(y - height / 2, [r["p50_s"] for r in runs], height, color="#999999", label="p50")
    right.barh(y + height / 2, [r["p99_s"] for r in runs], height, color="#444444", label="p99")
    right.set_yticks(y, labels)
    right.invert_yaxis()
    right.set_xlabel("request latency (s)")
    right.set_title("latency")
    right.legend(fontsize=8)
    for ax in axes:
        ax.grid(axis="y", visible=False)
    fig.tight_layout()
    return fig


def format_service_load(load: dict) -> str:
    """The load test (``results/service_load.json``) as text: a line of settings and
    machine, then one row per configuration with its throughput, p50 and p99 latency,
    and how many requests completed and were lost."""
    runs = load["runs"]
    if not runs:
        raise ValueError("load has no runs")
    s, m = load["settings"], load["machine"]
    lines = [f"{s['requests']} requests, {s['concurrency']} concurrent, {s['max_tokens']} tokens, "
             f"T = {s['temperature']:g}, k = {s['k']}; {m['cpu_model']}, {m['cpu_count']} cores",
             "",
             f"{'configuration':28} {'tokens/s':>9} {'p50 s':>6} {'p99 s':>6} "
             f"{'complete':>8} {'lost':>4}"]
    for r in runs:
        lines.append(f"{r['label']:28} {r['tokens_per_s']:9.0f} {r['p50_s']:6.3f} "
                     f"{r['p99_s']:6.3f} {r['n_complete']:8d} {r['n_lost']:4d}")
    return "\n".join(lines)


__all__ = ["batch_rows", "bucket_counts", "format_service_load", "plot_accepted_histogram",
           "plot_batch_throughput", "plot_service_load"]
