"""specdec_lite.bench.drafters' reading helpers (pool_counts, row_index, ci_side,
cis_overlap, side_counts, the format_* tables), on hand-made traces and rows and on the
committed results/drafters_*.json."""

from collections import Counter

import numpy as np
import pytest
from support import RESULTS

from specdec_lite.bench import drafters
from specdec_lite.engine.decode import Generation, Step


def gen(steps: list[tuple[int, int]], draft_calls: int = 0) -> Generation:
    """A decode whose steps proposed n tokens and accepted a of them, one target call each."""
    out = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=np.zeros(1, dtype=np.int64))
    out.steps = [Step(tuple(range(n)), a, tuple(range(a + 1)), "bonus" if a == n else
                      "correction") for n, a in steps]
    out.tokens = np.array([t for s in out.steps for t in s.emitted], dtype=np.int64)
    out.n_target_calls, out.n_draft_calls = len(steps), draft_calls
    return out


def test_pool_counts_sums_the_counts_before_dividing():
    # decode 1: 4 proposed, 2 accepted, 3 checked; 3 emitted. decode 2: 2 + 0 proposed,
    # 2 accepted, 2 checked; 3 + 1 emitted. Pooled: α = 4/5, τ = 7/3, 6/3 proposed per call.
    pooled = drafters.pool_counts([gen([(4, 2)], draft_calls=4), gen([(2, 2), (0, 0)], 2)])
    assert pooled == {"alpha": 4 / 5, "tau": 7 / 3, "proposed": 2.0, "draft_calls": 6}
    # not the mean of the two decodes' α (2/3 and 1), which would weigh them alike
    assert pooled["alpha"] != pytest.approx(np.mean([2 / 3, 1.0]))


def test_pool_counts_of_plain_steps_has_no_alpha():
    pooled = drafters.pool_counts([gen([(0, 0), (0, 0)])])
    assert pooled["alpha"] is None and pooled["tau"] == 1.0 and pooled["proposed"] == 0.0


@pytest.mark.parametrize("gens", [[], None, "abc", [1, 2]])
def test_pool_counts_refuses_what_is_not_generations(gens):
    with pytest.raises(TypeError, match="gens"):
        drafters.pool_counts(gens)


def test_pool_counts_refuses_decodes_without_a_target_call():
    with pytest.raises(ValueError, match="no target call"):
        drafters.pool_counts([gen([])])


def test_pool_counts_refuses_a_single_generation():
    with pytest.raises(TypeError, match="gens"):
        drafters.pool_counts(gen([(1, 1)]))


def row(lo: float, hi: float) -> dict:
    return {"speedup_ci": [lo, hi]}


def test_ci_side_places_the_interval_against_one():
    assert drafters.ci_side(row(1.01, 1.4)) == "above"
    assert drafters.ci_side(row(0.5, 0.99)) == "below"
    assert drafters.ci_side(row(0.9, 1.1)) == "contains"
    assert drafters.ci_side(row(1.0, 1.2)) == "contains"  # touching 1 is not above it


def test_cis_overlap_is_symmetric_and_counts_a_shared_end():
    assert drafters.cis_overlap(row(0.8, 1.0), row(1.0, 1.3))
    assert drafters.cis_overlap(row(0.8, 1.3), row(0.9, 1.0))  # one inside the other
    assert not drafters.cis_overlap(row(0.5, 0.7), row(0.71, 0.9))
    assert not drafters.cis_overlap(row(0.71, 0.9), row(0.5, 0.7))


def test_row_index_keys_every_committed_row_once():
    results = {b: drafters.read_json(RESULTS / f"drafters_{b}.json") for b in ("numpy", "numba")}
    index = drafters.row_index(results)
    assert len(index) == sum(len(d["rows"]) for d in results.values())
    for b, data in results.items():
        for r in data["rows"]:
            assert index[(b, r["category"], r["method"], r["temperature"])] is r


def test_row_index_refuses_what_is_not_a_result():
    with pytest.raises(TypeError, match="results"):
        drafters.row_index({})
    with pytest.raises(ValueError, match="numpy"):
        drafters.row_index({"numpy": {"schema": "something else", "rows": []}})


def committed() -> dict:
    return {b: drafters.read_json(RESULTS / f"drafters_{b}.json") for b in ("numpy", "numba")}


def test_keep_methods_keeps_plain_decoding_and_the_named_methods_only():
    full = drafters.read_json(RESULTS / "drafters_amd10_numba.json")
    shown = ["GPT draft, k = 3", "prompt lookup, auto k"]
    part = drafters.keep_methods(full, shown)
    assert {r["method"] for r in part["rows"]} == {drafters.PLAIN, *shown}
    assert {r["method"] for r in part["runs"]} == {drafters.PLAIN, *shown}
    assert drafters.methods_in({"part": part}) == shown
    assert part["rows"] == [r for r in full["rows"] if r["method"] in {drafters.PLAIN, *shown}]
    assert part["settings"] == full["settings"] and len(full["rows"]) > len(part["rows"])
    with pytest.raises(ValueError, match="methods"):
        drafters.keep_methods(full, ["GPT draft, k = 5"])
    with pytest.raises(ValueError, match="methods"):
        drafters.keep_methods(full, "GPT draft, k = 3")


def test_short_labels_stay_apart():
    labels = [m.label for m in drafters.METHODS if m.drafter]
    short = [drafters.short_label(label) for label in labels]
    assert len(set(short)) == len(labels)
    assert drafters.short_label("GPT draft, k = 6, confidence stop") == "GPT, confidence"
    assert drafters.short_label("prompt lookup, auto k") == "lookup, auto k"


