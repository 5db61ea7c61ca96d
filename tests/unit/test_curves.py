"""bench.curves (cost curves per BLAS kernel and backend), the README's kernel table and
the side-by-side figure, on the committed results and on one real child process."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import pytest
from support import CONFIG, RESULTS, random_params

matplotlib.use("Agg")

from specdec_lite.bench import curves, kernels_summary, read_json  # noqa: E402
from specdec_lite.models import fast  # noqa: E402
from specdec_lite.models.kernels import LN_EPS, causal_bias  # noqa: E402
from specdec_lite.models.transformer import TransformerModel  # noqa: E402
from specdec_lite.plots import plot_curves_by_cpu, plot_kernel_curves  # noqa: E402

COMMITTED = RESULTS / "kernel_curves.json"


@pytest.mark.parametrize("name", ["kernel_curves.json", "kernel_curves_amd.json"])
def test_the_committed_curves_read_and_format(name) -> None:
    data = curves.read_curves(RESULTS / name)
    kernels = {c["kernel"] for c in data["curves"]}
    assert {"Haswell"} < kernels  # the default kernel and the forced one
    assert {c["coretype_env"] for c in data["curves"]} == {None, "Haswell"}
    for c in data["curves"]:
        assert c["ratio"][0] == pytest.approx(1.0) and c["c"] > 0
    table = curves.format_curves(data).splitlines()
    assert len(table) == 1 + len(data["curves"]) and "r(9)" in table[0]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("curves"), "no 'curves' list"),
    (lambda d: d["curves"][1].pop("ratio"), r"curves\[1\] lacks \['ratio'\]"),
    (lambda d: d["curves"][0]["n"].pop(), "different lengths"),
    (lambda d: d.pop("machine"), "lacks 'machine'"),
])
def test_a_broken_curves_file_is_named(tmp_path, change, message) -> None:
    data = json.loads(COMMITTED.read_text())
    change(data)
    path = tmp_path / "curves.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        curves.read_curves(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable JSON"):
        curves.read_curves(path)


def test_kernels_summary_compares_the_two_full_runs() -> None:
    default, haswell = read_json(RESULTS / "bench.json"), read_json(RESULTS / "bench_haswell.json")
    text = kernels_summary(default, haswell, curves.read_curves(COMMITTED))
    assert "| Haswell | numpy |" in text and "Haswell kernel |" in text
    best = max(r["speedup"] for r in haswell["rows"] if r["method"] == "speculative"
               and r["temperature"] == 0.0 and not r["simulated"])
    assert f"{best:.2f}x" in text  # the Haswell run's best greedy row, not the default's
    assert "Best measured speedup" in kernels_summary(default, None, None)


def test_plot_kernel_curves_draws_one_panel_per_kernel() -> None:
    data = curves.read_curves(COMMITTED)
    fig = plot_kernel_curves(data)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == len({c["kernel"] for c in data["curves"]})
    assert all(len(ax.get_lines()) >= 2 for ax in panels)  # both backends, or one + the 1 line


def test_plot_curves_by_cpu_draws_one_panel_per_machine_with_every_curve() -> None:
    files = [curves.read_curves(RESULTS / name)
             for name in ("kernel_curves.json", "kernel_curves_amd.json")]
    fig = plot_curves_by_cpu(files)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(" (")[0] for ax in panels] == [
        data["machine"]["cpu_model"] for data in files]
    for ax, data in zip(panels, files, strict=True):
        drawn = [line for line in ax.get_lines() if line.get_label()[0] != "_"]
        assert len(drawn) == len(data["curves"])  # each (backend, kernel), and the 1 line
        for line, curve in zip(drawn, data["curves"], strict=True):
            assert list(line.get_ydata()) == curve["ratio"]


def test_a_child_process_loads_the_kernel_it_is_told() -> None:
    """What make kernel-curves relies on: OPENBLAS_CORETYPE in the child's environment
    decides the kernel, and the child reports the one OpenBLAS loaded."""
    curve = curves.measure_in_process("Haswell", "numpy", repeats=2, seed=0)
    assert curve["kernel"] == "Haswell" and curve["coretype_env"] == "Haswell"
    assert curve["backend"] == "numpy" and curve["rowwise_max"] == 3
    assert len(curve["target_s"]) == curves.N_MAX and min(curve["target_s"]) > 0


def test_the_command_line_checks_its_arguments(capsys) -> None:
    with pytest.raises(SystemExit):
        curves.main(["--repeats", "0"])
    with pytest.raises(SystemExit):
        curves.main(["--json", "/no/such/folder/curves.json"])
    assert "no folder" in capsys.readouterr().err


@pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")
def test_forward_parts_splits_a_compiled_forward() -> None:
    model = TransformerModel(CONFIG, random_params(CONFIG))
    prefix = np.arange(12) % CONFIG.vocab_size  # [12]
    parts = curves.forward_parts(model, prefix, ns=(1, 3), repeats=5)
    assert parts["n"] == [1, 3] and list(parts["parts_s"]) == list(fast.PARTS)
    assert all(w > 0 for w in parts["whole_s"])
    for i, whole in enumerate(parts["whole_s"]):  # the parts and the rest add up to it
        total = sum(seconds[i] for seconds in parts["parts_s"].values()) + parts["rest_s"][i]
        assert total == pytest.approx(whole)
    table = curves.format_parts(parts).splitlines()
    assert len(table) == 1 + len(fast.PARTS) + 2 and table[-1].startswith("whole forward")


@pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")
def test_leaving_parts_out_is_for_profiles_only() -> None:
    """leave_out=0 is the forward itself; any other mask changes the output (which is why
    only the profile passes one)."""
    model = TransformerModel(CONFIG, random_params(CONFIG))
    compiled = fast.compile_forward(model.layers, model.ln_f, model.unembed, CONFIG.n_head,
                                    LN_EPS)
    x = model.wte[[1, 2, 3]] + model.wpe[:3]  # [3, d]
    kv = model.new_state().kv
    want = model.forward([1, 2, 3], cache=model.new_state()).logits
    got, _ = compiled(x.copy(), kv, 0, causal_bias(3))
    np.testing.assert_allclose(got, want, atol=1e-4)
    for i in range(len(fast.PARTS)):
        other, _ = compiled(x.copy(), kv.copy(), 0, causal_bias(3), leave_out=1 << i)
        assert np.abs(other - want).max() > 1e-3, fast.PARTS[i]
