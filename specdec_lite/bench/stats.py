"""From timed runs to rows: speedups with bootstrap intervals, the predictions of theory
at the measured costs, the SIMULATED accelerator, and comparing two runs.

Statistics. A *cell* is one (prompt, repeat). A method's speedup in a cell is its
tokens/s over the autoregressive tokens/s at the same temperature in the same cell;
``speedup`` is the median over cells and ``speedup_ci`` a percentile-bootstrap 95%
interval of that median (:func:`bootstrap_ci`).

Predictions (Leviathan et al. Thm 3.8 with the measured verification cost r(n), see
:func:`predictions`):

* speculative: E(α, k) / (k·c + r(k+1)) with E(α, k) = (1 − α^(k+1)) / (1 − α)
  (``theory.expected_speedup``); c_ngram instead of c for ``ngram``;
* Medusa exact chain of depth D: E(α, D) / (c_heads + r(D+1));
* Medusa greedy tree of N nodes (root included): no closed form in α, so the prediction
  uses the measured τ: τ / (c_heads + r(N)).

``predicted_speedup_tau`` = τ / (step cost) for every method: it drops the i.i.d.
acceptance assumption, so the gap between the two predictions is the assumption's
error and the gap between ``predicted_speedup_tau`` and ``speedup`` is the cost model's
(engine overhead, draft catch-up calls of 2 tokens, the spread of cells). Both price
every forward at its mean cost inside the runs (:func:`in_run_ratios`);
``predicted_speedup_isolated`` is ``predicted_speedup`` with the isolated cost curve and
c instead. ``measured_over_predicted`` = speedup / predicted_speedup.

SIMULATED accelerator (``simulate_width=W``), for teaching: a target forward over n
tokens costs ceil(n / W) × T(1), the same for every n ≤ W (the memory-bound regime of a
GPU at batch 1); a draft forward costs c × T(1), an n-gram row c_ngram × T(1) and a heads
call c_heads × T(1), as measured here (:func:`simulated_units`). Simulated time is
computed from the forwards recorded in the same runs. Simulated rows have
``"simulated": true``, labels starting with ``SIMULATED`` and the isolated c; they are
never used for the bars.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..rules.theory import expected_speedup, expected_tokens_per_step, verify_ratio_at
from .config import Method
from .schema import SCHEMA

N_BOOT = 2000


@dataclass
class Run:
    """One timed generation."""

    label: str
    prompt: int
    repeat: int
    wall_s: float
    forward_s: float
    tokens: int
    target_calls: int
    draft_calls: int
    accepted: int
    checked: int  # accepted + first rejected draft token of each step
    sim_s: float | None = None


@dataclass
class Row:
    """The summary of one method over all cells (``simulated``: the SIMULATED model)."""

    method: str
    label: str
    k: int | None
    tree_nodes: int | None
    rule: str
    temperature: float
    simulated: bool
    speedup: float
    speedup_ci: tuple[float, float]
    predicted_speedup: float | None
    predicted_speedup_tau: float | None
    predicted_speedup_isolated: float | None
    measured_over_predicted: float | None
    alpha: float | None
    tau: float
    tokens_per_s: float
    target_calls: float
    draft_calls: float
    overhead: float | None
    matches_autoregressive: float | None
    n_runs: int


def bootstrap_ci(values: Sequence[float], seed: int = 0, n_boot: int = N_BOOT,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median of ``values`` [m]."""
    x = np.asarray(values, dtype=np.float64)  # [m]
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    medians = np.median(x[idx], axis=1)  # [n_boot]
    lo, hi = np.quantile(medians, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def simulated_units(forward_sizes: Counter, width: int, draft_forwards: int, c: float,
                    head_calls: int = 0, c_heads: float = 0.0, ngram_rows: int = 0,
                    c_ngram: float = 0.0) -> float:
    """SIMULATED cost in units of T(1): Σ ceil(n/W) over target forwards of n tokens
    (``forward_sizes`` counts them by n), plus c per draft forward, c_heads per heads call
    and c_ngram per n-gram row."""
    target = sum(math.ceil(n / width) * count for n, count in forward_sizes.items())
    return target + c * draft_forwards + c_heads * head_calls + c_ngram * ngram_rows


def ends_in_loop(tokens: Sequence[int], window: int = 32, max_period: int = 16) -> bool:
    """Whether the last ``window`` tokens repeat with some period p ≤ ``max_period``."""
    t = np.asarray(tokens)[-window:]
    if len(t) < window:
        return False
    return any(np.array_equal(t[p:], t[:-p]) for p in range(1, max_period + 1))


def verify_ratio(curve: dict, n: int, width: int | None = None) -> float | None:
    """r(n) = T(n)/T(1) from a cost curve (``{"n": [sizes], "ratio": [r]}``: the isolated
    ``cost_curve`` or the ``in_run_costs``), None where n was not measured, or ceil(n/W)
    in the SIMULATED model (``theory.verify_ratio_at``)."""
    if width is not None:
        return float(verify_ratio_at(n, width=width))
    if not curve["n"]:
        return None
    r = float(verify_ratio_at(n, curve["ratio"], sizes=curve["n"]))
    return r if math.isfinite(r) else None


def in_run_ratios(in_run: dict) -> dict:
    """The costs as the timed runs paid them, from ``cost_curve["in_run"]``: r(n) = mean
    target forward over n tokens / mean one-token target forward, for every n the runs
    made, and each drafter's mean one-token (or one-row) call in the same unit.

    Returns ``{"n": [int], "ratio": [float], "c": float | None, "c_ngram": ...,
    "c_heads": ...}`` (null where no such call was made)."""
    target = {n: s for n, s, _ in in_run.get("target", [])}
    t1 = target.get(1)

    def per_call(who: str) -> float | None:
        one = [s for n, s, _ in in_run.get(who, []) if n == 1]
        return one[0] / t1 if one and t1 else None

    sizes = sorted(target) if t1 else []
    return {"n": sizes, "ratio": [target[n] / t1 for n in sizes], "c": per_call("draft"),
            "c_ngram": per_call("ngram"), "c_heads": per_call("heads")}


def predictions(method: Method, alpha: float | None, tau: float, curve: dict, costs: dict,
                depth_nodes: tuple[int, int] | None,
                width: int | None) -> tuple[float | None, float | None]:
    """(predicted_speedup, predicted_speedup_tau) of ``method`` at the costs ``curve``
    (for r(n)) and ``costs`` (the drafting cost of each kind: speculative, ngram, medusa),
    or in the SIMULATED model of ``width``. ``depth_nodes``: (depth, nodes with the root)
    of a Medusa method's tree. None where a cost was not measured."""
    if method.kind == "autoregressive":
        return 1.0, 1.0
    if costs[method.kind] is None and method.kind != "medusa":
        return None, None
    if method.kind in ("speculative", "ngram"):
        k, c = method.k, costs[method.kind]
        r = verify_ratio(curve, k + 1, width)
        if r is None:
            return None, None
        by_tau = tau / (k * c + r)
        if alpha is None:
            return None, by_tau
        return float(expected_speedup(alpha, k, c, verify_cost=r)), by_tau
    depth, nodes = depth_nodes
    c_heads = costs["medusa"] or 0.0
    r = verify_ratio(curve, nodes, width)
    if r is None:
        return None, None
    by_tau = tau / (c_heads + r)
    if method.tree_nodes:
        return by_tau, by_tau
    if alpha is None:
        return None, by_tau
    return float(expected_tokens_per_step(alpha, depth)) / (c_heads + r), by_tau


def summarise(method: Method, runs: list[Run], outputs: dict, curve: dict, costs: dict,
              trees: dict, seed: int, width: int | None = None,
              in_run: dict | None = None) -> Row:
    """One method's row: median per-cell speedup over AR (same temperature), its bootstrap
    CI, α, τ, overhead and the predictions. ``curve`` and ``costs`` (the draft cost per
    draft call of each kind: c, c_ngram, c_heads) are the isolated measurements,
    ``in_run`` the costs the runs paid (:func:`in_run_ratios`), which price
    ``predicted_speedup`` and ``predicted_speedup_tau`` of measured rows. ``width``: use
    the SIMULATED times and cost model. ``trees``: the Medusa methods' trees."""
    base_label = Method("autoregressive", method.temperature).label
    mine = {(r.prompt, r.repeat): r for r in runs if r.label == method.label}
    base = {(r.prompt, r.repeat): r for r in runs if r.label == base_label}
    cells = sorted(set(mine) & set(base))
    if not cells:
        raise ValueError(f"no completed runs for {method.label} and its baseline")

    def seconds(r: Run) -> float:
        return r.wall_s if width is None else r.sim_s

    rate = np.array([mine[x].tokens / seconds(mine[x]) for x in cells])  # [cells]
    ratios = rate / np.array([base[x].tokens / seconds(base[x]) for x in cells])  # [cells]
    sel = [mine[x] for x in cells]
    tokens = sum(r.tokens for r in sel)
    checked = sum(r.checked for r in sel)
    alpha = sum(r.accepted for r in sel) / checked if checked else None  # accepted / checked
    tau = tokens / sum(r.target_calls for r in sel)
    tree = trees.get(method)
    shape = (tree.max_depth, tree.n_nodes) if tree is not None else None
    pred, pred_tau = isolated = predictions(method, alpha, tau, curve, costs, shape, width)
    if width is None and in_run is not None:
        paid = {"speculative": in_run["c"], "ngram": in_run["c_ngram"],
                "medusa": in_run["c_heads"]}
        pred, pred_tau = predictions(method, alpha, tau, in_run, paid, shape, None)
    speedup = float(np.median(ratios))
    wall = sum(r.wall_s for r in sel)
    matches = None
    if method.rule == "greedy":
        matches = float(np.mean([outputs[(method.label, *x)] == outputs[(base_label, *x)]
                                 for x in cells]))
    label = f"SIMULATED {method.label}" if width else method.label
    return Row(method.kind, label, method.k, method.tree_nodes, method.rule,
               method.temperature, width is not None, speedup, bootstrap_ci(ratios, seed),
               pred, pred_tau, None if width else isolated[0],
               speedup / pred if pred else None, alpha, tau,
               float(np.median(rate)), sum(r.target_calls for r in sel) / len(sel),
               sum(r.draft_calls for r in sel) / len(sel),
               None if width else 1.0 - sum(r.forward_s for r in sel) / wall, matches, len(sel))


def check_comparable(reference: object, settings: dict) -> None:
    """Raise ``ValueError`` unless ``reference`` is a JSON result run with ``settings``
    (as in ``Settings.as_json``), naming the settings that differ, and holds what
    :func:`compare_runs` reads in a usable form (:func:`check_reference`)."""
    if (not isinstance(reference, dict) or reference.get("schema") != SCHEMA
            or "rows" not in reference or not isinstance(reference.get("settings"), dict)):
        raise ValueError(f"the reference is not a {SCHEMA} result")
    ref = reference["settings"]
    differ = sorted(key for key in set(ref) | set(settings) if ref.get(key) != settings.get(key))
    if differ:
        raise ValueError(f"the reference run has different settings: {differ}")
    check_reference(reference)


METHODS = ("autoregressive", "speculative", "ngram", "medusa")  # config.Method.kind values


def _finite(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _check_curve(curve: object, where: str, times: bool) -> None:
    """A cost curve as :func:`verify_ratio` reads it: ``n`` distinct ints >= 1 and as many
    finite ``ratio`` values > 0 (and ``target_s`` seconds > 0 if ``times``, at least one,
    since the comparison prints T(1))."""
    if not isinstance(curve, dict):
        raise ValueError(f"{where} must be an object, got {curve!r:.60}")
    for key in ("n", "ratio") + (("target_s",) if times else ()):
        if not isinstance(curve.get(key), list):
            raise ValueError(f"{where}.{key} must be a list, got {curve.get(key)!r:.60}")
    sizes = curve["n"]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes) \
            or len(set(sizes)) != len(sizes):
        raise ValueError(f"{where}.n must be distinct token counts >= 1, got {sizes!r:.60}")
    for key in ("ratio", "target_s") if times else ("ratio",):
        values = curve[key]
        if len(values) != len(sizes) or not all(_finite(v) and v > 0 for v in values):
            raise ValueError(f"{where}.{key} must hold {len(sizes)} finite values > 0, one "
                             f"per n, got {values!r:.60}")
    if times and not sizes:
        raise ValueError(f"{where}.n is empty: the run measured no target forward")


def check_reference(reference: dict, name: str = "the reference") -> None:
    """Raise ``ValueError`` (naming ``name`` and the field) unless a schema-checked result
    holds what :func:`compare_runs` reads in a form it can use: measured rows with a
    known ``method``, a unique ``label``, a finite ``speedup`` > 0 and a finite
    ``speedup_ci`` [lo, hi] with lo <= hi; a ``cost_curve`` and ``in_run_costs`` (see
    ``_check_curve``); the costs ``c``, ``c_ngram``, ``c_heads`` (top level and
    ``in_run_costs``) finite or null."""
    seen = set()
    for i, row in enumerate(reference["rows"]):
        where = f"{name}: rows[{i}]"
        if not isinstance(row, dict):
            raise ValueError(f"{where} must be an object, got {row!r:.60}")
        if row.get("method") not in METHODS:
            raise ValueError(f"{where}.method must be one of {METHODS}, got "
                             f"{row.get('method')!r:.60}")
        label = row.get("label")
        if label in seen:
            raise ValueError(f"{where}.label {label!r:.60} is not unique")
        seen.add(label)
        speedup, ci = row.get("speedup"), row.get("speedup_ci")
        if not (_finite(speedup) and speedup > 0):
            raise ValueError(f"{where}.speedup must be a finite number > 0, got {speedup!r:.60}")
        if not (isinstance(ci, list) and len(ci) == 2 and all(map(_finite, ci))
                and ci[0] <= ci[1]):
            raise ValueError(f"{where}.speedup_ci must be [lo, hi], finite, lo <= hi, got "
                             f"{ci!r:.60}")
    _check_curve(reference.get("cost_curve"), f"{name}: cost_curve", times=True)
    paid = reference.get("in_run_costs")
    if paid is not None:
        _check_curve(paid, f"{name}: in_run_costs", times=False)
        absent = [key for key in ("c", "c_ngram", "c_heads") if key not in paid]
        if absent:
            raise ValueError(f"{name}: in_run_costs lacks {absent} (null where not measured)")
    for where, costs in ((f"{name}: ", reference),
                         (f"{name}: in_run_costs.", paid if paid is not None else {})):
        for key in ("c", "c_ngram", "c_heads"):
            if costs.get(key) is not None and not _finite(costs[key]):
                raise ValueError(f"{where}{key} must be a finite number or null, got "
                                 f"{costs[key]!r:.60}")


REPRODUCE_WITHIN = 0.05  # a second-run median this close to the first counts as reproduced


def compare_runs(reference: dict, new: dict) -> dict:
    """How well a new run reproduces a reference run (two JSON results of the same settings).

    For every measured row in both: the two medians and 95% CIs, whether the new median
    lies inside the reference CI (``in_reference_ci``), whether it is inside it or within
    ``REPRODUCE_WITHIN`` of the reference median (``reproduced``, the project's
    reproduction check) and whether the two CIs overlap.
    Two honest runs of the same code do not put every median inside the other's CI: a
    CI covers the *true* median about 95% of the time, and the new median is noisy too.
    Also the costs the predictions rest on side by side: the isolated T(1), r(n) and c,
    and the same costs as the runs paid them (``run r(n)``, ``run c``).

    Raises ``ValueError`` if the settings differ (naming them) or a result lacks rows.
    """
    if not isinstance(new, dict) or new.get("schema") != SCHEMA or "rows" not in new:
        raise ValueError(f"new is not a {SCHEMA} result")
    check_comparable(reference, new["settings"])
    new_rows = {r["label"]: r for r in new["rows"] if not r["simulated"]}
    rows = []
    for ref in reference["rows"]:
        row = new_rows.get(ref["label"])
        if ref["simulated"] or ref["method"] == "autoregressive" or row is None:
            continue
        (lo, hi), (new_lo, new_hi) = ref["speedup_ci"], row["speedup_ci"]
        rows.append({"label": ref["label"], "reference": [ref["speedup"], lo, hi],
                     "new": [row["speedup"], new_lo, new_hi],
                     "in_reference_ci": lo <= row["speedup"] <= hi,
                     "reproduced": (lo <= row["speedup"] <= hi
                                    or abs(row["speedup"] - ref["speedup"]) <= REPRODUCE_WITHIN),
                     "overlap": lo <= new_hi and new_lo <= hi})
    curves = reference["cost_curve"], new["cost_curve"]
    paid = reference.get("in_run_costs"), new.get("in_run_costs")
    costs = {"T(1) ms": [c["target_s"][0] * 1e3 for c in curves]}
    for n in (2, 5, 9):
        costs[f"r({n})"] = [verify_ratio(c, n) for c in curves]
        costs[f"run r({n})"] = [verify_ratio(c, n) if c else None for c in paid]
    costs |= {name: [reference.get(name), new.get(name)] for name in ("c", "c_ngram", "c_heads")}
    costs |= {f"run {name}": [c.get(name) if c else None for c in paid]
              for name in ("c", "c_ngram", "c_heads")}
    costs = {name: pair for name, pair in costs.items() if None not in pair}
    return {"reference": reference["timestamp"], "new": new["timestamp"], "rows": rows,
            "in_reference_ci": sum(r["in_reference_ci"] for r in rows),
            "reproduced": sum(r["reproduced"] for r in rows),
            "overlap": sum(r["overlap"] for r in rows), "costs": costs}
