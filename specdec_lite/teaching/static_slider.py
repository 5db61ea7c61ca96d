"""Sliders that respond in a plain HTML page, with no kernel: every position is drawn in advance.

:func:`precompute` calls a plot function once per slider position while the notebook runs,
and returns a :class:`StaticSlider`. Its ``_repr_html_`` is markup only, with no script: a
labelled ``<input type="range">`` over the positions, and one ``<img>`` per position, all
hidden but the default. The book's own ``book/js/static_slider.js`` finds these elements
(``data-sds-*`` attributes) and swaps the frames as the slider moves. Where that script is
absent (JupyterLab, the live edition) the slider stays hidden, and a note under the default
frame says what the page shows.

Frames are byte-deterministic (PNG without the ``Software`` stamp, or SVG with a fixed
``svg.hashsalt`` and no date), so strict nbval can compare them exactly.

matplotlib is imported only when frames are drawn: ``import specdec_lite`` needs numpy only.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import numbers
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

FORMATS = {"png": "image/png", "svg": "image/svg+xml"}
#: Refuse sliders with more positions than this: each one is a whole figure in the page.
MAX_FRAMES = 200
#: Refuse sliders whose markup would exceed this many bytes (the frames dominate it).
MAX_HTML_BYTES = 2_000_000
_SVG_SALT = "specdec_lite.static_slider"


def render_figure(fig: Any, fmt: str = "png") -> bytes:
    """The bytes of matplotlib ``fig`` as ``fmt`` ("png" or "svg"), identical on every run
    with the same inputs and library versions (no timestamps, fixed SVG ids). Uses the
    current ``savefig.dpi`` and the whole canvas: every frame of a slider then has the same
    size, so the page does not jump as it moves (and a tight box would draw twice).
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {sorted(FORMATS)}, got {fmt!r}")
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    if fmt == "png":
        fig.savefig(buf, format="png", metadata={"Software": None})
    else:
        with plt.rc_context({"svg.hashsalt": _SVG_SALT}):
            fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def _png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG's IHDR chunk, or None if ``data`` is not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


@dataclass(frozen=True)
class StaticSlider:
    """One slider's frames and how to label them; display it to get the markup.

    ``frames[i]`` is the figure (PNG or SVG bytes) at ``values[i]``; ``value_texts[i]`` is
    how that value reads ("θ = 1.5"); ``default_index`` is the frame shown first.
    """

    label: str
    values: tuple
    value_texts: tuple[str, ...]
    frames: tuple[bytes, ...]
    default_index: int
    fmt: str = "png"
    alt: str = ""

    @property
    def dom_id(self) -> str:
        """An id prefix for the page, derived from the content, so it is stable across runs."""
        digest = hashlib.sha256(self.label.encode())
        for text, frame in zip(self.value_texts, self.frames, strict=True):
            digest.update(text.encode())
            digest.update(frame)
        return "sds-" + digest.hexdigest()[:12]

    def __repr__(self) -> str:
        return (f"StaticSlider({self.label}: {len(self.frames)} frames, "
                f"{self.value_texts[0]} to {self.value_texts[-1]}, "
                f"default {self.value_texts[self.default_index]})")

    # The default frame as a plain image too: frontends pick the HTML, and tools that only
    # read images from a notebook (the slide decks) still find the figure.
    def _repr_png_(self) -> bytes | None:
        return self.frames[self.default_index] if self.fmt == "png" else None

    def _repr_svg_(self) -> str | None:
        return self.frames[self.default_index].decode() if self.fmt == "svg" else None

    def _frame_html(self, index: int, frame: bytes) -> str:
        uri = f"data:{FORMATS[self.fmt]};base64,{base64.b64encode(frame).decode('ascii')}"
        size = _png_size(frame) if self.fmt == "png" else None
        dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
        alt = f"{self.alt} ({self.value_texts[index]})" if self.alt else self.value_texts[index]
        hidden = "" if index == self.default_index else " hidden"
        return (
            f'<img data-sds-frame data-sds-index="{index}" '
            f'data-sds-value="{html.escape(self._raw(index))}" '
            f'data-sds-text="{html.escape(self.value_texts[index])}"{hidden}{dims} '
            f'style="max-width: 100%; height: auto;" alt="{html.escape(alt)}" src="{uri}">'
        )

    def _raw(self, index: int) -> str:
        value = self.values[index]
        return repr(float(value)) if isinstance(value, float | np.floating) else str(value)

    def _repr_html_(self) -> str:
        base = self.dom_id
        n = len(self.frames)
        current = self.value_texts[self.default_index]
        label = html.escape(self.label)
        frames = "\n".join(self._frame_html(i, f) for i, f in enumerate(self.frames))
        # The control starts hidden and disabled; static_slider.js enables it. Without the
        # script the note below the frame tells the reader what they are looking at.
        return (
            f'<div class="sds-slider" id="{base}" data-sds-slider '
            f'data-sds-default="{self.default_index}">\n'
            # (the flex box sits inside: an inline display would override ``hidden``)
            f'<div class="sds-control" data-sds-control hidden>\n'
            f'<div style="display: flex; align-items: center; gap: 0.75em; margin: 0.5em 0;">\n'
            f'<label for="{base}-input" style="font-weight: bold;">{label}</label>\n'
            f'<input type="range" id="{base}-input" data-sds-input disabled min="0" '
            f'max="{n - 1}" step="1" value="{self.default_index}" '
            f'aria-valuetext="{html.escape(current)}" style="flex: 1; max-width: 24em;">\n'
            f'<span data-sds-current style="font-family: monospace;">'
            f'{html.escape(current)}</span>\n'
            f'</div>\n</div>\n'
            f'<div class="sds-frames">\n{frames}\n</div>\n'
            f'<p class="sds-note" data-sds-note style="font-size: 0.9em; font-style: italic;">'
            f'Showing {html.escape(current)}. In the book\'s HTML page a slider here steps '
            f'through {n} precomputed values of {label}, from '
            f'{html.escape(self.value_texts[0])} to {html.escape(self.value_texts[-1])}.</p>\n'
            f'</div>'
        )


