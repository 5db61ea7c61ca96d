"""The service chapter's figures (specdec_lite.plots.service): the bucket arithmetic
exactly, the figures on small hand-made inputs and on the committed result files."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from support import RESULTS

from specdec_lite.plots.service import (
    batch_rows,
    bucket_counts,
    format_service_load,
    plot_accepted_histogram,
    plot_batch_throughput,
    plot_service_load,
)


def _section():
    rows = []
    for t in (0.0, 1.0):
        for method in ("plain", "speculative"):
            for b in (4, 1, 2):  # out of order on purpose
                rate = 100.0 * b * (1.2 if method == "speculative" else 1.0)
                rows.append({"method": method, "temperature": t, "batch": b,
                             "tokens_per_s": rate, "tokens_per_s_ci": [rate - 5, rate + 5],
                             "speedup": 1.2 if method == "speculative" else None,
                             "speedup_ci": [1.1, 1.3] if method == "speculative" else None})
    return {"settings": {"sizes": [1, 2, 4], "k": 3, "temperatures": [0.0, 1.0]}, "rows": rows}


def _load():
    run = {"label": "batched, speculative", "method": "draft", "tokens_per_s": 10.0,
           "p50_s": 0.2, "p99_s": 0.5, "n_complete": 20, "n_lost": 0}
    return {"settings": {"requests": 20, "concurrency": 4, "max_tokens": 8, "temperature": 0.0,
                         "k": 4},
            "machine": {"cpu_model": "Test CPU", "cpu_count": 2},
            "runs": [run, dict(run, label="batched, plain", method="plain", p99_s=0.4,
                               n_complete=19, n_lost=1)]}


def test_bucket_counts_undo_the_cumulative_sums():
    counts = bucket_counts([0.0, 1.0, 2.0, float("inf")], [3, 5, 9, 9])
    np.testing.assert_array_equal(counts, [3, 2, 4, 0])


@pytest.mark.parametrize(("bounds", "cumulative", "match"), [
    ([0.0, 1.0], [1.0], "equally long"),
    ([1.0, 0.0], [1.0, 2.0], "increase"),
    ([0.0, 1.0], [3.0, 2.0], "decrease"),
])
def test_bucket_counts_refuse_bad_histograms(bounds, cumulative, match):
    with pytest.raises(ValueError, match=match):
        bucket_counts(bounds, cumulative)


def test_batch_rows_sorted_and_checked():
    assert [r["batch"] for r in batch_rows(_section(), "plain", 0.0)] == [1, 2, 4]
    with pytest.raises(ValueError, match="method"):
        batch_rows(_section(), "medusa", 0.0)
    with pytest.raises(ValueError, match="temperature"):
        batch_rows(_section(), "plain", 0.5)


def test_batch_throughput_draws_every_line():
    fig = plot_batch_throughput(_section())
    left, right = fig.axes
    lines = [c.lines[0] for c in left.containers]  # the data line of each errorbar
    assert len(lines) == 4  # plain and speculative at two temperatures
    np.testing.assert_allclose(lines[0].get_xdata(), [1, 2, 4])  # sorted by batch size
    np.testing.assert_allclose(lines[0].get_ydata(), [100.0, 200.0, 400.0])  # plain, T = 0
    assert any(np.allclose(line.get_ydata(), 1.0) for line in right.get_lines())  # the line 1
    plt.close(fig)


def test_accepted_histogram_shares():
    fig = plot_accepted_histogram([0.0, 1.0, 2.0, 3.0, float("inf")], [1, 1, 3, 4, 4], k=3)
    heights = [p.get_height() for p in fig.axes[0].patches]
    np.testing.assert_allclose(heights, [0.25, 0.0, 0.5, 0.25])
    plt.close(fig)
    with pytest.raises(ValueError, match="more than k=1"):
        plot_accepted_histogram([0.0, 1.0, 2.0, float("inf")], [1, 1, 3, 3], k=1)


def test_service_load_bars():
    fig = plot_service_load(_load())
    left, right = fig.axes
    assert [p.get_width() for p in left.patches] == [10.0, 10.0]
    assert [p.get_width() for p in right.patches] == [0.2, 0.2, 0.5, 0.4]  # p50s, then p99s
    plt.close(fig)
    with pytest.raises(ValueError, match="no runs"):
        plot_service_load({"runs": []})


def test_service_load_table():
    lines = format_service_load(_load()).splitlines()
    assert lines[0] == "20 requests, 4 concurrent, 8 tokens, T = 0, k = 4; Test CPU, 2 cores"
    assert lines[2].split() == ["configuration", "tokens/s", "p50", "s", "p99", "s",
                                "complete", "lost"]
    assert lines[3].split()[-5:] == ["10", "0.200", "0.500", "20", "0"]
    assert lines[4].split()[-5:] == ["10", "0.200", "0.400", "19", "1"]
    with pytest.raises(ValueError, match="no runs"):
        format_service_load(dict(_load(), runs=[]))


@pytest.mark.parametrize(("name", "plot"), [("batch_throughput.json", plot_batch_throughput),
                                            ("service_load.json", plot_service_load),
                                            ("service_load.json", format_service_load)])
def test_committed_results_plot(name, plot):
    path = RESULTS / name
    if not path.exists():
        pytest.skip(f"{name} not measured yet")
    shown = plot(json.loads(path.read_text()))
    if isinstance(shown, str):  # the load table: a settings line, a blank, a header, the runs
        assert len(shown.splitlines()) == 3 + len(json.loads(path.read_text())["runs"])
        return
    assert len(shown.axes) == 2
    plt.close(shown)
