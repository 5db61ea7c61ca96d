"""specdec_lite.teaching.static_slider: the markup of a precomputed slider, its frames, its
checks."""

import base64
import struct
import subprocess
import sys
from html.parser import HTMLParser

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from specdec_lite.teaching import static_slider  # noqa: E402
from specdec_lite.teaching.static_slider import precompute, render_figure  # noqa: E402


def bar(height: float) -> plt.Figure:
    """A small figure that differs with ``height``."""
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.bar([0], [height])
    ax.set_ylim(0, 4)
    ax.set_title(f"h = {height:g}")
    return fig


class Tags(HTMLParser):
    """Every start tag as (name, attrs dict), in document order."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def all(self, name: str) -> list[dict]:
        return [attrs for tag, attrs in self.tags if tag == name]


VALUES = [0.5, 1.0, 2.0, 3.0]


@pytest.fixture(scope="module")
def slider():
    return precompute(bar, VALUES, label="θ", default=2.0, alt="a bar")


def test_one_frame_per_value_default_visible(slider):
    tags = Tags(slider._repr_html_())
    frames = [a for a in tags.all("img") if "data-sds-frame" in a]
    assert [a["data-sds-index"] for a in frames] == ["0", "1", "2", "3"]
    assert [a["data-sds-value"] for a in frames] == ["0.5", "1.0", "2.0", "3.0"]
    assert [a["data-sds-text"] for a in frames] == ["θ = 0.5", "θ = 1", "θ = 2", "θ = 3"]
    visible = [a["data-sds-index"] for a in frames if "hidden" not in a]
    assert visible == ["2"]  # the default, and only it
    assert frames[2]["alt"] == "a bar (θ = 2)"


def test_frames_are_the_rendered_figures(slider):
    frames = [a for a in Tags(slider._repr_html_()).all("img") if "data-sds-frame" in a]
    for attrs, frame in zip(frames, slider.frames, strict=True):
        prefix = "data:image/png;base64,"
        assert attrs["src"].startswith(prefix)
        assert base64.b64decode(attrs["src"][len(prefix):]) == frame
        assert frame.startswith(b"\x89PNG")
        width, height = struct.unpack(">II", frame[16:24])  # the PNG's IHDR chunk
        assert (attrs["width"], attrs["height"]) == (str(width), str(height))
        assert (width, height) == (100, 75)  # the whole 2 x 1.5 in canvas at 50 dpi
    assert len(set(slider.frames)) == len(VALUES)  # each value drew a different figure


def test_default_frame_is_also_a_plain_image(slider):
    assert slider._repr_png_() == slider.frames[2] and slider._repr_svg_() is None
    svg = precompute(bar, [1, 2], label="h", fmt="svg", default=2)
    assert svg._repr_png_() is None and svg._repr_svg_() == svg.frames[1].decode()


def test_control_is_labelled_and_starts_hidden(slider):
    text = slider._repr_html_()
    tags = Tags(text)
    (root,) = [a for a in tags.all("div") if "data-sds-slider" in a]
    (control,) = [a for a in tags.all("div") if "data-sds-control" in a]
    (rng,) = tags.all("input")
    (label,) = tags.all("label")
    assert "hidden" in control and "disabled" in rng  # until static_slider.js enables it
    assert rng["type"] == "range" and (rng["min"], rng["max"], rng["step"]) == ("0", "3", "1")
    assert rng["value"] == root["data-sds-default"] == "2"
    assert rng["aria-valuetext"] == "θ = 2"
    assert label["for"] == rng["id"] == root["id"] + "-input"
    assert "<script" not in text.lower()
    (note,) = [a for a in tags.all("p") if "data-sds-note" in a]
    assert "hidden" not in note and "Showing θ = 2" in text and "4 precomputed values" in text


def test_markup_is_deterministic_and_ids_differ_by_content():
    one = precompute(bar, [1, 2], label="h")._repr_html_()
    assert one == precompute(bar, [1, 2], label="h")._repr_html_()
    assert precompute(bar, [1, 3], label="h").dom_id not in one


def test_svg_frames_are_deterministic():
    a = precompute(bar, [1, 2], label="h", fmt="svg")
    b = precompute(bar, [1, 2], label="h", fmt="svg")
    assert a.frames == b.frames and a.frames[0].lstrip().startswith(b"<?xml")
    assert "data:image/svg+xml;base64," in a._repr_html_()


def test_png_bytes_carry_no_timestamp_or_software():
    fig = bar(1.0)
    data = render_figure(fig)
    plt.close(fig)
    assert b"Software" not in data and b"tIME" not in data


def test_figures_are_closed():
    before = plt.get_fignums()
    precompute(bar, [1, 2, 3], label="h")
    assert plt.get_fignums() == before


def test_default_defaults_to_first_and_matches_float_noise():
    assert precompute(bar, [1, 2], label="h").default_index == 0
    grid = np.arange(0.25, 1.01, 0.25)  # [0.25, 0.5, 0.75, 1.0]
    assert precompute(bar, grid, label="h", default=0.1 * 5).default_index == 1
    assert precompute(bar, np.linspace(0, 1, 4), label="h", default=1 / 3).default_index == 1


def test_value_format_and_repr():
    s = precompute(bar, [1, 2], label="k", value_format="{:d}", default=2)
    assert s.value_texts == ("k = 1", "k = 2")
    assert repr(s) == "StaticSlider(k: 2 frames, k = 1 to k = 2, default k = 2)"


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"values": []}, ValueError, "values"),
        ({"values": np.array([])}, ValueError, "values"),
        ({"values": [1, 1]}, ValueError, "values"),
        ({"values": [1, float("nan")]}, ValueError, "values"),
        ({"values": [1, "a"]}, TypeError, "values"),
        ({"values": [True, False]}, TypeError, "values"),
        ({"values": 3}, TypeError, "values"),
        ({"values": "12"}, TypeError, "values"),
        ({"values": list(range(static_slider.MAX_FRAMES + 1))}, ValueError, "values"),
        ({"default": 5}, ValueError, "default"),
        ({"default": "1"}, TypeError, "default"),
        ({"label": ""}, ValueError, "label"),
        ({"label": None}, ValueError, "label"),
        ({"fmt": "jpg"}, ValueError, "fmt"),
        ({"alt": 3}, TypeError, "alt"),
        ({"value_format": "{:d}"}, ValueError, "value_format"),
        ({"value_format": "{0[1]}"}, ValueError, "value_format"),
        ({"plot": "bar"}, TypeError, "plot"),
        ({"plot": lambda v: None}, TypeError, "plot"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, error, name):
    args = {"plot": bar, "values": [1.0, 2.0], "label": "h", **kwargs}
    with pytest.raises(error, match=name):
        precompute(args.pop("plot"), args.pop("values"), **args)


def test_oversize_html_is_refused(monkeypatch):
    monkeypatch.setattr(static_slider, "MAX_HTML_BYTES", 1000)
    with pytest.raises(ValueError, match="values: 2 frames make"):
        precompute(bar, [1, 2], label="h")


def test_render_figure_rejects_unknown_format():
    fig = bar(1.0)
    try:
        with pytest.raises(ValueError, match="fmt"):
            render_figure(fig, "gif")
    finally:
        plt.close(fig)


def test_importing_the_module_needs_numpy_only():
    code = ("import sys, specdec_lite.teaching.static_slider; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_book_wrappers_draw_one_frame_per_position():
    widgets = pytest.importorskip("specdec_lite.teaching.widgets")
    p = np.array([0.43, 0.25, 0.14, 0.12, 0.06])  # the toy of chapter 2
    q = np.array([0.20, 0.40, 0.30, 0.05, 0.05])
    drift = widgets.threshold_drift_static(p, q, n_samples=50, thetas=[1.0, 1.5, 3.0])
    assert drift.value_texts == ("θ = 1.00", "θ = 1.50", "θ = 3.00") and drift.default_index == 1
    assert len(set(drift.frames)) == 3
    eps = np.array([0.01, 0.09, 0.3])
    typical = widgets.typical_explorer_static(eps, np.array([2.5, 2.2, 2.0]),
                                              np.array([0.3, 0.1, 0.05]))
    assert typical.default_index == 1 and len(set(typical.frames)) == 3
    with pytest.raises(ValueError, match="default"):
        widgets.typical_explorer_static(eps, eps, eps, default=0.5)
