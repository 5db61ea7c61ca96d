"""specdec_lite.bench.roofline: the roofline arithmetic against hand counts, and the
measurement's shapes, saved form and validation on tiny layers (the skinny kernel's
products are tested in test_skinny.py). Timings themselves are not tested: they describe
a machine."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from support import ROOT, imports_module  # noqa: E402

from specdec_lite.bench import roofline  # noqa: E402
from specdec_lite.models import kernels, skinny  # noqa: E402
from specdec_lite.plots.roofline import plot_rows_cost  # noqa: E402

# ---------------------------------------------------------------- the model


def test_flops_and_bytes_count_every_weight_once():
    # 3 rows through a [4, 5] matrix: 60 multiply-adds; 20 weights, 12 inputs, 15 outputs
    assert roofline.layer_flops(3, 4, 5) == 120
    assert roofline.layer_bytes(3, 4, 5) == 4 * (20 + 12 + 15)
    assert roofline.layer_bytes(3, 4, 5, itemsize=2) == 2 * 47
    assert roofline.arithmetic_intensity(3, 4, 5) == pytest.approx(120 / 188)


def test_intensity_of_a_large_matrix_is_about_half_a_flop_per_byte_per_row():
    for n in (1, 2, 8):
        assert roofline.arithmetic_intensity(n, 8192, 8192) == pytest.approx(n / 2, rel=0.01)
    intensities = [roofline.arithmetic_intensity(n, 64, 64) for n in range(1, 9)]
    assert np.all(np.diff(intensities) > 0)


def test_the_ridge_is_where_both_bounds_meet():
    bandwidth, peak = 20e9, 100e9
    ridge = roofline.ridge_rows(bandwidth, peak)
    assert ridge == pytest.approx(10.0)
    d = 100_000  # large enough that the rows' own bytes do not count
    memory = roofline.layer_bytes(10, d, d) / bandwidth
    arithmetic = roofline.layer_flops(10, d, d) / peak
    assert arithmetic == pytest.approx(memory, rel=1e-3)


def test_roofline_ratio_is_flat_then_grows_like_n():
    d, one_row = 4096, 1e-3
    bandwidth = roofline.layer_bytes(1, d, d) / one_row
    peak = 2 * bandwidth  # ridge at 4 rows
    ns = list(range(1, 17))
    ratio = roofline.roofline_ratio(ns, d, d, one_row, peak)
    assert ratio.shape == (16,) and ratio[0] == pytest.approx(1.0)
    assert np.all(ratio[:3] < 1.01)  # memory-bound: a few more rows are almost free
    assert ratio[15] == pytest.approx(16 / 4, rel=0.01)  # compute-bound: r(n) = n / ridge
    assert np.all(np.diff(ratio) >= 0)


@pytest.mark.parametrize("call, match", [
    (lambda: roofline.layer_flops(0, 4, 4), "n must be >= 1"),
    (lambda: roofline.layer_bytes(1, 4, 4, itemsize=0), "itemsize"),
    (lambda: roofline.ridge_rows(0.0, 1e9), "bandwidth"),
    (lambda: roofline.ridge_rows(1e9, -1.0), "peak_flops"),
    (lambda: roofline.roofline_ratio([2, 3], 4, 4, 1e-3, 1e9), "ns must start at 1"),
    (lambda: roofline.roofline_ratio([1, 2], 4, 4, 0.0, 1e9), "seconds_one_row"),
])
def test_model_rejects_bad_values_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_model_rejects_wrong_types():
    with pytest.raises(TypeError, match="d_in"):
        roofline.layer_flops(1, 4.0, 4)
    with pytest.raises(TypeError, match="ns"):
        roofline.roofline_ratio([1, 2.5], 4, 4, 1e-3, 1e9)


def test_importing_roofline_does_not_import_numba():
    assert not imports_module("import specdec_lite.bench.roofline", "numba")


# ---------------------------------------------------------------- measuring


@pytest.mark.parametrize("kernel", roofline.KERNELS)
def test_measure_rows_cost_shapes(kernel):
    cost = roofline.measure_rows_cost(8, 16, ns=[1, 2, 5], kernel=kernel, repeats=3,
                                      min_seconds=1e-5, name="tiny")
    assert (cost.name, cost.d_in, cost.d_out, cost.kernel) == ("tiny", 8, 16, kernel)
    assert cost.backend == ("numpy" if kernel == "numpy" else skinny.kernel_backend())
    np.testing.assert_array_equal(cost.ns, [1, 2, 5])
    assert cost.seconds.shape == (3, 3) and np.all(cost.seconds > 0)
    assert cost.median.shape == (3,) and cost.ci.shape == (3, 2)
    assert np.all(cost.ci[:, 0] <= cost.median) and np.all(cost.median <= cost.ci[:, 1])
    assert cost.ratio[0] == 1.0 and np.all(cost.ratio_ci[0] == 1.0)
    assert np.all(cost.ratio_ci[:, 0] <= cost.ratio) and np.all(cost.ratio <= cost.ratio_ci[:, 1])
    assert cost.megabytes == pytest.approx(4 * 8 * 16 / 1e6)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"kernel": "blas"}, ValueError, "kernel must be one of"),
    ({"ns": [2, 4]}, ValueError, "ns must start at 1"),
    ({"ns": [1, 1, 2]}, ValueError, "distinct"),
    ({"ns": []}, ValueError, "ns must start at 1"),
    ({"repeats": 1}, ValueError, "repeats must be >= 2"),
    ({"seed": -1}, ValueError, "seed"),
    ({"min_seconds": 0.0}, ValueError, "min_seconds"),
    ({"d_in": 0}, ValueError, "d_in"),
    ({"d_out": 2.0}, TypeError, "d_out"),
])
def test_measure_rows_cost_rejects_bad_arguments(kwargs, error, match):
    args = {"d_in": 4, "d_out": 4} | kwargs
    with pytest.raises(error, match=match):
        roofline.measure_rows_cost(**args)


def test_peak_flops_and_the_table():
    peak = roofline.measure_peak_flops(size=32, repeats=2)
    assert peak > 0
    costs = [roofline.measure_rows_cost(8, 16, ns=[1, 2], kernel=k, repeats=2,
                                        min_seconds=1e-5, name="tiny") for k in roofline.KERNELS]
    lines = roofline.format_rows_cost(costs, peak).splitlines()
    assert len(lines) == 2 + 3  # header, rule, two kernels, the roofline
    assert lines[0].split()[-1] == "r(2)"
    assert [line.split()[2] for line in lines[2:4]] == ["numpy", "skinny"]
    assert lines[4].split()[0] == "roofline" and len(lines[4].split()) == 2
    with pytest.raises(ValueError, match="costs"):
        roofline.format_rows_cost([], peak)
    with pytest.raises(ValueError, match="size"):
        roofline.measure_peak_flops(size=0)


def test_layers_for_this_platform():
    assert roofline.default_layers() == (roofline.BROWSER_LAYERS if roofline.IN_BROWSER
                                         else roofline.LAYERS)
    assert all(d_in * d_out < 2e8 / 4 for _, d_in, d_out in roofline.BROWSER_LAYERS)


def test_plot_rows_cost_draws_one_panel_per_layer():
    costs = [roofline.measure_rows_cost(d, 8, ns=[1, 2, 3], kernel=k, repeats=2,
                                        min_seconds=1e-5, name=f"layer {d}")
             for d in (4, 8) for k in roofline.KERNELS]
    fig = plot_rows_cost(costs, peak_flops=1e9, machine="a test machine")
    try:
        assert len(fig.axes) == 2
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert "roofline (computed)" in labels and "r(n) = n" in labels
        assert any(label.startswith("skinny") for label in labels)
        assert "a test machine" in fig._suptitle.get_text()
    finally:
        plt.close(fig)


def test_machine_line_names_the_cpu_and_the_blas_kernel():
    line, short = roofline.machine_line(), roofline.machine_line(short=True)
    if roofline.IN_BROWSER:
        assert "browser" in line
        return
    assert "kernel" in line and "numpy" in line and "cores" in line
    assert short.endswith(f"BLAS kernel {kernels.blas_kernel()}")


def test_a_coarse_clock_never_times_a_call_as_zero(monkeypatch) -> None:
    """A browser rounds the clock to about a millisecond: a call shorter than that must
    still get a finite, positive time (the live chapter 6 divided by zero here)."""
    import time as real_time

    from specdec_lite.bench import roofline

    class CoarseClock:
        @staticmethod
        def perf_counter() -> float:
            return round(real_time.perf_counter(), 3)  # 1 ms ticks

    monkeypatch.setattr(roofline, "time", CoarseClock)
    cost = roofline.measure_rows_cost(8, 8, ns=(1, 2), repeats=2, min_seconds=3e-3)
    assert np.all(np.isfinite(cost.seconds)) and np.all(cost.seconds > 0)
    assert 0 < roofline.measure_peak_flops(size=8, repeats=1) < np.inf


def test_measure_sizes_saves_what_costs_of_reads_back(tmp_path, monkeypatch):
    monkeypatch.setattr(roofline, "measure_peak_flops", lambda: 1e9)  # a big product: slow
    data = roofline.measure_sizes(sizes=[(8, 16), (16, 8)], ns=[1, 2, 3], repeats=2)
    assert data["settings"] == {"ns": [1, 2, 3], "repeats": 2, "seed": 0}
    assert data["peak_flops"] == 1e9 and data["machine"]["blas"]["kernel"] == kernels.blas_kernel()
    assert data["skinny_tile"] == list(skinny.tile_shape())
    assert [(c["d_in"], c["kernel"]) for c in data["costs"]] == [
        (8, "numpy"), (8, "skinny"), (16, "numpy"), (16, "skinny")]
    path = tmp_path / "sizes.json"
    path.write_text(json.dumps(data))
    costs = roofline.costs_of(json.loads(path.read_text()))
    assert len(costs) == 4 and costs[1].kernel == "skinny" and costs[2].d_in == 16
    np.testing.assert_array_equal(costs[0].seconds, data["costs"][0]["seconds"])
    assert costs[0].ratio[0] == 1.0 and costs[0].ratio.shape == (3,)
    with pytest.raises(ValueError, match="lacks 'costs'"):
        roofline.costs_of({"settings": data["settings"]})
    broken = dict(data, costs=[dict(data["costs"][0], seconds=[[1.0, 2.0]])])
    with pytest.raises(ValueError, match="seconds"):
        roofline.costs_of(broken)
    with pytest.raises(TypeError, match="d_in"):
        roofline.measure_sizes(sizes=[(8.0, 16)])


def test_main_checks_its_output_folder_before_measuring(tmp_path, capsys):
    with pytest.raises(SystemExit):
        roofline.main(["--json", str(tmp_path / "missing" / "x.json")])
    assert "no folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        roofline.main(["--repeats", "1"])
    assert "--repeats must be >= 2" in capsys.readouterr().err


def test_machine_line_describes_a_saved_machine():
    saved = {"cpu_model": "Some CPU", "cpu_count": 4, "numpy": "9.9",
             "blas": {"library": "openblas", "version": "1", "kernel": "Zen"},
             "blas_threads": {"OPENBLAS_NUM_THREADS": "1"}}
    assert roofline.machine_line(short=True, machine=saved) == "Some CPU, BLAS kernel Zen"
    line = roofline.machine_line(machine=saved)
    assert line.startswith("Some CPU (4 cores), numpy 9.9") and "OPENBLAS_NUM_THREADS=1" in line


def test_read_sizes_names_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(ValueError, match="bad.json"):
        roofline.read_sizes(path)
    for name in ("roofline_sizes.json", "roofline_sizes_amd.json"):  # committed: Xeon, AMD
        data, costs = roofline.read_sizes(ROOT / "results" / name)
        assert [(c.d_in, c.d_out) for c in costs[::2]] == list(roofline.SIZES)
        assert [c.kernel for c in costs] == list(roofline.KERNELS) * len(roofline.SIZES)
        assert all(c.seconds.shape == (data["settings"]["repeats"], 8) for c in costs)


def test_cache_sizes_read_linux_s_description(tmp_path):
    from specdec_lite.bench import timing

    for name, (kind, level, size) in {"index0": ("Data", "1", "48K"),
                                      "index1": ("Instruction", "1", "32K"),
                                      "index2": ("Unified", "2", "2048K"),
                                      "index3": ("Unified", "3", "260M")}.items():
        folder = tmp_path / "cache" / name
        folder.mkdir(parents=True)
        for field, value in (("type", kind), ("level", level), ("size", size)):
            (folder / field).write_text(value + "\n")
    assert timing.cache_sizes(str(tmp_path)) == {"L1": 48 << 10, "L2": 2 << 20, "L3": 260 << 20}
    assert timing.cache_sizes(str(tmp_path / "none")) == {}
    assert set(timing.machine_info()["caches"]) <= {"L1", "L2", "L3", "L4"}
