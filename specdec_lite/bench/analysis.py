"""Reading a benchmark result: the numbers chapter 6 and appendix A derive from it.

Every function takes a loaded JSON result (``data``, the schema of
:mod:`specdec_lite.bench`) and plain rows of it, and computes one thing the book
prints: which runs belong to a row, the α a row implies, the two parts of a step's
cost, the chain from the flat-cost prediction down to the wall clock, the verdict on
each of the speed claims :func:`speed_claims` checks, and a description of the machine and models.
A *cell* here is one (prompt, repeat) pair of the benchmark, as in the harness.
"""

from __future__ import annotations

import numpy as np

from ..rules.theory import expected_tokens_per_step
from .config import Method
from .stats import verify_ratio
from .timing import blas_info  # noqa: F401  (chapter 6 asks analysis for it)

DRAFT_COST = {"speculative": "c", "ngram": "c_ngram", "medusa": "c_heads"}  # row method -> key


# ---------------------------------------------------------------- rows and runs


def rows_of(data: dict, method: str | None = None, temperature: float | None = None,
            simulated: bool = False) -> list[dict]:
    """The rows of one method (all if None) at one temperature (all if None), measured
    or SIMULATED, in the order the harness wrote them."""
    return [r for r in data["rows"] if r["simulated"] == simulated
            and method in (None, r["method"]) and temperature in (None, r["temperature"])]


def best_row(rows: list[dict]) -> dict:
    """The row with the highest median speedup."""
    if not rows:
        raise ValueError("rows must not be empty")
    return max(rows, key=lambda r: r["speedup"])


def method_of(row: dict) -> Method:
    """The harness's ``Method`` of a row; its ``label`` is the row's, without SIMULATED."""
    k = row["k"] if row["method"] != "autoregressive" else None
    return Method(row["method"], row["temperature"], k=k, tree_nodes=row["tree_nodes"])


def runs_of(data: dict, row: dict) -> list[dict]:
    """The timed runs (one per cell) behind a row."""
    label = method_of(row).label
    return [run for run in data["runs"] if run["label"] == label]


def pooled_alpha(data: dict, rows: list[dict]) -> float:
    """α = accepted / checked draft tokens, pooled over every run of ``rows``."""
    runs = [run for row in rows for run in runs_of(data, row)]
    checked = sum(run["checked"] for run in runs)
    if not checked:
        raise ValueError("rows: their runs checked no draft tokens")
    return sum(run["accepted"] for run in runs) / checked


def accepted_per_proposed(data: dict, row: dict) -> float:
    """Accepted / proposed draft tokens of a row (a draft call proposes one token)."""
    runs = runs_of(data, row)
    return sum(run["accepted"] for run in runs) / sum(run["draft_calls"] for run in runs)


def implied_alpha(tau: float | np.ndarray, k: int) -> float | np.ndarray:
    """The α at which E(α, k) = (1 − α^(k+1)) / (1 − α) equals ``tau``, by bisection
    (E grows with α from 1 at α = 0 to k + 1 at α = 1). ``tau`` must lie in [1, k + 1]."""
    tau = np.asarray(tau, dtype=np.float64)
    if np.any(tau < 1) or np.any(tau > k + 1):
        raise ValueError(f"tau must lie in [1, k + 1] = [1, {k + 1}], got {tau}")
    lo, hi = np.zeros_like(tau), np.ones_like(tau)
    for _ in range(60):  # 2^-60: below float64 resolution
        mid = (lo + hi) / 2
        low = np.asarray(expected_tokens_per_step(mid, k)) < tau
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    alpha = (lo + hi) / 2
    return float(alpha) if alpha.ndim == 0 else alpha


def cell_speedups(data: dict, row: dict, seconds: str = "wall_s") -> np.ndarray:
    """Per cell, the row's tokens/s over plain decoding's at the same temperature in the
    same cell [cells], timed by ``seconds``: ``"wall_s"``, ``"forward_s"`` (the model
    forwards only) or ``"sim_s"`` (the SIMULATED cost model)."""
    base_label = Method("autoregressive", row["temperature"]).label
    base = {(run["prompt"], run["repeat"]): run for run in data["runs"]
            if run["label"] == base_label}
    ratios = [(run["tokens"] / run[seconds]) / (plain["tokens"] / plain[seconds])
              for run in runs_of(data, row)
              if (plain := base.get((run["prompt"], run["repeat"]))) is not None]
    return np.array(ratios)  # [cells]


def ci_side(row: dict, value: float = 1.0) -> str:
    """Where a row's 95% CI lies against ``value``: "above", "below" or "contains"."""
    lo, hi = row["speedup_ci"]
    return "above" if lo > value else "below" if hi < value else "contains"


# ---------------------------------------------------------------- the cost of a step


