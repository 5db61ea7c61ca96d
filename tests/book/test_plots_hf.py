"""Appendix B's figure (specdec_lite.plots.hf): colours by method family, the bars equal
the rows they draw, bad input refused, and the committed result file draws."""

import json

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from support import RESULTS

from specdec_lite.plots.common import COLORS
from specdec_lite.plots.hf import family_color, plot_hf_rates


def _row(label, rate, fwd, eng):
    return {"label": label, "tokens_per_s": rate, "tokens_per_s_ci": [rate - 10, rate + 20],
            "ms_per_token_forward": fwd, "ms_per_token_engine": eng}


def _result():
    return {"k": 4, "rows": [_row("HF greedy", 200.0, 4.0, 0.5),
                             _row("ours speculative k=4 over HF", 270.0, 3.0, 0.5),
                             _row("ours AR over numpy", 600.0, 1.5, 0.1)]}


@pytest.mark.parametrize(("label", "role"), [
    ("HF greedy", "theory"), ("HF assisted k=4", "theory"), ("ours AR over HF", "draft"),
    ("ours speculative k=4 over HF", "draft"), ("ours speculative k=4 over numpy", "target"),
])
def test_family_color_follows_the_label(label, role):
    assert family_color(label) == COLORS[role]


def test_family_color_refuses_unknown_labels():
    with pytest.raises(ValueError, match="label"):
        family_color("vLLM")
    with pytest.raises(TypeError, match="label"):
        family_color(3)


def _top_down(patches):
    """Bars from the top of the axes down, the order the rows are drawn in."""
    return sorted(patches, key=lambda p: -p.get_y())


def test_bars_equal_the_rows():
    fig = plot_hf_rates(_result())
    left, right = fig.axes
    np.testing.assert_allclose([p.get_width() for p in _top_down(left.patches)],
                               [200.0, 270.0, 600.0])
    forward = [p.get_width() for p in _top_down(right.patches[:3])]
    engine = _top_down(right.patches[3:])
    np.testing.assert_allclose(forward, [4.0, 3.0, 1.5])
    np.testing.assert_allclose([p.get_width() for p in engine], [0.5, 0.5, 0.1])
    np.testing.assert_allclose([p.get_x() for p in engine], forward)  # stacked on forwards
    ticks = sorted(zip(left.get_yticks(), left.get_yticklabels(), strict=True),
                   key=lambda t: -t[0])
    assert [label.get_text() for _, label in ticks] == [
        "HF greedy", "ours speculative k=4 over HF", "ours AR over numpy"]
    top = _top_down(left.patches)
    assert matplotlib.colors.same_color(top[0].get_facecolor(), COLORS["theory"])
    assert matplotlib.colors.same_color(top[2].get_facecolor(), COLORS["target"])
    plt.close(fig)


@pytest.mark.parametrize("bad", [{}, {"rows": []}, None])
def test_plot_refuses_a_result_without_rows(bad):
    with pytest.raises(ValueError, match="result"):
        plot_hf_rates(bad)


def test_the_committed_result_draws():
    result = json.loads((RESULTS / "bench_hf.json").read_text())
    fig = plot_hf_rates(result)
    assert len(fig.axes[0].patches) == len(result["rows"])
    plt.close(fig)
