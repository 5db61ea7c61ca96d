"""Live ipywidgets controls for the book: ``from specdec_lite.teaching import widgets``.

Each function wraps a function of :mod:`specdec_lite.plots` in
``ipywidgets.interact`` with sliders. In the book these cells are the *live
layer*, tagged ``nbval-ignore-output``; the static layer calls the same plot
function directly at default values, so the HTML never shows a blank widget.

The ``*_static`` functions are the precomputed twins of the key sliders: they draw the
same plot function at a fixed list of slider positions when the notebook runs
(:mod:`specdec_lite.teaching.static_slider`), so the slider responds in the plain HTML page,
without a kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from .. import plots
from . import static_slider


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


#: Draft temperatures of the precomputed slider (7 frames, about 0.85 MB of page: the
#: heatmap makes each frame large).
STATIC_T_DRAFTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def temperature_overlap_static(
    p: plots.Probs, q: plots.Probs, labels: list[str] | None = None, n_show: int | None = 12,
    t_target: float = 1.0, t_drafts=STATIC_T_DRAFTS, default: float = 1.0,
) -> static_slider.StaticSlider:
    """The draft-temperature slider of :func:`temperature_overlap`, precomputed at
    ``t_drafts`` with the target at ``t_target``, for the plain page."""
    return static_slider.precompute(
        lambda t_draft: plots.plot_temperature_overlap(p, q, t_target, t_draft, labels,
                                                       n_show=n_show),
        t_drafts, label="T draft", default=default, value_format="{:.2f}",
        alt=f"Left: the target at T = {t_target:g} and the draft at this temperature, with "
            "their overlap; right: α over both temperatures, this point circled",
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


#: θ positions of the precomputed slider: every regime of the toy's ratios p/q (the output
#: changes only where θ crosses one), 12 frames, about 0.8 MB of page.
STATIC_THETAS = np.arange(0.25, 3.01, 0.25)


def threshold_drift_static(
    p, q, labels: list[str] | None = None, n_samples: int = 5000, thetas=STATIC_THETAS,
    default: float = 1.5,
) -> static_slider.StaticSlider:
    """The θ slider of :func:`threshold_drift`, precomputed at ``thetas`` for the plain page:
    the same figure (and the same ``n_samples`` sampled steps, seed 0) at each θ."""
    return static_slider.precompute(
        lambda theta: plots.plot_threshold_drift(p, q, theta, labels, n_samples=n_samples),
        thetas, label="θ", default=default, value_format="{:.2f}",
        alt="Left: the threshold rule's one-token output against the target p; "
            "right: TV(output, p) against θ, with θ marked",
    )


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


def k_explorer_static(
    target, draft, tokenizer, prompt: str, max_new_tokens: int = 60, seed: int = 0,
    max_steps: int = 12, ks=range(1, 11), temperature: float = 1.0, default: int = 4,
) -> static_slider.StaticSlider:
    """The k slider of :func:`k_explorer`, precomputed at each of ``ks`` (the temperature
    fixed) for the plain page: one speculative run per k, traced as the explorer draws it."""
    return static_slider.precompute(
        lambda k: plots.plot_speculative_run(
            target, draft, tokenizer, prompt, k=k, temperature=temperature,
            max_new_tokens=max_new_tokens, seed=seed, max_steps=max_steps,
        ),
        ks, label="k", default=default, value_format="{:d}",
        alt=f"The trace of one speculative run at T = {temperature:g}: each step's accepted, "
            "rejected, corrected and bonus tokens",
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
        _show(_typical_point(eps, tau, tv, value, delta, *measure(value, delta)))

    return W.interactive(
        draw,
        log10_eps=W.FloatSlider(value=-1.05, min=-3.0, max=-0.1, step=0.05,
                                description="log10 ε", continuous_update=False),
        delta=W.FloatSlider(value=0.3, min=0.05, max=1.0, step=0.05, description="δ",
                            continuous_update=False),
    )


def _typical_point(eps: np.ndarray, tau: np.ndarray, tv: np.ndarray, value: float,
                   delta: float, point_tau: float, point_tv: float) -> plt.Figure:
    """The sweep of :func:`plots.plot_typical_tradeoff` with one measured point starred."""
    fig = plots.plot_typical_tradeoff(eps, tau, tv, current=value,
                                      title=f"ε = {value:.3g}, δ = {delta:.2f}: "
                                            f"τ = {point_tau:.2f}, TV = {point_tv:.3f}")
    ax, twin = fig.axes
    ax.plot([value], [point_tau], "*", ms=14, color=plots.COLORS["accepted"])
    twin.plot([value], [point_tv], "*", ms=14, color=plots.COLORS["rejected"])
    return fig


def typical_explorer_static(eps: np.ndarray, tau: np.ndarray, tv: np.ndarray,
                            default: float = 0.09) -> static_slider.StaticSlider:
    """An ε slider over the sweep's own points (δ = √ε), precomputed for the plain page:
    each frame stars the sweep's measured τ and TV at that ε, so nothing is decoded again."""
    eps = np.asarray(eps, dtype=float)  # [n]
    points = {float(e): (float(t), float(d)) for e, t, d in zip(eps, tau, tv, strict=True)}
    return static_slider.precompute(
        lambda e: _typical_point(eps, tau, tv, e, float(np.sqrt(e)), *points[e]),
        eps, label="ε", default=default, value_format="{:.3g}",
        alt="Typical acceptance: τ and the first token's TV distance from the target "
            "against ε, with this ε's point starred",
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
