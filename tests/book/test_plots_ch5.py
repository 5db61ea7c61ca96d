"""The benchmark and speedup figures of specdec_lite.plots: smoke tests of every figure on a
small hand-made benchmark result and on the committed results/bench.json, and the files
``plots.bench.write_figures`` writes. The theory they draw is tested in test_theory.py."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from support import RESULTS

from specdec_lite import expected_speedup, plots

COMMITTED = RESULTS / "bench.json"

RATIO = np.array([1.0, 1.5, 1.8, 2.0, 2.1])  # [5]: T(n)/T(1) for n = 1..5


def _row(method, k=None, tree=None, t=0.0, simulated=False, speedup=1.2, tau=2.0):
    label = {"autoregressive": "autoregressive", "speculative": f"speculative k={k}",
             "medusa": f"medusa tree {tree}" if tree else f"medusa chain {k}"}[method]
    return {"method": method, "label": ("SIMULATED " if simulated else "") + f"{label} T={t:g}",
            "k": k, "tree_nodes": tree, "rule": "greedy" if t == 0 else "exact",
            "temperature": t, "simulated": simulated, "speedup": speedup,
            "speedup_ci": [speedup - 0.1, speedup + 0.1], "predicted_speedup_tau": speedup,
            "tau": tau}


BENCH = {
    "settings": {"simulate_width": 4},
    "c": 0.1,
    "c_ngram": 0.03,
    "cost_curve": {"ratio": RATIO.tolist()},
    "in_run_costs": {"n": [1, 2, 4], "ratio": [1.0, 1.6, 2.2], "c": 0.12, "c_ngram": None,
                     "c_heads": None},
    "rows": [_row("speculative", k=k, t=t, simulated=s) for k in (3, 1, 2)
             for t in (0.0, 1.0) for s in (False, True)]
            + [_row("medusa", tree=4), _row("medusa", tree=2), _row("medusa", k=3, t=1.0),
               _row("medusa", tree=4, simulated=True)],
}


def test_bench_rows_selects_and_sorts():
    rows = plots.bench_rows(BENCH, "speculative", 1.0)
    assert [r["k"] for r in rows] == [1, 2, 3]
    assert not any(r["simulated"] for r in rows)
    assert [r["tree_nodes"] for r in plots.bench_rows(BENCH, "medusa", 0.0)] == [2, 4]
    assert len(plots.bench_rows(BENCH, "medusa", 0.0, simulated=True)) == 1


def test_speedup_vs_k_draws_theory_at_the_costs_the_runs_paid():
    fig = plots.plot_speedup_vs_k(BENCH, 0.0, 0.6)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    paid = lines["S(k), in-run costs, α = 0.60"]
    np.testing.assert_array_equal(paid.get_xdata(), [1, 3])  # k + 1 in the runs' sizes
    np.testing.assert_allclose(paid.get_ydata(), expected_speedup(
        0.6, np.array([1, 3]), 0.12, verify_cost=np.array([1.6, 2.2])))
    assert len(lines["S(k), isolated r(n), α = 0.60"].get_xdata()) == 3
    simulated = bool(plots.bench_rows(BENCH, "speculative", 0.0, simulated=True))
    assert any(label.startswith("S(k), SIMULATED") for label in lines) == simulated
    plt.close(fig)


def test_figures_draw():
    figures = [
        plots.plot_speedup_vs_k(BENCH, 0.0, 0.6),
        plots.plot_medusa_speedups(BENCH),
        plots.plot_theory_multiples([0.5, 0.9], [0.1, 0.3], k_max=6, verify=RATIO),
        plots.plot_optimal_k_heatmap(np.linspace(0, 0.95, 5), np.linspace(0, 0.5, 4), 6,
                                     points={"here": (0.6, 0.1)}),
        plots.plot_speedup_explorer(3, 0.7, 0.1, verify=RATIO, k_max=6),
        plots.plot_cost_per_token({"plain": (0.0, 1.0, 1.0), "k=3": (0.3, 2.0, 2.5)}),
    ]
    for fig in figures:
        assert isinstance(fig, plt.Figure)
        plt.close(fig)


def test_plot_reproduction_marks_rows_outside_the_reference_ci():
    comparison = {"reference": "2026-11-30T12:00:00+00:00", "new": "2026-11-30T13:00:00+00:00",
                  "rows": [{"label": "a", "reference": [1.2, 1.1, 1.3], "new": [1.25, 1.1, 1.4],
                            "in_reference_ci": True, "overlap": True},
                           {"label": "b", "reference": [1.0, 0.9, 1.1], "new": [1.3, 1.2, 1.4],
                            "in_reference_ci": False, "overlap": False}]}
    fig = plots.plot_reproduction(comparison)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["new median inside the first CI (1)", "outside it (1)"]
    assert ax.get_xlim() == pytest.approx((0.85, 1.45))
    plt.close(fig)


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed benchmark result")
def test_figures_draw_the_committed_result(tmp_path):
    data = json.loads(COMMITTED.read_text())
    paths = plots.write_figures(data, tmp_path)
    names = ["bench_speedup.png", "bench_cost_curve.png", "bench_overhead.png"]
    if data["settings"]["simulate_width"]:
        names.append("bench_speedup_simulated.png")
    assert [p.name for p in paths] == names
    assert all(p.stat().st_size > 1000 for p in paths)
    ratio = data["cost_curve"]["ratio"]
    temps = sorted({r["temperature"] for r in data["rows"] if r["method"] == "speculative"})
    figures = [plots.plot_speedup_vs_k(data, t, 0.6, method=m)
               for t in temps for m in ("speculative", "ngram")
               if plots.bench_rows(data, m, t)]
    figures += [plots.plot_medusa_speedups(data), plots.plot_cost_curve(data),
                plots.plot_engine_split(data), plots.plot_bench_speedup(data),
                plots.plot_theory_multiples([0.5, 0.9], [data["c"]], k_max=8, verify=ratio),
                plots.plot_optimal_k_heatmap(np.linspace(0, 0.95, 6), np.linspace(0, 0.5, 5),
                                             8, verify=ratio),
                plots.plot_speedup_explorer(3, 0.7, data["c"], verify=ratio)]
    assert figures and all(isinstance(fig, plt.Figure) for fig in figures)
    plt.close("all")
