"""specdec_lite.bench.analysis: against the committed results/bench.json (each figure must
agree with what the harness itself summarised) and against small hand-made results."""

import json

import numpy as np
import pytest
from support import RESULTS, ROOT

from specdec_lite import expected_tokens_per_step
from specdec_lite.bench import analysis

BENCH = json.loads((RESULTS / "bench.json").read_text())
MEASURED = [r for r in analysis.rows_of(BENCH) if r["method"] != "autoregressive"]


def test_method_of_rebuilds_every_label():
    for row in BENCH["rows"]:
        assert analysis.method_of(row).label == row["label"].removeprefix("SIMULATED ")


def test_rows_of_filters_by_method_temperature_and_simulation():
    rows = analysis.rows_of(BENCH, "speculative", 1.0)
    assert rows and all(r["method"] == "speculative" and r["temperature"] == 1.0
                        and not r["simulated"] for r in rows)
    assert all(r["simulated"] for r in analysis.rows_of(BENCH, simulated=True))
    assert analysis.best_row(rows)["speedup"] == max(r["speedup"] for r in rows)
    with pytest.raises(ValueError, match="rows"):
        analysis.best_row([])


def test_cell_speedups_reproduce_the_harness_medians():
    for row in MEASURED:
        cells = analysis.cell_speedups(BENCH, row)
        assert len(cells) == row["n_runs"]
        assert np.median(cells) == pytest.approx(row["speedup"])
    for row in analysis.rows_of(BENCH, simulated=True):
        assert np.median(analysis.cell_speedups(BENCH, row, "sim_s")) == pytest.approx(
            row["speedup"])


def test_tau_prediction_at_in_run_costs_is_the_harness_prediction():
    for row in MEASURED:
        assert analysis.tau_prediction(BENCH, row) == pytest.approx(row["predicted_speedup_tau"])
        drafting, verification = analysis.step_parts(BENCH, row, in_run=False)
        # r(2) can come out just under 1: one token takes the BLAS path, two the skinny kernel
        assert drafting > 0 and verification > 0.8


def test_step_parts_on_a_hand_made_result():
    data = {"c": 0.1, "c_ngram": 0.02, "c_heads": 0.05,
            "cost_curve": {"n": [1, 2, 3, 4, 5], "ratio": [1.0, 1.5, 1.8, 2.0, 2.1]},
            "in_run_costs": {"n": [1, 3, 5], "ratio": [1.0, 2.0, 2.5], "c": 0.2,
                             "c_ngram": 0.04, "c_heads": None}}
    spec = {"method": "speculative", "k": 2, "tree_nodes": None, "tau": 2.0, "label": "s"}
    assert analysis.step_parts(data, spec) == pytest.approx((0.4, 2.0))
    assert analysis.step_parts(data, spec, in_run=False) == pytest.approx((0.2, 1.8))
    assert analysis.tau_prediction(data, spec) == pytest.approx(2.0 / 2.4)
    tree = {"method": "medusa", "k": None, "tree_nodes": 4, "tau": 2.0, "label": "m"}
    assert analysis.step_parts(data, tree, in_run=False) == pytest.approx((0.05, 2.1))
    with pytest.raises(ValueError, match="no measured cost"):
        analysis.step_parts(data, tree)  # no in-run heads cost
    assert analysis.step_parts(data, {"method": "autoregressive"}) == (0.0, 1.0)


def test_implied_alpha_inverts_the_closed_form():
    alphas = np.array([0.0, 0.3, 0.78, 0.99])
    for k in (1, 3, 8):
        tau = expected_tokens_per_step(alphas, k)
        np.testing.assert_allclose(analysis.implied_alpha(tau, k), alphas, atol=1e-12)
    assert analysis.implied_alpha(4.0, 3) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="tau"):
        analysis.implied_alpha(5.0, 3)


def test_pooled_alpha_and_accepted_per_proposed():
    for row in MEASURED:
        if row["method"] in ("speculative", "ngram"):
            assert analysis.pooled_alpha(BENCH, [row]) == pytest.approx(row["alpha"])
            # drafts after a rejection are proposed but never checked
            assert analysis.accepted_per_proposed(BENCH, row) <= row["alpha"] + 1e-12
    with pytest.raises(ValueError, match="rows"):
        analysis.pooled_alpha(BENCH, [])