def test_format_speedups_prints_each_median_with_its_ci_mark():
    results = committed()
    rows = drafters.row_index(results)
    table = drafters.format_speedups(results).splitlines()
    methods = drafters.methods_in(results)
    assert methods == [m.label for m in drafters.METHODS if m.drafter
                       and any(key[2] == m.label for key in rows)]
    temperatures = results["numpy"]["settings"]["temperatures"]
    assert len(table) == len(temperatures) * (2 + len(methods))
    mark = {"above": "+", "below": "-", "contains": " "}
    for i, t in enumerate(temperatures):
        block = table[i * (2 + len(methods)):(i + 1) * (2 + len(methods))]
        assert block[0].startswith(f"T = {t:g}") and "completion" in block[0]
        for line, method in zip(block[2:], methods, strict=True):
            assert line.startswith(drafters.short_label(method))
            cells = [line[18 + 7 * j: 25 + 7 * j] for j in range(4)]
            keys = [(b, cat, method, t) for cat in drafters.CATEGORIES for b in results]
            for cell, key in zip(cells, keys, strict=True):
                assert float(cell[:6]) == round(rows[key]["speedup"], 2)
                assert cell[6] == mark[drafters.ci_side(rows[key])]


def test_format_speedups_marks_a_method_one_result_lacks():
    full = committed()["numba"]
    part = {**full, "rows": [r for r in full["rows"] if r["method"] != "EAGLE drafter, auto k"]}
    table = drafters.format_speedups({"full": full, "part": part}).splitlines()
    line = next(x for x in table if x.startswith("EAGLE, auto k"))
    cells = [line[18 + 7 * j: 25 + 7 * j] for j in range(4)]  # full, part per category
    assert [c.strip() == "-" for c in cells] == [False, True, False, True]
    assert drafters.methods_in({"part": part}) == [
        m.label for m in drafters.METHODS if m.drafter and m.label != "EAGLE drafter, auto k"
        and any(r["method"] == m.label for r in full["rows"])]


def test_format_counts_prints_alpha_and_tau_of_one_result():
    data = committed()["numba"]
    lines = drafters.format_counts(data).splitlines()
    row = next(r for r in data["rows"] if r["method"] == "prompt lookup, k = 8"
               and r["category"] == "grounded" and r["temperature"] == 1.0)
    t1 = lines.index("T = 1")
    line = next(x for x in lines[t1:] if x.startswith("lookup, k = 8"))
    assert line.split()[-2:] == [f"{row['alpha']:.2f}", f"{row['tau']:.2f}"]


def result(*rows: tuple[str, str | None, float, float, float]) -> dict:
    """A minimal result: rows (category, drafter, T, CI low, CI high) of distinct methods."""
    return {"schema": drafters.SCHEMA, "rows": [
        {"category": cat, "method": f"method {i}", "drafter": drafter, "temperature": t,
         "speedup_ci": [lo, hi]} for i, (cat, drafter, t, lo, hi) in enumerate(rows)]}


def test_side_counts_tallies_each_drafter_and_leaves_plain_decoding_out():
    data = result(("completion", None, 0.0, 0.9, 1.1),  # plain decoding: not counted
                  ("completion", "gpt", 0.0, 1.1, 1.3), ("completion", "gpt", 0.0, 0.5, 0.8),
                  ("completion", "gpt", 0.0, 0.9, 1.2), ("grounded", "lookup", 1.0, 1.2, 1.5),
                  ("grounded", "lookup", 0.0, 1.5, 1.9))
    data["rows"][-1]["policy"] = "oracle"  # a ceiling: not counted either
    counts = drafters.side_counts({"numpy": data})
    assert counts == {("numpy", "completion", 0.0, "gpt"): {"above": 1, "contains": 1, "below": 1},
                      ("numpy", "grounded", 1.0, "lookup"): {"above": 1, "contains": 0, "below": 0}}


def test_side_counts_of_the_committed_results_cover_every_speculative_row():
    results = committed()
    expected = Counter((b, r["category"], r["temperature"], r["drafter"], drafters.ci_side(r))
                       for b, data in results.items() for r in data["rows"] if r["drafter"])
    counts = drafters.side_counts(results)
    flat = {key + (side,): n for key, tally in counts.items() for side, n in tally.items() if n}
    assert flat == expected
    assert sum(expected.values()) == sum(len(d["rows"]) - 4 for d in results.values())  # 4 plain


def test_format_sides_prints_each_count_under_its_category_and_drafter():
    results = committed()
    counts = drafters.side_counts(results)
    lines = drafters.format_sides(results).splitlines()
    kinds = [d for d in dict.fromkeys(m.drafter for m in drafters.METHODS if m.drafter)
             if any(key[3] == d for key in counts)]
    assert lines[2].split() == [drafters.DRAFTER_NAMES[d] for d in kinds] * len(drafters.CATEGORIES)
    for t in results["numba"]["settings"]["temperatures"]:
        for b in results:
            line = next(x for x in lines if x.startswith(f"{b}, T = {t:g}"))
            cells = line[14:].split()
            expected = [counts[b, cat, t, d] for cat in drafters.CATEGORIES for d in kinds]
            assert [[int(x) for x in c.split("/")] for c in cells] == [
                [n[s] for s in drafters.SIDES] for n in expected]


def test_format_sides_marks_a_missing_cell():
    data = result(("completion", "gpt", 0.0, 1.1, 1.3), ("grounded", "lookup", 0.0, 0.5, 0.8))
    line = drafters.format_sides({"numpy": data}).splitlines()[-1]
    assert line.split() == ["numpy,", "T", "=", "0", "1/0/0", "-", "-", "0/0/1"]
