"""Live ipywidgets controls for the book: ``from specdec_lite import widgets``.

Each function wraps a function of :mod:`specdec_lite.plots` in
``ipywidgets.interact`` with sliders. In the book these cells are the *live
layer*, tagged ``nbval-ignore-output``; the static layer calls the same plot
function directly at default values, so the HTML never shows a blank widget.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from . import plots


def _show(fig: plt.Figure) -> None:
    """Display ``fig`` inside an ``interact`` callback and release it."""
    plt.show()
    plt.close(fig)


# ---------------------------------------------------------------------------
# Chapter 1: distributions
# ---------------------------------------------------------------------------

def temperature_overlap(
    p: plots.Probs, q: plots.Probs, labels: list[str] | None = None, n_show: int | None = 12
) -> W.interactive:
    """Sliders for the target's and the draft's temperature over
    :func:`plots.plot_temperature_overlap`: the overlap bars and α update live.

    ``p`` and ``q`` are target and draft distributions [V]; display the returned widget
    (make it the last expression of a cell).
    """

    def draw(t_target: float = 1.0, t_draft: float = 1.0) -> None:
        _show(plots.plot_temperature_overlap(p, q, t_target, t_draft, labels, n_show=n_show))

    slider = {"min": 0.0, "max": 3.0, "step": 0.05, "value": 1.0, "continuous_update": False}
    return W.interactive(
        draw,
        t_target=W.FloatSlider(description="T target", **slider),
        t_draft=W.FloatSlider(description="T draft", **slider),
    )


# ---------------------------------------------------------------------------
# Chapter 2: acceptance
# ---------------------------------------------------------------------------


def threshold_drift(
    p, q, labels: list[str] | None = None, n_samples: int = 5000
) -> W.interactive:
    """A θ slider for the threshold rule: its output vs p and the TV(θ) curve.

    ``p`` and ``q`` are target and draft distributions [V]; display the returned widget.

    Wraps :func:`specdec_lite.plots.plot_threshold_drift`; each move re-samples
    ``n_samples`` one-token steps through ``verify`` for the black dots.
    """

    def draw(theta: float = 1.5) -> None:
        _show(plots.plot_threshold_drift(p, q, theta, labels, n_samples=n_samples))

    slider = W.FloatSlider(
        value=1.5, min=0.25, max=4.0, step=0.05, description="θ", continuous_update=False
    )
    return W.interactive(draw, theta=slider)


# ---------------------------------------------------------------------------
# Chapter 3: the decode loop
# ---------------------------------------------------------------------------

def k_explorer(
    target, draft, tokenizer, prompt: str, max_new_tokens: int = 60, seed: int = 0,
    max_steps: int = 12,
) -> W.interactive:
    """A k slider and a temperature slider over :func:`plots.plot_speculative_run`:
    each move reruns speculative decoding on ``prompt`` and redraws the trace and τ.

    Display the returned widget (make it the last expression of a cell).
    """

    def draw(k: int = 4, temperature: float = 1.0) -> None:
        _show(plots.plot_speculative_run(
            target, draft, tokenizer, prompt, k=k, temperature=temperature,
            max_new_tokens=max_new_tokens, seed=seed, max_steps=max_steps,
        ))

    return W.interactive(
        draw,
        k=W.IntSlider(value=4, min=1, max=10, description="k", continuous_update=False),
        temperature=W.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.1, description="T",
                                  continuous_update=False),
    )


# ---------------------------------------------------------------------------
# Chapter 5: Medusa heads
# ---------------------------------------------------------------------------


def typical_explorer(eps: np.ndarray, tau: np.ndarray, tv: np.ndarray,
                     measure: Callable[[float, float], tuple[float, float]]) -> W.interactive:
    """ε and δ sliders for typical acceptance. ``eps``, ``tau``, ``tv`` are a precomputed
    sweep (δ = √ε) drawn by :func:`plots.plot_typical_tradeoff`; each move calls
    ``measure(eps, delta) -> (tau, tv)`` and marks that point on the figure."""

    def draw(log10_eps: float = -1.05, delta: float = 0.3) -> None:
        value = 10.0**log10_eps
        point_tau, point_tv = measure(value, delta)
        fig = plots.plot_typical_tradeoff(eps, tau, tv, current=value,
                                          title=f"ε = {value:.3g}, δ = {delta:.2f}: "
                                                f"τ = {point_tau:.2f}, TV = {point_tv:.3f}")
        ax, twin = fig.axes
        ax.plot([value], [point_tau], "*", ms=14, color=plots.COLORS["accepted"])
        twin.plot([value], [point_tv], "*", ms=14, color=plots.COLORS["rejected"])
        _show(fig)

    return W.interactive(
        draw,
        log10_eps=W.FloatSlider(value=-1.05, min=-3.0, max=-0.1, step=0.05,
                                description="log10 ε", continuous_update=False),
        delta=W.FloatSlider(value=0.3, min=0.05, max=1.0, step=0.05, description="δ",
                            continuous_update=False),
    )


# ---------------------------------------------------------------------------
# Chapter 6: does it pay?
# ---------------------------------------------------------------------------


def speedup_explorer(verify: np.ndarray | None = None, k_max: int = 16, alpha: float = 0.7,
                     c: float = 0.2) -> W.interactive:
    """Sliders for k, α and c over :func:`plots.plot_speedup_explorer`: Thm 3.8 against k
    with a flat verification cost and, if ``verify`` (a measured T(n)/T(1) curve) is
    given, with that cost curve too. ``alpha`` and ``c`` are the sliders' start values.

    Display the returned widget (make it the last expression of a cell).
    """

    def draw(k: int = 4, alpha: float = alpha, c: float = c) -> None:
        _show(plots.plot_speedup_explorer(k, alpha, c, verify, k_max))

    return W.interactive(
        draw,
        k=W.IntSlider(value=4, min=1, max=k_max, description="k", continuous_update=False),
        alpha=W.FloatSlider(value=round(alpha, 2), min=0.0, max=0.99, step=0.01,
                            description="α", continuous_update=False),
        c=W.FloatSlider(value=round(c, 2), min=0.0, max=1.0, step=0.01, description="c",
                        continuous_update=False),
    )