def step_parts(data: dict, row: dict, in_run: bool = True) -> tuple[float, float]:
    """(drafting, verification) cost of one step of ``row`` in units of T(1), at the costs
    the runs paid (``in_run``) or at the isolated cost curve. Drafting is k·c (k·c_ngram
    for the n-gram, one heads call c_heads for Medusa); verification is r(n) for the n
    tokens the target checks: k + 1, or the tree's nodes plus its root."""
    if row["method"] == "autoregressive":
        return 0.0, 1.0
    curve = data["in_run_costs"] if in_run else data["cost_curve"]
    cost = (data["in_run_costs"] if in_run else data)[DRAFT_COST[row["method"]]]
    if row["method"] == "medusa":
        drafting, n = cost, (row["tree_nodes"] or row["k"]) + 1
    else:
        drafting, n = row["k"] * cost, row["k"] + 1
    r = verify_ratio(curve, n)
    if r is None or cost is None:
        raise ValueError(f"row {row['label']!r}: no measured cost for a step of {n} tokens")
    return float(drafting), float(r)


def tau_prediction(data: dict, row: dict, in_run: bool = True) -> float:
    """τ / (drafting + verification): the speedup the cost model predicts from the row's
    measured τ (``predicted_speedup_tau`` of the harness when ``in_run``)."""
    return row["tau"] / sum(step_parts(data, row, in_run))


def gap_chain(data: dict, row: dict) -> dict[str, float]:
    """The speedup of a measured row followed from the flat-cost accelerator down to the
    wall clock, one cost at a time: the SIMULATED row (if the run has one), the cost model
    at the isolated prices, at the prices the runs paid, the forwards as the runs paid
    them (median over cells of forward-time ratios), and the measured wall clock."""
    twin = [r for r in rows_of(data, row["method"], row["temperature"], simulated=True)
            if method_of(r) == method_of(row)]
    chain = {"flat T(n), SIMULATED": twin[0]["speedup"]} if twin else {}
    chain["measured T(n), isolated costs"] = tau_prediction(data, row, in_run=False)
    chain["costs the runs paid"] = tau_prediction(data, row)
    chain["forwards as the runs paid them"] = float(np.median(
        cell_speedups(data, row, "forward_s")))
    chain["wall clock, engine included"] = row["speedup"]
    return chain


def largest_drop(chain: dict[str, float]) -> str:
    """The link of a gap chain with the largest step down, named by the link it reaches."""
    names, values = list(chain), list(chain.values())
    drops = [values[i] - values[i + 1] for i in range(len(values) - 1)]
    return names[int(np.argmax(drops)) + 1]


def largest_drops(data: dict, rows: list[dict]) -> dict[str, str]:
    """{row label: the link of its gap chain with the largest step down} for ``rows``."""
    return {r["label"]: largest_drop(gap_chain(data, r)) for r in rows}


def price_moves(comparison: dict) -> dict[str, float]:
    """The largest relative move of each set of prices between the two runs of a
    ``compare_runs`` result: {"isolated": ..., "in-run": ...}. Prices are in units of
    T(1), so T(1) itself (in ms) is left out."""
    moved = {name: abs(second / first - 1) for name, (first, second)
             in comparison["costs"].items() if name != "T(1) ms"}
    return {"isolated": max(x for name, x in moved.items() if not name.startswith("run")),
            "in-run": max(x for name, x in moved.items() if name.startswith("run"))}


def overhead_ranges(data: dict, temperature: float,
                    methods: tuple[str, ...] = ("autoregressive", "speculative", "ngram",
                                                "medusa")) -> dict[str, tuple[float, float]]:
    """{method: (smallest, largest) engine overhead over its measured rows} at one
    temperature: the share of a run's time spent outside the model forwards."""
    shares = {m: [r["overhead"] for r in rows_of(data, m, temperature)] for m in methods}
    return {m: (min(x), max(x)) for m, x in shares.items() if x}


def gap_factors(data: dict, rows: list[dict]) -> dict[str, float]:
    """For each link of the gap chain after the isolated prediction, the median over
    ``rows`` of (this link ÷ the one before it): what each cost takes off a typical row."""
    chains = [list(gap_chain(data, r).items())[-4:] for r in rows]  # [rows, 4 links]
    factors = {}
    for i in range(1, 4):
        factors[chains[0][i][0]] = float(np.median([c[i][1] / c[i - 1][1] for c in chains]))
    return factors


def in_run_over_isolated(data: dict, min_calls: int = 20) -> list[tuple[str, int, float, int]]:
    """(model, n, in-run mean cost ÷ isolated cost, calls) for every forward size the runs
    made at least ``min_calls`` times and the isolated measurements cover. A draft forward
    over more than one token is compared with the isolated one-token forward."""
    curve = data["cost_curve"]
    isolated = {"draft": curve["draft_s"], "heads": curve["heads_s"], "ngram": curve["ngram_s"]}
    out = []
    for who, entries in curve["in_run"].items():
        for n, seconds, calls in entries:
            if who == "target":
                base = curve["target_s"][n - 1] if n <= len(curve["target_s"]) else None
            else:
                base = isolated.get(who)
            if base and calls >= min_calls:
                out.append((who, n, seconds / base, calls))
    return out