def test_gap_chain_runs_from_simulated_to_wall_clock():
    row = analysis.best_row(MEASURED)
    chain = analysis.gap_chain(BENCH, row)
    assert list(chain)[0] == "flat T(n), SIMULATED" and len(chain) == 5
    assert chain["wall clock, engine included"] == row["speedup"]
    assert chain["costs the runs paid"] == pytest.approx(row["predicted_speedup_tau"])
    assert analysis.largest_drop({"a": 2.0, "b": 1.9, "c": 1.2, "d": 1.1}) == "c"
    factors = analysis.gap_factors(BENCH, MEASURED)
    assert list(factors) == list(chain)[2:]
    assert all(0.5 < f < 1.5 for f in factors.values())


def test_ci_side():
    row = {"speedup_ci": [0.9, 1.2]}
    assert analysis.ci_side(row) == "contains"
    assert analysis.ci_side(row, 0.8) == "above"
    assert analysis.ci_side(row, 1.3) == "below"


def test_speed_claims_have_a_computed_verdict_each():
    claims = analysis.speed_claims(BENCH)
    assert len(claims) == 7
    assert all(set(c) == {"claim", "measured", "verdict"} and c["verdict"] for c in claims)
    best = analysis.best_row(MEASURED)
    expected = "reached" if best["speedup_ci"][0] > 2.3 else None
    if expected:
        assert claims[0]["verdict"] == expected
    assert f"{best['speedup']:.2f}×" in claims[0]["measured"]


def test_blog_claim_of_automatic_benefit_counts_cis_not_medians():
    def claim(ci_of):  # the last claim with every measured non-plain row's CI set by ci_of(row)
        rows = [r | {"speedup_ci": ci_of(r)} if not r["simulated"]
                and r["method"] != "autoregressive" else r for r in BENCH["rows"]]
        return analysis.speed_claims({**BENCH, "rows": rows})[-1]

    wide = claim(lambda r: [r["speedup"] - 1, r["speedup"] + 1])  # every CI contains 1
    assert wide["verdict"].startswith("not shown")
    first = MEASURED[1]["label"]
    one_below = claim(lambda r: [0.8, 0.9] if r["label"] == first else [1.1, 1.2])
    assert one_below["verdict"].startswith("does not hold")
    assert f"CI below 1×: 1 of {len(MEASURED)} configurations; CI containing 1×: 0" in \
        one_below["measured"]
    assert claim(lambda r: [1.1, 1.2])["verdict"].startswith("all gain")


def test_in_run_over_isolated_covers_the_target_sizes():
    entries = analysis.in_run_over_isolated(BENCH)
    sizes = {n for who, n, _, _ in entries if who == "target"}
    assert sizes == {n for n, _, calls in BENCH["cost_curve"]["in_run"]["target"] if calls >= 20}
    assert all(ratio > 0 and calls >= 20 for _, _, ratio, calls in entries)


def test_parameter_count_matches_the_shipped_weights():
    weights = ROOT / "specdec_lite" / "weights"
    described = analysis.machine_description(BENCH)
    for name in ("target", "draft"):
        with np.load(weights / f"{name}.npz") as archive:
            size = sum(archive[key].size for key in archive.files)
        assert described["models"][name]["parameters"] == size
    assert described["cpu"] == BENCH["machine"]["cpu_model"]


def test_blas_info_names_the_kernel_and_its_paths():
    info = analysis.blas_info()
    assert set(info) == {"library", "version", "kernel", "rowwise_max", "cpu_vendor",
                         "coretype_env", "numba"}


def test_largest_drops_names_one_link_per_row():
    rows = [r for r in analysis.rows_of(BENCH) if r["method"] != "autoregressive"]
    drops = analysis.largest_drops(BENCH, rows)
    assert list(drops) == [r["label"] for r in rows]
    for row in rows:
        assert drops[row["label"]] == analysis.largest_drop(analysis.gap_chain(BENCH, row))


def test_price_moves_on_a_hand_made_comparison():
    comparison = {"costs": {"T(1) ms": [2.0, 1.0], "r(2)": [1.0, 1.2], "c": [0.1, 0.1],
                            "run r(2)": [1.5, 1.53], "run c": [0.2, 0.19]}}
    moves = analysis.price_moves(comparison)
    assert moves["isolated"] == pytest.approx(0.2)  # T(1) in ms is not a price
    assert moves["in-run"] == pytest.approx(0.05)


def test_overhead_ranges_bound_every_row():
    for t in (0.0, 1.0):
        ranges = analysis.overhead_ranges(BENCH, t)
        assert set(ranges) == {"autoregressive", "speculative", "ngram", "medusa"}
        for method, (least, most) in ranges.items():
            shares = [r["overhead"] for r in analysis.rows_of(BENCH, method, t)]
            assert (least, most) == (min(shares), max(shares))