def _check_values(values: Sequence) -> tuple:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(f"values must be a sequence of numbers, got {type(values).__name__}")
    values = tuple(values.tolist() if isinstance(values, np.ndarray) else values)
    if not values:
        raise ValueError("values must not be empty")
    if len(values) > MAX_FRAMES:
        raise ValueError(f"values has {len(values)} positions; at most {MAX_FRAMES}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"values must be real numbers, got {v!r}")
        if not np.isfinite(v):
            raise ValueError(f"values must be finite, got {v!r}")
    if len(set(values)) != len(values):
        raise ValueError("values must be distinct")
    return values


def _default_index(values: tuple, default: float | None) -> int:
    if default is None:
        return 0
    if isinstance(default, bool) or not isinstance(default, numbers.Real):
        raise TypeError(f"default must be a number, got {default!r}")
    close = np.flatnonzero(np.isclose(np.asarray(values, dtype=float), default,
                                      rtol=1e-9, atol=1e-12))
    if close.size == 0:
        raise ValueError(f"default {default!r} is not one of values")
    return int(close[0])


def precompute(
    plot: Callable[[Any], Any],
    values: Sequence[float],
    *,
    label: str,
    default: float | None = None,
    value_format: str = "{:g}",
    fmt: str = "png",
    alt: str = "",
) -> StaticSlider:
    """Draw ``plot(value)`` for each of ``values`` and return them as a :class:`StaticSlider`.

    ``plot`` takes one slider value and returns a matplotlib Figure (it is closed after
    rendering, so the notebook does not show it a second time). ``label`` names the slider
    ("θ"); ``default`` is the value shown first (one of ``values``; the first if None);
    ``value_format`` formats a value for the reader ("{:g}"); ``fmt`` is "png" or "svg";
    ``alt`` describes the figure for screen readers (the value is appended).
    """
    if not callable(plot):
        raise TypeError(f"plot must be callable, got {type(plot).__name__}")
    if not isinstance(label, str) or not label.strip():
        raise ValueError("label must be a non-empty string")
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {sorted(FORMATS)}, got {fmt!r}")
    if not isinstance(alt, str):
        raise TypeError(f"alt must be a string, got {type(alt).__name__}")
    values = _check_values(values)
    index = _default_index(values, default)
    try:
        texts = tuple(f"{label} = {value_format.format(v)}" for v in values)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"value_format {value_format!r} cannot format {values[0]!r}: {err}"
        ) from err

    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    frames = []
    for value in values:
        fig = plot(value)
        if not isinstance(fig, Figure):
            raise TypeError(f"plot must return a matplotlib Figure, got {type(fig).__name__}")
        try:
            frames.append(render_figure(fig, fmt))
        finally:
            plt.close(fig)
    slider = StaticSlider(label, values, texts, tuple(frames), index, fmt, alt)
    size = len(slider._repr_html_().encode())
    if size > MAX_HTML_BYTES:
        raise ValueError(f"values: {len(values)} frames make {size:,} bytes of HTML, over "
                         f"{MAX_HTML_BYTES:,}; use fewer positions or a smaller figure")
    return slider