# ---------------------------------------------------------------- speed claims, checked


def _reached(row: dict, target: float) -> str:
    side = ci_side(row, target)
    return {"above": "reached", "below": "not reached",
            "contains": "not settled: the 95% CI contains it"}[side]


def speed_claims(data: dict) -> list[dict]:
    """Speed claims often made for speculative decoding, each with the measured figure that
    tests it and a verdict computed from the measurements: a list of {"claim",
    "measured", "verdict"}."""
    measured = [r for r in rows_of(data) if r["method"] != "autoregressive"]
    temperatures = sorted({r["temperature"] for r in measured})
    top, hot = best_row(measured), best_row([r for r in measured if r["temperature"] > 0])
    lo, hi = top["speedup_ci"]
    claims = [{"claim": "'speculative decoding is 2.3× faster'",
               "measured": f"best: {top['label']}, {top['speedup']:.2f}× (CI {lo:.2f}-{hi:.2f})",
               "verdict": _reached(top, 2.3)},
              {"claim": "'it can halve LLM latency': 2× or more",
               "measured": f"best {top['speedup']:.2f}×; best at T > 0 {hot['speedup']:.2f}×",
               "verdict": _reached(top, 2.0)}]
    for t in temperatures:
        spec = rows_of(data, "speculative", t)
        k_best, ks = best_row(spec)["k"], [r["k"] for r in spec]
        claims.append({"claim": f"'set K = 5 for maximum speedup': speedup grows "
                                f"with k (T = {t:g})",
                       "measured": f"over k in {ks} the median speedup peaks at k = {k_best}",
                       "verdict": "holds up to the largest k measured" if k_best == max(ks)
                       else "does not hold: the speedup peaks, then falls"})
    spec = rows_of(data, "speculative", temperatures[-1])
    proposed = [accepted_per_proposed(data, r) for r in spec]  # [ks]
    checked = [r["alpha"] for r in spec]  # [ks]
    fall_proposed, fall_checked = 1 - proposed[-1] / proposed[0], 1 - checked[-1] / checked[0]
    claims.append({
        "claim": f"'acceptance rate drops as K grows' (T = {temperatures[-1]:g})",
        "measured": f"k = {spec[0]['k']} to {spec[-1]['k']}: accepted/proposed "
                    f"{proposed[0]:.2f} -> {proposed[-1]:.2f}, α = accepted/checked "
                    f"{checked[0]:.2f} -> {checked[-1]:.2f}",
        "verdict": "true only per proposed token; α per checked token moves far less"
        if fall_proposed > 0 and abs(fall_checked) < fall_proposed / 2
        else "true for both rates" if fall_proposed > 0 and fall_checked > 0 else "not seen"})
    medusa = best_row(rows_of(data, "medusa", temperatures[0]))
    draft = best_row(rows_of(data, "speculative", temperatures[0]))
    claims.append({"claim": "'Medusa heads amplify the gain': Medusa beats a "
                            "draft model",
                   "measured": f"greedy: best Medusa {medusa['speedup']:.2f}×, best draft "
                               f"model {draft['speedup']:.2f}×",
                   "verdict": "holds here" if ci_side(medusa, draft["speedup"]) == "above"
                   else "does not hold here"})
    side = [ci_side(r) for r in measured]  # a slowdown or a gain only where the CI is past 1
    slower, unclear = side.count("below"), side.count("contains")
    claims.append({"claim": "'swap in real models and the engine will automatically "
                            "benefit'",
                   "measured": f"95% CI below 1×: {slower} of {len(measured)} "
                               f"configurations; CI containing 1×: {unclear}",
                   "verdict": "does not hold: the gain depends on α, c and r(n)" if slower
                   else "not shown: some configurations gain nothing measurable" if unclear
                   else "all gain here, by amounts set by α, c and r(n)"})
    return claims




# ---------------------------------------------------------------- machine and models


def parameter_count(config: dict) -> int:
    """Parameters of a GPT of the book's shape (``TransformerConfig`` as a dict): token and
    position embeddings, per layer 12·d² + 13·d (attention, MLP, two LayerNorms), and the
    final LayerNorm."""
    d, layers = config["d_model"], config["n_layer"]
    return (config["vocab_size"] + config["max_len"]) * d + layers * (12 * d * d + 13 * d) + 2 * d


def machine_description(data: dict) -> dict:
    """What a result was measured on: CPU, cores, numpy, BLAS thread settings, and per
    model its layers, width and parameter count with its float32 size in MB."""
    machine, models = data["machine"], data["models"]
    sizes = {name: models[name] | {"parameters": parameter_count(models[name]),
                                   "megabytes": 4 * parameter_count(models[name]) / 1e6}
             for name in ("target", "draft")}
    return {"cpu": machine["cpu_model"], "cores": machine["cpu_count"],
            "numpy": machine["numpy"], "blas_threads": machine["blas_threads"],
            "models": sizes, "medusa_heads": models["heads"], "ngram": models.get("ngram")}
