"""The benchmark harness: its pure helpers, and a tiny end-to-end run on random models.

No timing is asserted: only structure, bookkeeping and the formulas.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from support import RESULTS, random_params

from specdec_lite import bench
from specdec_lite.bench import Method, Settings
from specdec_lite.drafting.medusa import MedusaHeads
from specdec_lite.models.corpus import load_text
from specdec_lite.models.ngram import NGramModel
from specdec_lite.models.tokenizer import CharTokenizer
from specdec_lite.models.transformer import TransformerConfig, TransformerModel
from specdec_lite.pretrained import Pretrained
from specdec_lite.rules.theory import expected_speedup

# ---------------------------------------------------------------- pure helpers


def test_bootstrap_ci_brackets_the_median_and_is_deterministic() -> None:
    x = np.random.default_rng(0).normal(1.5, 0.2, 40)
    lo, hi = bench.bootstrap_ci(x, seed=3)
    assert lo <= np.median(x) <= hi
    assert (lo, hi) == bench.bootstrap_ci(x, seed=3)
    assert bench.bootstrap_ci([2.0] * 5) == (2.0, 2.0)
    wide = np.subtract(*bench.bootstrap_ci(x[:8], seed=3)[::-1])
    assert wide > hi - lo  # fewer cells, wider interval


def test_schedule_runs_every_method_once_per_cell_in_shuffled_order() -> None:
    order = bench.schedule(n_methods=5, n_prompts=3, repeats=2, seed=0)
    assert len(order) == 5 * 3 * 2
    cells = Counter((r, p) for r, p, _ in order)
    assert set(cells.values()) == {5}
    for r in range(2):
        for p in range(3):
            block = [m for rr, pp, m in order if (rr, pp) == (r, p)]
            assert sorted(block) == list(range(5))
    blocks = {tuple(m for rr, pp, m in order if (rr, pp) == cell) for cell in cells}
    assert len(blocks) > 1  # interleaved, not always the same order
    assert order == bench.schedule(5, 3, 2, seed=0)
    assert order != bench.schedule(5, 3, 2, seed=1)


def test_predictions_are_thm_3_8_with_a_measured_verify_cost() -> None:
    curve = {"n": [1, 2, 3, 4], "ratio": [1.0, 1.2, 1.6, 1.9]}
    costs = {"speculative": 0.1, "ngram": None, "medusa": 0.05}
    pred, by_tau = bench.predictions(Method("speculative", 0.0, k=3), 0.7, 2.5, curve, costs,
                                     None, None)
    e = (1 - 0.7**4) / 0.3  # E(alpha, k) tokens per step
    assert pred == pytest.approx(e / (3 * 0.1 + 1.9)) and by_tau == pytest.approx(2.5 / 2.2)
    assert pred == expected_speedup(0.7, 3, 0.1, verify_cost=1.9)
    chain = bench.predictions(Method("medusa", 1.0, k=2), 0.5, 1.5, curve, costs, (2, 3), None)
    assert chain == pytest.approx(((1 - 0.5**3) / 0.5 / 1.65, 1.5 / 1.65))  # c_heads per step
    tree = bench.predictions(Method("medusa", 0.0, tree_nodes=3), 0.5, 2.0, curve, costs,
                             (2, 4), None)
    assert tree == pytest.approx((2.0 / 1.95, 2.0 / 1.95))  # no closed form: tau
    assert bench.predictions(Method("ngram", 0.0, k=1), 0.5, 1.5, curve, costs, None,
                             None) == (None, None)  # no n-gram cost measured
    assert bench.predictions(Method("speculative", 0.0, k=8), 0.5, 1.5, curve, costs, None,
                             None) == (None, None)  # r(9) not measured
    simulated = bench.predictions(Method("speculative", 0.0, k=8), 0.5, 1.5, curve, costs,
                                  None, 16)
    assert simulated[1] == pytest.approx(1.5 / (8 * 0.1 + 1.0))  # r = ceil(9 / 16)


def test_simulated_cost_is_flat_up_to_the_width() -> None:
    flat = bench.simulated_units(Counter({1: 10, 5: 3, 16: 2}), 16, 0, 0.3)
    assert flat == 15  # every call costs one unit
    assert bench.simulated_units(Counter({17: 1, 33: 1}), 16, 0, 0.3) == 2 + 3
    assert bench.simulated_units(Counter({5: 4}), 8, 12, 0.25, 4, 0.1) == pytest.approx(
        4 + 12 * 0.25 + 4 * 0.1)


def test_in_run_ratios_divide_by_the_mean_one_token_forward() -> None:
    in_run = {"target": [[1, 2e-3, 100], [3, 3e-3, 40], [5, 4e-3, 10]],
              "draft": [[1, 3e-4, 300], [2, 5e-4, 20]], "ngram": [[1, 1e-4, 50]]}
    paid = bench.in_run_ratios(in_run)
    assert paid["n"] == [1, 3, 5]
    assert paid["ratio"] == pytest.approx([1.0, 1.5, 2.0])
    assert paid["c"] == pytest.approx(0.15) and paid["c_ngram"] == pytest.approx(0.05)
    assert paid["c_heads"] is None  # no heads calls were made
    assert bench.verify_ratio(paid, 3) == pytest.approx(1.5) and bench.verify_ratio(paid, 2) is None
    assert bench.in_run_ratios({"draft": [[1, 3e-4, 3]]}) == {
        "n": [], "ratio": [], "c": None, "c_ngram": None, "c_heads": None}


def test_verify_ratio_measured_or_simulated() -> None:
    curve = {"n": [1, 2, 3], "ratio": [1.0, 1.2, 1.5]}
    assert bench.verify_ratio(curve, 3) == 1.5
    assert bench.verify_ratio(curve, 4) is None
    assert bench.verify_ratio(curve, 3, width=2) == 2.0


def test_ends_in_loop() -> None:
    assert bench.ends_in_loop([1, 2, 3] * 20)
    assert not bench.ends_in_loop(list(range(60)))
    assert not bench.ends_in_loop([1, 1])  # too short to tell


def test_profile_split_attributes_shared_helpers_by_caller() -> None:
    fwd, loop, helper = ("m.py", 1, "forward"), ("d.py", 1, "loop"), ("n.py", 1, "helper")
    # helper: 2 s own time, called from forward (ct 3 s) and from the loop (ct 1 s)
    stats = {
        loop: (1, 1, 1.0, 10.0, {}),
        fwd: (5, 5, 4.0, 7.0, {loop: (5, 5, 4.0, 7.0)}),
        helper: (8, 8, 4.0, 4.0, {fwd: (6, 6, 3.0, 3.0), loop: (2, 2, 1.0, 1.0)}),
    }
    total, forward, engine = bench.profile_split(stats, lambda f: f[2] == "forward")
    assert total == 9.0 and forward == 7.0
    assert dict(engine) == pytest.approx({"d:loop": 1.0, "n:helper": 1.0})


def test_settings_check_names_the_bad_setting() -> None:
    for bad, word in ((dict(ks=(0,)), "k"), (dict(trees=(0,)), "tree"),
                      (dict(temperatures=(-1.0,)), "temperatures"),
                      (dict(prompts=0), "prompts"), (dict(simulate_width=0), "simulate_width")):
        with pytest.raises(ValueError, match=word):
            Settings(**bad).check()
    assert bench.QUICK.check().quick


def test_build_methods_labels_are_unique_and_rules_follow_temperature() -> None:
    methods = bench.build_methods(Settings(ks=(1, 3), trees=(4, 8)), n_heads=3)
    labels = [m.label for m in methods]
    assert len(set(labels)) == len(labels)
    assert {m.rule for m in methods if m.temperature == 0} == {"greedy"}
    assert {m.rule for m in methods if m.temperature == 1} == {"exact"}
    assert Method("medusa", 1.0, k=3) in methods  # the exact chain at T = 1
    assert not any(m.kind == "medusa" for m in bench.build_methods(Settings(), None))


def _row(**kw: object) -> dict:
    row = dict(method="speculative", temperature=0.0, simulated=False, speedup=1.0,
               measured_over_predicted=1.0, overhead=0.01)
    return row | kw


def test_bars_use_measured_rows_only() -> None:
    data = {"rows": [_row(method="autoregressive", measured_over_predicted=1.0),
                     _row(speedup=1.85, measured_over_predicted=0.9),
                     _row(speedup=1.2, measured_over_predicted=1.3, overhead=0.08),
                     _row(speedup=9.0, simulated=True, overhead=None),
                     _row(method="medusa", speedup=1.1)]}
    bars = {b["name"].split(",")[0]: b for b in bench.evaluate_bars(data)}
    assert bars["draft-model greedy speedup"]["value"] == 1.85
    assert bars["draft-model greedy speedup"]["status"] == "PASS"  # >= 1.8
    assert bars["draft-model exact T=1 speedup"]["status"] == "n/a"
    assert bars["Medusa greedy speedup"]["status"] == "MISS"
    assert bars["measured / predicted"]["value"] == 1.3
    assert bars["measured / predicted"]["status"] == "MISS"  # outside 0.9..1.1
    assert bars["engine overhead"]["value"] == 0.08
    assert "reproduction" not in bars  # only with a comparison
    data["rows"][1]["speedup"] = 1.75
    data["comparison"] = {"rows": [{}, {}], "reproduced": 1}
    bars = {b["name"].split(",")[0].split(":")[0]: b for b in bench.evaluate_bars(data)}
    assert bars["draft-model greedy speedup"]["status"] == "MISS"  # 1.75 < 1.8
    assert bars["reproduction"]["value"] == 0.5 and bars["reproduction"]["status"] == "MISS"


def _result(rows: list[dict], t1: float = 2e-3, **settings: object) -> dict:
    curve = {"n": [1, 2, 3], "target_s": [t1, 1.5 * t1, 2 * t1], "ratio": [1.0, 1.5, 2.0]}
    paid = {"n": [1, 2], "ratio": [1.0, 1.6], "c": 0.12, "c_ngram": None, "c_heads": None}
    return {"schema": bench.SCHEMA, "timestamp": "t", "settings": Settings(**settings).as_json(),
            "rows": rows, "cost_curve": curve, "in_run_costs": paid, "c": 0.1, "c_ngram": None,
            "c_heads": 0.05}


def test_compare_runs_checks_each_median_against_the_reference_ci() -> None:
    ref = _result([_row(method="autoregressive", label="ar", speedup_ci=[1.0, 1.0]),
                   _row(label="a", speedup=1.3, speedup_ci=[1.2, 1.4]),
                   _row(label="b", speedup=1.1, speedup_ci=[1.0, 1.2]),
                   _row(label="c", speedup=1.5, speedup_ci=[1.4, 1.6]),
                   _row(label="gone", speedup=1.0, speedup_ci=[0.9, 1.1]),
                   _row(label="SIMULATED a", simulated=True, speedup_ci=[2.0, 2.2])])
    new = _result([_row(label="a", speedup=1.35, speedup_ci=[1.3, 1.5]),  # inside
                   _row(label="b", speedup=1.25, speedup_ci=[1.15, 1.3]),  # outside, overlap
                   _row(label="c", speedup=1.2, speedup_ci=[1.1, 1.3])], t1=3e-3)  # disjoint
    out = bench.compare_runs(ref, new)
    assert [r["label"] for r in out["rows"]] == ["a", "b", "c"]
    assert [r["in_reference_ci"] for r in out["rows"]] == [True, False, False]
    assert [r["overlap"] for r in out["rows"]] == [True, True, False]
    assert (out["in_reference_ci"], out["overlap"]) == (1, 2)
    # reproduced: inside the CI, or within 0.05 of the reference median (b: 1.25 vs 1.1 is not)
    assert [r["reproduced"] for r in out["rows"]] == [True, False, False]
    assert out["costs"]["T(1) ms"] == pytest.approx([2.0, 3.0])
    assert out["costs"]["run r(2)"] == [1.6, 1.6] and out["costs"]["run c"] == [0.12, 0.12]
    assert "r(5)" not in out["costs"] and "c_ngram" not in out["costs"]  # not measured
    assert out["rows"][1]["new"] == [1.25, 1.15, 1.3]
    text = bench.format_comparison(out)
    assert "1 of 3 rows" in text and "2 of 3" in text and "T(1) ms 2.000 -> 3.000" in text
    tight = _result([_row(label="a", speedup=1.30, speedup_ci=[1.29, 1.31]),
                     _row(label="b", speedup=1.30, speedup_ci=[1.29, 1.31])])
    near = _result([_row(label="a", speedup=1.34, speedup_ci=[1.3, 1.4]),  # outside, 0.04 off
                    _row(label="b", speedup=1.36, speedup_ci=[1.3, 1.4])])  # outside, 0.06 off
    again = bench.compare_runs(tight, near)
    assert [r["in_reference_ci"] for r in again["rows"]] == [False, False]
    assert [r["reproduced"] for r in again["rows"]] == [True, False]


def test_compare_runs_refuses_different_settings_or_non_results() -> None:
    ref = _result([])
    with pytest.raises(ValueError, match=r"different settings: \['ks', 'repeats'\]"):
        bench.compare_runs(ref, _result([], ks=(2,), repeats=1))
    with pytest.raises(ValueError, match="not a specdec_lite.bench/1 result"):
        bench.compare_runs({"rows": []}, ref)
    with pytest.raises(ValueError, match="new is not"):
        bench.compare_runs(ref, [])
    bench.check_comparable(ref, Settings().as_json())  # the same settings pass


# ---------------------------------------------------------------- the JSON schema



@pytest.mark.parametrize("name", ["bench.json", "bench_check.json"])
def test_committed_results_read_through_the_schema(name: str) -> None:
    data = bench.read_json(RESULTS / name)
    assert data["schema"] == bench.SCHEMA == "specdec_lite.bench/1" and data["rows"]


def _broken(tmp_path: Path, change) -> Path:
    data = json.loads((RESULTS / "bench.json").read_text())
    change(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema="specdec_lite.bench/2"), "not a specdec_lite.bench/1 result"),
    (lambda d: d.pop("cost_curve"), "lacks the field 'cost_curve'"),
    (lambda d: d.update(rows={}), "rows must be list"),
    (lambda d: d.update(c_heads="cheap"), "c_heads must be float|null"),
    (lambda d: d["rows"].append(7), r"rows\[60\] must be an object"),
    (lambda d: d["rows"][2].pop("label"), r"rows\[2\] lacks the field 'label'"),
    (lambda d: d["rows"][5].update(speedup=None), r"rows\[5\]\.speedup must be float"),
    (lambda d: d["rows"][5].update(speedup=True), r"rows\[5\]\.speedup must be float"),
    (lambda d: d["rows"][1].update(speedup_ci=[1.0]), r"rows\[1\]\.speedup_ci must be pair"),
    (lambda d: d["rows"][1].update(n_runs=2.5), r"rows\[1\]\.n_runs must be int"),
    (lambda d: d.update(comparison=[]), "comparison must be object"),
])
def test_read_json_names_the_file_and_what_is_wrong(tmp_path, change, message) -> None:
    path = _broken(tmp_path, change)
    with pytest.raises(ValueError, match=message) as err:
        bench.read_json(path)
    assert str(path) in str(err.value)


def test_read_json_of_a_file_that_is_not_json(tmp_path) -> None:
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        bench.read_json(tmp_path / "x.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ValueError, match="expected a JSON object, got list"):
        bench.read_json(tmp_path / "list.json")


def test_write_json_refuses_a_broken_result(tmp_path) -> None:
    data = json.loads((RESULTS / "bench.json").read_text())
    del data["rows"][0]["alpha"]
    with pytest.raises(ValueError, match=r"rows\[0\] lacks the field 'alpha'"):
        bench.write_json(data, tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()


def test_describe_lists_every_field() -> None:
    text = bench.describe()
    for name, kind, _ in bench.FIELDS + bench.OPTIONAL_FIELDS + bench.ROW_FIELDS:
        assert any(line.split()[:2] == [name, kind] for line in text.splitlines()), name
    assert text.splitlines()[0].startswith(bench.SCHEMA)


def test_bench_does_not_import_plots_or_matplotlib() -> None:
    code = ("import sys, specdec_lite.bench; "
            "print(sorted(m for m in sys.modules if 'plots' in m or 'matplotlib' in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------- end to end on tiny models

SMALL = TransformerConfig(vocab_size=96, n_layer=2, n_head=2, d_model=32, max_len=96)
TINY = TransformerConfig(vocab_size=96, n_layer=1, n_head=2, d_model=16, max_len=96)


def tiny_models() -> tuple[Pretrained, NGramModel]:
    rng = np.random.default_rng(0)
    heads = MedusaHeads(0.1 * rng.standard_normal((2, 32, 32)), np.zeros((2, 32)),
                        0.5 * rng.standard_normal((2, 32, 96)))
    tok = CharTokenizer.ascii()
    ngram = NGramModel(3, tok.vocab_size).fit(tok.encode(load_text("heldout")[:20_000]))
    models = Pretrained(TransformerModel(SMALL, random_params(SMALL, seed=1)),
                        TransformerModel(TINY, random_params(TINY, seed=2)), heads, tok,
                        manifest={})
    return models, ngram


@pytest.fixture(scope="module")
def result() -> dict:
    settings = Settings(ks=(1, 3), trees=(3,), prompts=2, prompt_len=24, new_tokens=16,
                        repeats=2, cost_repeats=2, simulate_width=4)
    return bench.run(settings, *tiny_models(), progress=False).to_json()


@pytest.mark.slow
def test_json_schema(result: dict) -> None:
    assert result["schema"] == "specdec_lite.bench/1"
    for key in ("timestamp", "machine", "settings", "models", "cost_curve", "in_run_costs",
                "c", "c_heads",
                "c_ngram", "alpha_text", "head_accuracy", "rows", "profile", "greedy_loops", "bars",
                "notes", "runs"):
        assert key in result, key
    for row in result["rows"]:
        for key in ("speedup", "speedup_ci", "predicted_speedup", "predicted_speedup_tau",
                    "predicted_speedup_isolated", "alpha", "tau", "tokens_per_s",
                    "measured_over_predicted", "overhead", "simulated"):
            assert key in row, key
        assert row["speedup_ci"][0] <= row["speedup"] <= row["speedup_ci"][1]
    assert result["cost_curve"]["n"] == list(range(1, 5))  # k + 1 = 4 = tree of 3 + root
    # given numpy models, the result records numpy, whatever "auto" would pick here
    assert result["settings"]["backend"] == "numpy"
    assert result["models"]["backend"] == {"target": "numpy", "draft": "numpy"}
    assert result["cost_curve"]["ratio"][0] == 1.0
    paid = result["in_run_costs"]  # every verification size the runs made, and one token
    assert {1, 2, 4} <= set(paid["n"]) and paid["ratio"][0] == 1.0  # (3: short last steps)
    assert all(paid[name] > 0 for name in ("c", "c_ngram", "c_heads"))
    assert np.array(result["head_accuracy"]).shape == (2, 3)
    assert json.loads(json.dumps(result)) == result  # plain JSON types only


@pytest.mark.slow
def test_rows_cover_every_method_measured_and_simulated(result: dict) -> None:
    labels = [r["label"] for r in result["rows"]]
    expected = [m.label for m in bench.build_methods(Settings(ks=(1, 3), trees=(3,)), 2,
                                                     ngram=True)]
    assert labels == expected + [f"SIMULATED {label}" for label in expected]
    assert all(r["simulated"] == r["label"].startswith("SIMULATED") for r in result["rows"])
    assert all(r["overhead"] is None for r in result["rows"] if r["simulated"])
    assert len(result["runs"]) == len(expected) * 2 * 2


@pytest.mark.slow
def test_bookkeeping_is_consistent(result: dict) -> None:
    for r in result["rows"]:
        assert r["n_runs"] == 4
        if r["method"] == "autoregressive":
            assert r["speedup"] == 1.0 and r["tau"] == 1.0 and r["alpha"] is None
        else:
            assert 0.0 <= r["alpha"] <= 1.0
            assert r["tau"] >= 1.0
        if r["rule"] == "greedy":  # greedy speculative and Medusa are lossless
            assert r["matches_autoregressive"] == 1.0
    spec = next(r for r in result["rows"] if r["label"] == "speculative k=3 greedy T=0")
    assert spec["tau"] == pytest.approx(16 / spec["target_calls"])


@pytest.mark.slow
def test_reports_label_simulation(result: dict, tmp_path) -> None:
    table = bench.format_table(result)
    assert "SIMULATED accelerator" in table and "bars" in table
    summary = bench.markdown_summary(result)
    assert "| method |" in summary and result["machine"]["cpu_model"] in summary
    assert "SIMULATED" not in summary  # the headline table shows measured rows only
    again = bench.compare_runs(result, result)  # a run reproduces itself exactly
    n = len(again["rows"])
    assert n > 0 and again["in_reference_ci"] == again["overlap"] == n
    assert f"{n} of {n} second-run medians" in bench.markdown_summary(result, again)
    with pytest.raises(ValueError, match="reference"):
        bench.markdown_summary(result, again | {"reference": "another run"})
    bench.write_json(result, tmp_path / "out" / "bench.json")
    assert json.loads((tmp_path / "out" / "bench.json").read_text()) == result
    assert bench.read_json(tmp_path / "out" / "bench.json") == result
    pytest.importorskip("matplotlib")
    from specdec_lite.plots.bench import write_figures

    paths = write_figures(result, tmp_path / "figs")
    assert {p.name for p in paths} >= {"bench_speedup.png", "bench_cost_curve.png",
                                       "bench_speedup_simulated.png", "bench_overhead.png"}
    assert all(p.stat().st_size > 0 for p in paths)


def test_run_rejects_settings_that_do_not_fit_the_models() -> None:
    with pytest.raises(ValueError, match="max_len"):
        bench.run(Settings(prompt_len=80, new_tokens=40), *tiny_models(), progress=False)


def test_meter_counts_forwards_through_the_hooks_and_clears_them() -> None:
    models, ngram = tiny_models()
    observed = {"target": models.target, "draft": models.draft, "heads": models.heads,
                "ngram": ngram}
    with bench.ForwardMeter(observed | {"absent": None}) as meter:
        cache = models.target.new_state()
        models.target.probs(np.arange(5), cache=cache)
        models.target.probs(np.arange(7), cache=cache)  # the cached prefix: a forward of 2
        models.draft.probs(np.arange(3))
        models.heads.logits(np.zeros((1, 32), dtype=np.float32))
        ngram.last_probs(np.arange(4))
        ngram.probs(np.arange(4))  # not the n-gram's fast path: not metered
    assert meter.calls == Counter({("target", 5): 1, ("target", 2): 1, ("draft", 3): 1,
                                   ("heads", 1): 1, ("ngram", 1): 1})
    assert meter.seconds == pytest.approx(sum(meter.call_s.values())) and meter.seconds > 0
    costs = bench.in_run_costs(meter.calls, meter.call_s)
    assert costs["target"] == [[2, meter.call_s[("target", 2)], 1],
                               [5, meter.call_s[("target", 5)], 1]]
    assert all(model.observer is None for model in observed.values())
    models.target.probs(np.arange(9))  # after the meter: nothing recorded
    assert sum(meter.calls.values()) == 5
    with pytest.raises(ValueError, match="already observed"):
        with bench.ForwardMeter({"target": models.target, "draft": models.target}):
            pass


def test_the_profile_recognises_the_forwards_by_their_code() -> None:
    models, ngram = tiny_models()
    prompt = np.arange(10)

    def work() -> None:
        models.target.probs(prompt)
        hidden = models.target.hidden(prompt)
        models.heads.logits(hidden[-1:])
        ngram.last_probs(prompt)

    prof = bench.profile_call(work)
    assert 0 < prof["forward_s"] <= prof["wall_s"]
    assert not any(name in ("transformer:forward", "medusa:logits", "models:last_probs")
                   for name, _ in prof["engine"])


def test_the_meter_records_many_calls_as_it_records_each() -> None:
    models, _ = tiny_models()
    ns, seconds = np.array([2, 1, 2, 5, 1]), np.array([0.5, 0.25, 0.125, 1.0, 2.0])
    times = np.stack([np.array([0, 0, 1, 0, 0, 0]), np.insert(ns, 2, 9),
                      np.insert(seconds, 2, 7.0)], axis=1)  # [6, (mark, n, seconds)]
    meters = []
    for bulk in (False, True):
        with bench.ForwardMeter({"target": models.target}) as meter:
            hook = models.target.observer
            if bulk:
                hook.many(times, 0)  # the row marked 1 is another model's
            else:
                for n, s in zip(ns.tolist(), seconds.tolist(), strict=True):
                    hook(n, s)
        meters.append(meter)
    each, many = meters
    assert many.calls == each.calls == Counter({("target", 2): 2, ("target", 1): 2,
                                                ("target", 5): 1})
    assert many.call_s == pytest.approx(each.call_s) and many.seconds == pytest.approx(3.875)


def test_overhead_split_shares_the_wall_clock_of_each_run() -> None:
    models, _ = tiny_models()
    prompts = [np.arange(5 + i) for i in range(3)]
    prepared = []

    def prepare(prompt: np.ndarray):
        prepared.append(len(prompt))  # each run is prepared just before it is timed
        return lambda: bench.decode(Method("autoregressive", 0.0), models, None,
                                    {}, prompt, 8, seed=0)

    with bench.ForwardMeter({"target": models.target}) as meter:
        split = bench.overhead_split([lambda p=p: prepare(p) for p in prompts], meter)
    assert prepared == [5, 6, 7] and split["runs"] == 3 and split["wall_s"] > 0
    assert split["forwards"] + split["compiled"] + split["python"] == pytest.approx(1)
    assert split["compiled"] == 0  # numpy models: no compiled calls
    assert 0 < split["forwards"] < 1 and 0 < split["python"] < 1


def test_function_names_are_readable() -> None:
    assert bench.function_name(("/x/specdec_lite/verify.py", 3, "verify")) == "verify:verify"
    assert bench.function_name(
        ("~", 0, "<method 'reduce' of 'numpy.ufunc' objects>")) == "numpy.ufunc.reduce"
    assert bench.function_name(("~", 0, "<built-in method numpy.asarray>")) == "numpy.asarray"


def test_pin_blas_threads_is_recorded() -> None:
    if bench.pin_blas_threads(1):
        assert bench.machine_info()["blas_threads"]["set at run time"] == "1"


@pytest.mark.slow
def test_ngram_draft_rows(result: dict) -> None:
    rows = [r for r in result["rows"] if r["method"] == "ngram" and not r["simulated"]]
    assert [r["label"] for r in rows] == ["n-gram draft k=1 greedy T=0",
                                          "n-gram draft k=3 greedy T=0",
                                          "n-gram draft k=1 exact T=1",
                                          "n-gram draft k=3 exact T=1"]
    assert result["c_ngram"] > 0 and result["cost_curve"]["ngram_s"] > 0
    assert result["models"]["ngram"]["order"] == 3
    assert set(result["alpha_text"]["ngram"]) == {"greedy", "T=1"}
    assert [n for n, _, _ in result["cost_curve"]["in_run"]["ngram"]] == [1]  # one row a call
    paid = result["in_run_costs"]
    for r in rows:  # the predictions price k n-gram rows at c_ngram each
        k, ratio = r["k"], dict(zip(paid["n"], paid["ratio"], strict=True))
        assert r["predicted_speedup_tau"] == pytest.approx(
            r["tau"] / (k * paid["c_ngram"] + ratio[k + 1]))  # as the runs paid them
        isolated = result["cost_curve"]["ratio"]
        assert r["predicted_speedup_isolated"] == pytest.approx(expected_speedup(
            r["alpha"], k, result["c_ngram"], verify_cost=isolated[k]))


def test_format_bars_lists_every_bar_aligned_and_inside_the_table():
    data = bench.read_json(RESULTS / "bench.json")
    text = bench.format_bars(data)
    lines = text.splitlines()
    assert len(lines) == len(data["bars"])
    for line, bar in zip(lines, data["bars"], strict=True):
        assert bar["name"] in line and line.rstrip().endswith(bar["status"])
    # the threshold column starts at the same place on every line
    starts = {line.index(bar["threshold"]) for line, bar in zip(lines, data["bars"], strict=True)}
    assert len(starts) == 1
    assert text in bench.format_table(data)
