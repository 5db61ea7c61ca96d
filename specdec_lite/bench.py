"""Benchmark: autoregressive vs draft-model speculative decoding vs Medusa, against theory.

``run()`` decodes the same held-out prompts with every method and measures wall-clock
tokens/s, target and draft calls, α (accepted / checked draft tokens) and τ, the
target's **cost curve** T(n), the draft cost c, and the **engine overhead** (wall time
outside the model forwards).

Methods (the rule follows the temperature: greedy verification at T = 0, the exact
rule at T > 0):

* ``autoregressive``: :func:`specdec_lite.generate`, the baseline at each temperature;
* ``speculative``: :func:`specdec_lite.speculative_generate` with the draft GPT, per k;
* ``ngram``: the same with a Witten–Bell character n-gram of the training split as the
  draft (order ``NGRAM_ORDER``), which drafts through ``NGramModel.last_probs``: a draft
  that costs almost nothing next to the target, at a somewhat different α;
* ``medusa``: :func:`specdec_lite.medusa_generate`; at T = 0 greedy over sparse trees of
  a few sizes, built from the heads' top-k accuracies measured on held-out text (a part
  of the held-out split that the prompts do not come from); at T > 0 the exact chain.

Timing rules. The caches are filled with the prompt before each run, so runs time the
decode phase only. One untimed warm-up pass of every method, then ``repeats`` passes; in
each pass, for each prompt, the methods run in a seeded shuffled order (:func:`schedule`)
so that drift of a noisy machine hits all of them alike. The garbage collector is off
while a run is timed; every clock read is ``time.perf_counter``.

Statistics. A *cell* is one (prompt, repeat). A method's speedup in a cell is its
tokens/s over the autoregressive tokens/s at the same temperature in the same cell;
``speedup`` is the median over cells and ``speedup_ci`` a percentile-bootstrap 95%
interval of that median (:func:`bootstrap_ci`).

Cost curve. T(n) is the median time of one ``target.forward`` over n new tokens after a
cached prefix as long as the average decoding context (prompt + half the new tokens),
for n = 1 .. the largest verification block, timed in short back-to-back bursts (warm
caches, as in the decode loops; :func:`cost_curve`); r(n) = T(n)/T(1). The draft cost is
c = T_draft(1)/T(1) for the draft GPT and c_ngram for one n-gram ``last_probs`` row; one
Medusa heads call costs c_heads = T_heads/T(1).

Costs as the runs paid them. The meter (below) times every forward inside the timed
runs; ``in_run_costs`` turns the means into r_run(n) = T_run(n)/T_run(1) for every size
the runs made and c, c_ngram, c_heads over the same T_run(1) (:func:`in_run_ratios`).
They average thousands of forwards spread over the whole run, at every context length
the decoders saw, with the caches as decoding leaves them; the isolated curve is a few
hundred forwards timed at one moment after the runs, with warm caches. On a machine
whose speed drifts the isolated curve moves between runs far more than the in-run one
does, so the predictions below price every forward at its in-run cost.

Predictions (Leviathan et al. Thm 3.8 with the measured verification cost):

* speculative: ``predicted_speedup`` = E(α, k) / (k·c + r(k+1)) with
  E(α, k) = (1 − α^(k+1)) / (1 − α) (:func:`predicted_speedup`); c_ngram for ``ngram``;
* Medusa exact chain of depth D: E(α, D) / (c_heads + r(D+1));
* Medusa greedy tree of N nodes (root included): no closed form in α, so the prediction
  uses the measured τ: τ / (c_heads + r(N)).

``predicted_speedup_tau`` = τ / (step cost) for every method: it drops the i.i.d.
acceptance assumption, so the gap between the two predictions is the assumption's
error and the gap between ``predicted_speedup_tau`` and ``speedup`` is the cost model's
(engine overhead, draft catch-up calls of 2 tokens, the spread of cells).
Both use the in-run costs; ``predicted_speedup_isolated`` is ``predicted_speedup`` with
the isolated cost curve and c instead. ``measured_over_predicted`` = speedup /
predicted_speedup. SIMULATED rows use the SIMULATED cost model and the isolated c.

Engine overhead: the target's and draft's ``forward``, the n-gram's ``last_probs`` and the
heads' ``logits`` are timed by :class:`ForwardMeter`; overhead = 1 − forward time / wall
time. The meter also records the mean forward cost per size inside the runs
(``cost_curve.in_run``), to compare with the isolated cost curve. ``profile`` splits one
cProfile'd run of a few methods into the forwards and the engine functions that cost the
most (:func:`profile_split`).

SIMULATED accelerator (``simulate_width=W``), for teaching: a target forward over n
tokens costs ceil(n / W) × T(1), the same for every n ≤ W (the memory-bound regime of a
GPU at batch 1); a draft forward costs c × T(1), an n-gram row c_ngram × T(1) and a heads
call c_heads × T(1), as measured here. Simulated time is computed from the forwards recorded in
the same runs. Simulated rows have ``"simulated": true`` and labels starting with
``SIMULATED``; they are never used for the bars.

JSON schema (``BenchResult.to_json``; a float is ``null`` where it does not apply)::

    {
      "schema": "specdec_lite.bench/1",
      "timestamp": ISO 8601 UTC,
      "machine": {"platform", "python", "cpu_model", "cpu_count", "numpy",
                  "blas_threads": {env var: value}, "load_average": [3 floats]},
      "settings": {"ks", "trees", "temperatures", "prompts", "prompt_len", "new_tokens",
                   "repeats", "seed", "simulate_width", "cost_repeats", "quick"},
      "models": {"target": config, "draft": config, "heads": int,
                 "ngram": {"order": int, "smoothing": str, "fitted_on": str} | null,
                 "source": str},
      "cost_curve": {"prefix": int, "n": [int], "target_s": [float], "ratio": [float],
                     "draft_s": float, "heads_s": float | null, "ngram_s": float | null,
                     "in_run": {"target" | "draft" | "heads" | "ngram":
                                [[n, mean seconds, calls]]}},
      "in_run_costs": {"n": [int], "ratio": [float], "c": float | null,
                       "c_ngram": float | null, "c_heads": float | null},
      "c": float, "c_heads": float | null, "c_ngram": float | null,
      "alpha_text": {"greedy": float, "T=1": float,    (target vs draft GPT on held-out text)
                     "ngram": {"greedy": float, "T=1": float}},   (target vs n-gram)
      "head_accuracy": [[float]]                     ([heads, ranks], held-out text),
      "rows": [{"method": "autoregressive" | "speculative" | "ngram" | "medusa", "label": str,
                "k": int | null, "tree_nodes": int | null, "rule": str,
                "temperature": float, "simulated": bool,
                "speedup": float, "speedup_ci": [float, float],
                "predicted_speedup": float | null, "predicted_speedup_tau": float | null,
                "predicted_speedup_isolated": float | null,
                "measured_over_predicted": float | null,
                "alpha": float | null, "tau": float, "tokens_per_s": float,
                "target_calls": float, "draft_calls": float    (means per generation),
                "overhead": float | null, "matches_autoregressive": float | null,
                "n_runs": int}],
      "profile": {label: {"wall_s", "forward_s", "engine": [[function, seconds]]}},
      "greedy_loops": float   (fraction of greedy AR outputs that end in a loop),
      "bars": [{"name", "threshold", "value", "status": "PASS" | "MISS" | "n/a"}],
      "notes": [str],
      "runs": [{"label", "prompt", "repeat", "wall_s", "forward_s", "tokens",
                "target_calls", "draft_calls", "accepted", "checked", "sim_s"}],
      "comparison": {"reference": timestamp, "new": timestamp,     (only with --compare;
                     "rows": [{"label", "reference": [median, lo, hi],   see compare_runs)
                               "new": [median, lo, hi], "in_reference_ci": bool,
                               "overlap": bool}],
                     "in_reference_ci": int, "overlap": int,
                     "costs": {name: [reference, new]}}
    }
"""

from __future__ import annotations

import cProfile
import ctypes
import gc
import json
import math
import os
import platform
import pstats
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .corpus import load_text
from .decode import Generation, generate, speculative_generate
from .distributions import overlap
from .medusa import (
    MedusaHeads,
    Tree,
    chain_tree,
    medusa_generate,
    sparse_tree,
    top_k_accuracy,
)
from .models import NGramModel
from .theory import expected_speedup, expected_tokens_per_step
from .transformer import TransformerModel

SCHEMA = "specdec_lite.bench/1"
BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
N_BOOT = 2000


@dataclass(frozen=True)
class Settings:
    """What to run. ``trees`` are Medusa sparse-tree sizes (nodes, root excluded)."""

    ks: tuple[int, ...] = (1, 2, 3, 4, 6, 8)
    trees: tuple[int, ...] = (4, 8, 16)
    temperatures: tuple[float, ...] = (0.0, 1.0)
    prompts: int = 10
    prompt_len: int = 96
    new_tokens: int = 128
    repeats: int = 3
    seed: int = 0
    simulate_width: int | None = None
    cost_repeats: int = 30
    quick: bool = False

    def as_json(self) -> dict:
        """The settings as they appear in a JSON result (lists for tuples)."""
        return json.loads(json.dumps(asdict(self)))

    def check(self) -> Settings:
        """Raise ``ValueError`` naming the first bad setting; return ``self``."""
        if not self.ks or min(self.ks) < 1:
            raise ValueError(f"k values must be >= 1, got {list(self.ks)}")
        if min(self.trees, default=1) < 1:
            raise ValueError(f"Medusa tree sizes must be >= 1, got {list(self.trees)}")
        if not self.temperatures or any(not t >= 0 or math.isinf(t) for t in self.temperatures):
            raise ValueError(f"temperatures must be finite and >= 0, got {self.temperatures}")
        for name in ("prompts", "prompt_len", "new_tokens", "repeats", "cost_repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.simulate_width is not None and self.simulate_width < 1:
            raise ValueError(f"simulate_width must be >= 1, got {self.simulate_width}")
        return self


QUICK = Settings(ks=(2, 4), trees=(8,), prompts=2, prompt_len=64, new_tokens=48, repeats=2,
                 cost_repeats=10, quick=True)


@dataclass
class Models:
    """The models a benchmark decodes with (``load_pretrained()`` gives the shipped ones)."""

    target: TransformerModel
    draft: TransformerModel
    heads: MedusaHeads | None
    tokenizer: object
    ngram: NGramModel | None = None
    source: str = "specdec_lite.load_pretrained()"


NGRAM_ORDER = 8  # the n-gram draft conditions on the last 7 characters


def load_models() -> Models:
    """The shipped target, draft GPT and heads, plus an order-``NGRAM_ORDER`` Witten–Bell
    n-gram fitted on the training split (about 1.5 s) as a second, nearly free draft."""
    from .pretrained import load_pretrained

    shipped = load_pretrained()
    ids = shipped.tokenizer.encode(load_text("train"))
    ngram = NGramModel(NGRAM_ORDER, shipped.tokenizer.vocab_size).fit(ids)
    return Models(shipped.target, shipped.draft, shipped.heads, shipped.tokenizer, ngram)


# ---------------------------------------------------------------- pure helpers


def choose_prompts(text: str, n: int, length: int, seed: int) -> list[str]:
    """``n`` distinct slices ``text[s : s + length]``, s the start of a non-blank line."""
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    starts = [s for s in starts if s + length <= len(text) and text[s : s + 1].strip()]
    if len(starts) < n:
        raise ValueError(f"prompts: the text has only {len(starts)} usable line starts")
    chosen = np.sort(np.random.default_rng(seed).choice(starts, size=n, replace=False))
    return [text[s : s + length] for s in chosen]


def schedule(n_methods: int, n_prompts: int, repeats: int,
             seed: int) -> list[tuple[int, int, int]]:
    """(repeat, prompt, method) triples: for each repeat and prompt, every method once, in
    an order shuffled by ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return [(r, p, int(m)) for r in range(repeats) for p in range(n_prompts)
            for m in rng.permutation(n_methods)]


def bootstrap_ci(values: Sequence[float], seed: int = 0, n_boot: int = N_BOOT,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median of ``values`` [m]."""
    x = np.asarray(values, dtype=np.float64)  # [m]
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    medians = np.median(x[idx], axis=1)  # [n_boot]
    lo, hi = np.quantile(medians, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def predicted_speedup(alpha: float, k: int, c: float, verify_ratio: float) -> float:
    """E(α, k) / (k·c + r): Thm 3.8 with a measured verification cost r = T(k+1)/T(1)."""
    return float(expected_speedup(alpha, k, c, verify_cost=verify_ratio))


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


def profile_split(stats: dict, is_forward: Callable[[tuple], bool],
                  top: int = 8) -> tuple[float, float, list[tuple[str, float]]]:
    """Split a cProfile run (``pstats.Stats(...).stats``) into forward and engine time.

    ``is_forward(func)`` marks the model forwards. A function's time counts as forward to
    the extent its callers' does (cProfile keeps caller→callee edges, not the call tree,
    so shared helpers are split in proportion to the edges' cumulative time).
    Returns (total seconds, forward seconds, the ``top`` engine functions by own time).
    """
    inside = {f: 1.0 for f in stats if is_forward(f)}
    for _ in range(20):  # propagate down the call graph (its depth is small)
        for f, (_, _, _, ct, callers) in stats.items():
            if not is_forward(f):
                share = sum(edge[3] * inside.get(c, 0.0) for c, edge in callers.items())
                inside[f] = min(1.0, share / ct) if ct > 0 else 0.0
    total = sum(tt for _, _, tt, _, _ in stats.values())
    forward = sum(stats[f][3] for f in stats if is_forward(f))
    engine = Counter()
    for f, (_, _, tt, _, _) in stats.items():
        engine[function_name(f)] += tt * (1.0 - inside[f])
    return total, forward, [(name, s) for name, s in engine.most_common(top) if s > 0]


def function_name(func: tuple[str, int, str]) -> str:
    """``module:function`` for a cProfile key; C functions as ``numpy.ufunc.reduce`` etc."""
    path, _, name = func
    if path != "~":
        return f"{Path(path).stem}:{name}"
    method = re.fullmatch(r"<method '(\w+)' of '([\w.]+)' objects>", name)
    if method:
        return f"{method[2]}.{method[1]}"
    builtin = re.fullmatch(r"<built-in method ([\w.]+)>", name)
    return builtin[1] if builtin else name


# ---------------------------------------------------------------- methods and metering


@dataclass(frozen=True)
class Method:
    """One decoding configuration; the rule follows the temperature."""

    kind: str  # "autoregressive" | "speculative" | "ngram" | "medusa"
    temperature: float
    k: int | None = None  # draft tokens (speculative) or chain depth (Medusa exact)
    tree_nodes: int | None = None  # Medusa greedy: sparse-tree size, root excluded

    @property
    def rule(self) -> str:
        return "greedy" if self.temperature == 0 else "exact"

    @property
    def label(self) -> str:
        t = f"T={self.temperature:g}"
        if self.kind == "speculative":
            return f"speculative k={self.k} {self.rule} {t}"
        if self.kind == "ngram":
            return f"n-gram draft k={self.k} {self.rule} {t}"
        if self.kind == "medusa":
            size = f"tree {self.tree_nodes}" if self.tree_nodes else f"chain {self.k}"
            return f"medusa {size} {self.rule} {t}"
        return f"autoregressive {t}"


def build_methods(settings: Settings, n_heads: int | None,
                  ngram: bool = False) -> list[Method]:
    """Per temperature: AR, speculative per k (and with the n-gram draft per k if
    ``ngram``), Medusa (trees at T = 0, the chain above)."""
    methods = []
    for t in settings.temperatures:
        methods.append(Method("autoregressive", t))
        methods += [Method("speculative", t, k=k) for k in settings.ks]
        if ngram:
            methods += [Method("ngram", t, k=k) for k in settings.ks]
        if n_heads and t == 0:
            methods += [Method("medusa", t, tree_nodes=n) for n in settings.trees]
        elif n_heads:
            methods.append(Method("medusa", t, k=n_heads))
    return methods


class ForwardMeter:
    """Times every ``forward`` of the target and draft, every heads ``logits`` call and
    every n-gram ``last_probs`` call (counted as one row: the decoders ask for one).

    Used as a context manager: the methods are shadowed by timing wrappers on the
    instances and restored on exit. Per run (see ``reset``): ``seconds`` in all of them,
    and ``calls`` and ``call_s``, the number and seconds of calls keyed by
    (``"target"`` | ``"draft"`` | ``"heads"``, tokens or rows).
    """

    def __init__(self, models: Models) -> None:
        self.models = models
        self.reset()

    def reset(self) -> None:
        self.seconds = 0.0
        self.calls: Counter = Counter()
        self.call_s: Counter = Counter()

    def _wrap(self, who: str, method: Callable) -> Callable:
        clock = time.perf_counter

        def timed(first: np.ndarray, *args: object, **kwargs: object) -> object:
            start = clock()
            out = method(first, *args, **kwargs)
            elapsed = clock() - start
            key = (who, 1 if who == "ngram" else len(first))
            self.seconds += elapsed
            self.calls[key] += 1
            self.call_s[key] += elapsed
            return out

        return timed

    def _methods(self) -> list[tuple[str, object, str]]:
        m = self.models
        return [("target", m.target, "forward"), ("draft", m.draft, "forward"),
                ("heads", m.heads, "logits"), ("ngram", m.ngram, "last_probs")]

    def __enter__(self) -> ForwardMeter:
        for who, obj, name in self._methods():
            if obj is not None:
                setattr(obj, name, self._wrap(who, getattr(obj, name)))
        return self

    def __exit__(self, *exc: object) -> None:
        for _, obj, name in self._methods():
            if obj is not None and name in vars(obj):
                delattr(obj, name)


def in_run_costs(calls: Counter, call_s: Counter) -> dict:
    """Mean seconds per call as observed inside the runs: {who: [[n, seconds, calls]]}."""
    out: dict[str, list] = {}
    for (who, n), count in sorted(calls.items()):
        out.setdefault(who, []).append([n, call_s[(who, n)] / count, count])
    return out


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


@dataclass
class BenchResult:
    """Everything :func:`run` measured; ``to_json()`` is the documented schema."""

    settings: Settings
    models: dict
    cost_curve: dict
    in_run_costs: dict
    c: float
    c_heads: float | None
    c_ngram: float | None
    alpha_text: dict
    head_accuracy: list
    rows: list[Row]
    profile: dict
    greedy_loops: float | None
    machine: dict
    timestamp: str
    notes: list[str] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    def to_json(self) -> dict:
        data = {"schema": SCHEMA, "timestamp": self.timestamp, "machine": self.machine,
                "settings": self.settings.as_json(), "models": self.models,
                "cost_curve": self.cost_curve, "in_run_costs": self.in_run_costs,
                "c": self.c, "c_heads": self.c_heads,
                "c_ngram": self.c_ngram,
                "alpha_text": self.alpha_text, "head_accuracy": self.head_accuracy,
                "rows": [asdict(r) | {"speedup_ci": list(r.speedup_ci)} for r in self.rows],
                "profile": self.profile, "greedy_loops": self.greedy_loops,
                "notes": self.notes, "runs": [asdict(r) for r in self.runs]}
        data["bars"] = evaluate_bars(data)
        return json.loads(json.dumps(data))  # plain JSON types (tuples become lists)


# ---------------------------------------------------------------- measuring


def _decode(method: Method, models: Models, trees: dict[Method, Tree], prompt: np.ndarray,
            new_tokens: int, seed: int) -> Generation:
    t = method.temperature
    if method.kind == "autoregressive":
        return generate(models.target, prompt, max_new_tokens=new_tokens, temperature=t,
                        seed=seed)
    if method.kind in ("speculative", "ngram"):
        draft = models.draft if method.kind == "speculative" else models.ngram
        return speculative_generate(models.target, draft, prompt, k=method.k,
                                    max_new_tokens=new_tokens, temperature=t,
                                    rule=method.rule, seed=seed)
    return medusa_generate(models.target, models.heads, prompt, max_new_tokens=new_tokens,
                           temperature=t, tree=trees[method], rule=method.rule, seed=seed)


def _prefill(models: Models, prompt: np.ndarray) -> None:
    """Cache the prompt in both models (a no-op when it is already the cached prefix)."""
    models.target.probs(prompt)
    models.draft.probs(prompt)


def calibrate(models: Models, windows: list[np.ndarray],
              top: int = 3) -> tuple[np.ndarray | None, dict]:
    """Heads' top-``top`` accuracies [H, top] and target/draft α on held-out windows
    (``alpha["ngram"]``: target vs the n-gram draft, if there is one).

    α at T = 0 is how often the two argmaxes agree; at T = 1 it is E[Σ min(p, q)].
    """
    drafts = {"draft": models.draft} | ({"ngram": models.ngram} if models.ngram else {})
    acc, greedy, overlaps = [], {name: [] for name in drafts}, {name: [] for name in drafts}
    for w in windows:
        p = models.target.probs(w)  # [n, V]
        for name, draft in drafts.items():
            q = draft.probs(w)  # [n, V]
            greedy[name].append(np.mean(p.argmax(1) == q.argmax(1)))
            overlaps[name].append(overlap(p, q).mean())
        if models.heads is not None:
            hidden = models.target.hidden(w)  # [n, d]
            acc.append(top_k_accuracy(models.heads, hidden, w, top=top))
    alpha = {name: {"greedy": float(np.mean(greedy[name])), "T=1": float(np.mean(overlaps[name]))}
             for name in drafts}
    alpha = alpha.pop("draft") | alpha
    return (np.mean(acc, axis=0) if acc else None), alpha


def cost_curve(models: Models, prefix: np.ndarray, n_max: int, repeats: int, seed: int,
               burst: int = 4) -> tuple[np.ndarray, float, float | None, float | None]:
    """Median seconds of target forwards over n = 1..n_max new tokens [n_max], of a draft
    forward over one token, of one heads call and of one n-gram ``last_probs`` row after
    ``prefix`` (None for a model that is absent), after ``prefix`` is cached.

    Every repetition runs all probes in a seeded shuffled order; repetition 0 is warm-up.
    Each probe runs ``burst`` times back to back and the first, cold call is not counted:
    the decoders also call a model several times in a row (k drafts, one token after
    another), and a single call after a different model's forward pays for cold caches.
    """
    target, draft, heads, ngram = models.target, models.draft, models.heads, models.ngram
    new = np.resize(prefix[::-1], n_max)  # [n_max] any valid tokens
    hidden = target.hidden(prefix)[-1:]  # [1, d]
    draft.probs(prefix)
    probes: list[Callable[[], object]] = []
    for n in range(1, n_max + 1):
        probes.append(lambda n=n: target.forward(new[:n]))
    probes.append(lambda: draft.forward(new[:1]))
    if heads is not None:
        probes.append(lambda: heads.logits(hidden))
    if ngram is not None:
        probes.append(lambda: ngram.last_probs(prefix))
    rng = np.random.default_rng(seed)
    times = np.zeros((repeats, len(probes), burst - 1))  # [repeats, probes, warm calls]
    for rep in range(repeats + 1):
        for i in rng.permutation(len(probes)):
            for j in range(burst):
                start = time.perf_counter()
                probes[i]()
                elapsed = time.perf_counter() - start
                target.cache.truncate(len(prefix))
                draft.cache.truncate(len(prefix))
                if rep and j:
                    times[rep - 1, i, j - 1] = elapsed
    med = list(np.median(times, axis=(0, 2)))
    heads_s = float(med.pop(n_max + 1)) if heads is not None else None
    ngram_s = float(med.pop(n_max + 1)) if ngram is not None else None
    return np.array(med[:n_max]), float(med[n_max]), heads_s, ngram_s


def profile_method(method: Method, models: Models, trees: dict, prompt: np.ndarray,
                   new_tokens: int, seed: int) -> dict:
    """cProfile one run of ``method``: wall, forward seconds and the top engine functions."""
    _prefill(models, prompt)
    profiler = cProfile.Profile()
    profiler.enable()
    _decode(method, models, trees, prompt, new_tokens, seed)
    profiler.disable()
    stats = pstats.Stats(profiler).stats

    def is_forward(f: tuple) -> bool:
        return (f[2] == "forward" and f[0].endswith("transformer.py")) or (
            f[2] == "logits" and f[0].endswith("medusa.py")) or (
            f[2] == "last_probs" and f[0].endswith("models.py"))

    total, forward, engine = profile_split(stats, is_forward)
    return {"wall_s": total, "forward_s": forward, "engine": engine}


_PINNED_THREADS: int | None = None  # set by pin_blas_threads


def pin_blas_threads(n: int = 1) -> bool:
    """Limit the OpenBLAS that numpy loaded to ``n`` threads now (what OPENBLAS_NUM_THREADS=n
    does at start-up). Small matrices run slower, and far noisier, on several threads.
    Returns False where no OpenBLAS is found (then set the environment variable)."""
    global _PINNED_THREADS
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return False
    done = False
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, name):
                getattr(lib, name)(ctypes.c_int(n))
                done = True
                break
    if done:
        _PINNED_THREADS = n
    return done


def machine_info() -> dict:
    """Platform, CPU model, numpy version, BLAS thread settings and load average."""
    cpu = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpu_model": cpu, "cpu_count": os.cpu_count(), "numpy": np.__version__,
            "blas_threads": {v: os.environ[v] for v in BLAS_VARS if v in os.environ}
            | ({"set at run time": str(_PINNED_THREADS)} if _PINNED_THREADS else {}),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool) -> object:
    """A tqdm bar on stderr (tqdm imported lazily: the library needs numpy only)."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc="bench", unit="run", file=sys.stderr, leave=False)


def run(settings: Settings | None = None, models: Models | None = None, *,
        progress: bool = True) -> BenchResult:
    """Run the benchmark (see the module docstring); ``models`` default to the shipped ones."""
    s = (settings or Settings()).check()
    models = models or load_models()
    limit = min(models.target.config.max_len, models.draft.config.max_len)
    tail = max(max(s.ks) + 1, models.heads.n_heads if models.heads else 0)
    if s.prompt_len + s.new_tokens + tail > limit:
        raise ValueError(f"prompt_len + new_tokens = {s.prompt_len + s.new_tokens} leaves no "
                         f"room for k/tree depth {tail} in the models' max_len {limit}")
    tok = models.tokenizer
    text = load_text("heldout")
    split = len(text) // 4  # trees and α_text from text[:split], prompts from the rest
    calib = [tok.encode(t) for t in choose_prompts(text[:split], 8, limit, s.seed + 1)]
    acc, alpha_text = calibrate(models, calib)
    n_heads = models.heads.n_heads if models.heads is not None else None
    methods = build_methods(s, n_heads, ngram=models.ngram is not None)
    trees = {m: sparse_tree(acc, m.tree_nodes) if m.tree_nodes else chain_tree(m.k)
             for m in methods if m.kind == "medusa"}
    texts = choose_prompts(text[split:], s.prompts, s.prompt_len + s.new_tokens, s.seed)
    prompts = [tok.encode(t)[: s.prompt_len] for t in texts]

    order = [(-1, 0, m) for m in range(len(methods))] + schedule(
        len(methods), s.prompts, s.repeats, s.seed)
    bar = _progress(len(order), progress)
    runs: list[Run] = []
    calls: dict[tuple[str, int, int], Counter] = {}  # forwards of each run
    all_calls, all_call_s = Counter(), Counter()  # over every timed run
    outputs: dict[tuple[str, int, int], tuple] = {}
    try:
        with ForwardMeter(models) as meter:
            for repeat, p, m in order:
                method = methods[m]
                seed = int(np.random.SeedSequence([s.seed, p, max(repeat, 0)])
                           .generate_state(1)[0])
                _prefill(models, prompts[p])
                meter.reset()
                gc.collect()
                gc.disable()
                start = time.perf_counter()
                gen = _decode(method, models, trees, prompts[p], s.new_tokens, seed)
                wall = time.perf_counter() - start
                gc.enable()
                bar.update(1)
                if repeat < 0:
                    continue
                key = (method.label, p, repeat)
                runs.append(Run(method.label, p, repeat, wall, meter.seconds, len(gen.tokens),
                                gen.target_calls, gen.draft_calls, sum(gen.accepted),
                                gen.checked))
                calls[key] = meter.calls.copy()
                all_calls.update(meter.calls)
                all_call_s.update(meter.call_s)
                outputs[key] = tuple(gen.tokens.tolist())
    finally:
        gc.enable()
        bar.close()

    n_max = max([k + 1 for k in s.ks] + [t.n_nodes for t in trees.values()])
    prefix = tok.encode(texts[0])[: s.prompt_len + s.new_tokens // 2]
    target_s, draft_s, heads_s, ngram_s = cost_curve(models, prefix, n_max, s.cost_repeats,
                                                     s.seed)
    curve = {"prefix": len(prefix), "n": list(range(1, n_max + 1)),
             "target_s": target_s.tolist(), "ratio": (target_s / target_s[0]).tolist(),
             "draft_s": draft_s, "heads_s": heads_s, "ngram_s": ngram_s,
             "in_run": in_run_costs(all_calls, all_call_s)}
    c = draft_s / target_s[0]
    c_heads = heads_s / target_s[0] if heads_s is not None else None
    c_ngram = ngram_s / target_s[0] if ngram_s is not None else None
    costs = {"speculative": c, "ngram": c_ngram, "medusa": c_heads}
    paid = in_run_ratios(curve["in_run"])

    rows = [summarise(m, runs, outputs, curve, costs, trees, s.seed, in_run=paid)
            for m in methods]
    if s.simulate_width:
        for r in runs:
            run_calls = calls[(r.label, r.prompt, r.repeat)]
            target = Counter({n: k for (who, n), k in run_calls.items() if who == "target"})
            n_draft = sum(k for (who, _), k in run_calls.items() if who == "draft")
            n_heads_calls = sum(k for (who, _), k in run_calls.items() if who == "heads")
            n_ngram = sum(k for (who, _), k in run_calls.items() if who == "ngram")
            units = simulated_units(target, s.simulate_width, n_draft, c, n_heads_calls,
                                    c_heads or 0.0, n_ngram, c_ngram or 0.0)
            r.sim_s = units * target_s[0]
        rows += [summarise(m, runs, outputs, curve, costs, trees, s.seed, s.simulate_width)
                 for m in methods]
    profile = {}
    for method in _profiled(methods, rows):
        profile[method.label] = profile_method(method, models, trees, prompts[0],
                                               s.new_tokens, s.seed)
    ar_greedy = [out for (label, _, _), out in outputs.items()
                 if label == Method("autoregressive", 0.0).label]
    loops = float(np.mean([ends_in_loop(o) for o in ar_greedy])) if ar_greedy else None
    notes = [f"trees and alpha_text from {len(calib)} windows of the first quarter of the "
             "held-out split; prompts from the rest",
             "cost curve: target forwards with a causal mask (Medusa verifies with a tree "
             "mask over the same number of tokens)"]
    if not machine_info()["blas_threads"]:
        notes.append("BLAS threads not pinned: set OPENBLAS_NUM_THREADS=1 for stable timings")
    ngram_info = None if models.ngram is None else {
        "order": models.ngram.order, "smoothing": models.ngram.smoothing,
        "fitted_on": "the training split of the bundled corpus"}
    model_info = {"target": asdict(models.target.config), "draft": asdict(models.draft.config),
                  "heads": n_heads, "ngram": ngram_info, "source": models.source}
    return BenchResult(s, model_info, curve, paid, float(c), c_heads, c_ngram, alpha_text,
                       acc.tolist() if acc is not None else [], rows, profile, loops,
                       machine_info(), datetime.now(UTC).isoformat(timespec="seconds"),
                       notes, runs)


def _profiled(methods: list[Method], rows: list[Row]) -> list[Method]:
    """AR at T = 0 and the fastest speculative and Medusa method at each temperature."""
    real = {r.label: r for r in rows if not r.simulated}
    chosen = [m for m in methods if m.kind == "autoregressive" and m.temperature == 0]
    for kind in ("speculative", "ngram", "medusa"):
        for t in sorted({m.temperature for m in methods}):
            group = [m for m in methods if m.kind == kind and m.temperature == t]
            if group:
                chosen.append(max(group, key=lambda m: real[m.label].speedup))
    return chosen


def verify_ratio(curve: dict, n: int, width: int | None = None) -> float | None:
    """r(n) = T(n)/T(1) from a cost curve (``{"n": [sizes], "ratio": [r]}``: the isolated
    ``cost_curve`` or the ``in_run_costs``), None where n was not measured, or ceil(n/W)
    in the SIMULATED model."""
    if width is not None:
        return float(math.ceil(n / width))
    return dict(zip(curve["n"], curve["ratio"], strict=True)).get(n)


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


def summarise(method: Method, runs: list[Run], outputs: dict, curve: dict, costs: dict,
              trees: dict, seed: int, width: int | None = None,
              in_run: dict | None = None) -> Row:
    """One method's row: median per-cell speedup over AR (same temperature), its bootstrap
    CI, α, τ, overhead and the predictions. ``curve`` and ``costs`` (the draft cost per
    draft call of each kind: c, c_ngram, c_heads) are the isolated measurements,
    ``in_run`` the costs the runs paid (:func:`in_run_ratios`), which price
    ``predicted_speedup`` and ``predicted_speedup_tau`` of measured rows. ``width``: use
    the SIMULATED times and cost model."""
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
    pred, pred_tau = isolated = _predictions(method, alpha, tau, curve, costs, trees, width)
    if width is None and in_run is not None:
        paid = {"speculative": in_run["c"], "ngram": in_run["c_ngram"],
                "medusa": in_run["c_heads"]}
        pred, pred_tau = _predictions(method, alpha, tau, in_run, paid, trees, None)
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


def _predictions(method: Method, alpha: float | None, tau: float, curve: dict, costs: dict,
                 trees: dict, width: int | None) -> tuple[float | None, float | None]:
    """(predicted_speedup, predicted_speedup_tau); see the module docstring."""
    if method.kind == "autoregressive":
        return 1.0, 1.0
    if costs[method.kind] is None and method.kind != "medusa":
        return None, None
    if method.kind in ("speculative", "ngram"):
        n, draft_cost, depth = method.k + 1, method.k * costs[method.kind], method.k
    else:
        n, draft_cost, depth = (trees[method].n_nodes, costs["medusa"] or 0.0,
                                trees[method].max_depth)
    r = verify_ratio(curve, n, width)
    if r is None:
        return None, None
    by_tau = tau / (draft_cost + r)
    if method.kind == "medusa" and method.tree_nodes:
        return by_tau, by_tau
    if alpha is None:
        return None, by_tau
    return float(expected_tokens_per_step(alpha, depth)) / (draft_cost + r), by_tau


# ---------------------------------------------------------------- bars and reports


def evaluate_bars(data: dict) -> list[dict]:
    """The issue's performance bars on the measured rows of a JSON result (reported only)."""
    real = [r for r in data["rows"] if not r["simulated"]]

    def best(kinds: tuple[str, ...], temperature: float) -> float | None:
        values = [r["speedup"] for r in real
                  if r["method"] in kinds and r["temperature"] == temperature]
        return max(values, default=None)

    ratios = [r["measured_over_predicted"] for r in real
              if r["method"] != "autoregressive" and r["measured_over_predicted"]]
    worst = max(ratios, key=lambda x: abs(math.log(x)), default=None)
    overheads = [r["overhead"] for r in real if r["overhead"] is not None]
    drafts = ("speculative", "ngram")
    bars = [("draft-model greedy speedup, best draft and k", ">= 1.5", best(drafts, 0.0),
             lambda v: v >= 1.5),
            ("draft-model exact T=1 speedup, best draft and k", ">= 1.25", best(drafts, 1.0),
             lambda v: v >= 1.25),
            ("Medusa greedy speedup, best tree", ">= 1.3", best(("medusa",), 0.0),
             lambda v: v >= 1.3),
            ("measured / predicted, worst method", "0.85..1.15", worst,
             lambda v: 0.85 <= v <= 1.15),
            ("engine overhead, worst method", "<= 5%", max(overheads, default=None),
             lambda v: v <= 0.05)]
    return [{"name": name, "threshold": threshold, "value": value,
             "status": "n/a" if value is None else ("PASS" if ok(value) else "MISS")}
            for name, threshold, value, ok in bars]


def _f(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def format_table(data: dict) -> str:
    """The terminal report of a JSON result: rows (measured, then SIMULATED), cost curve,
    profile, bars and notes."""
    s, m = data["settings"], data["machine"]
    lines = [f"specdec_lite bench{' --quick' if s['quick'] else ''}: {s['prompts']} held-out "
             f"prompts x {s['repeats']} repeats, {s['new_tokens']} new tokens after "
             f"{s['prompt_len']}; {m['cpu_model']} ({m['cpu_count']} cores), "
             f"BLAS threads {m['blas_threads'] or 'default'}"]
    head = (f"{'method':<38}{'speedup':>8} {'95% CI':>13} {'pred':>6} {'pred(tau)':>9} "
            f"{'pred(iso)':>9} {'meas/pred':>9} {'alpha':>6} {'tau':>5} {'tok/s':>7} "
            f"{'overhead':>8}")
    for simulated in (False, True):
        rows = [r for r in data["rows"] if r["simulated"] == simulated]
        if not rows:
            continue
        title = (f"SIMULATED accelerator, width {s['simulate_width']}: a target forward over "
                 f"n <= {s['simulate_width']} tokens costs T(1); times computed, not measured"
                 if simulated else "measured (wall clock, medians over cells)")
        lines += ["", title, head, "-" * len(head)]
        for r in rows:
            ci = "[{:.2f},{:.2f}]".format(*r["speedup_ci"])
            lines.append(f"{r['label']:<38}{r['speedup']:>8.2f} {ci:>13} "
                         f"{_f(r['predicted_speedup']):>6} {_f(r['predicted_speedup_tau']):>9} "
                         f"{_f(r['predicted_speedup_isolated']):>9} "
                         f"{_f(r['measured_over_predicted']):>9} "
                         f"{_f(r['alpha'], '.3f'):>6} {r['tau']:>5.2f} "
                         f"{r['tokens_per_s']:>7.0f} {_f(r['overhead'], '.1%'):>8}")
    curve = data["cost_curve"]
    ratio = " ".join(f"{n}:{x:.2f}" for n, x in zip(curve["n"], curve["ratio"], strict=True))
    lines += ["", f"cost curve after a {curve['prefix']}-token prefix: T(1) = "
              f"{curve['target_s'][0] * 1e3:.3f} ms; T(n)/T(1) = {ratio}",
              f"draft cost c = {data['c']:.3f}; n-gram draft c_ngram = "
              f"{_f(data.get('c_ngram'), '.3f')}; Medusa heads c_heads = "
              f"{_f(data['c_heads'], '.3f')}; alpha on held-out text: greedy "
              f"{data['alpha_text']['greedy']:.3f}, T=1 {data['alpha_text']['T=1']:.3f}"
              + ("" if "ngram" not in data["alpha_text"] else
                 f" (n-gram: greedy {data['alpha_text']['ngram']['greedy']:.3f}, "
                 f"T=1 {data['alpha_text']['ngram']['T=1']:.3f})")]
    paid = data["in_run_costs"]
    lines.append("costs in the runs (they price pred and pred(tau)): T_run(n)/T_run(1) = "
                 + " ".join(f"{n}:{x:.2f}" for n, x in zip(paid["n"], paid["ratio"], strict=True))
                 + f"; c = {_f(paid['c'], '.3f')}, c_ngram = {_f(paid['c_ngram'], '.3f')}, "
                 f"c_heads = {_f(paid['c_heads'], '.3f')}")
    lines.append(f"in-run / isolated forward cost: {in_run_summary(data)}")
    if data["greedy_loops"] is not None:
        lines.append(f"greedy AR outputs ending in a loop: {data['greedy_loops']:.0%}")
    for label, prof in data["profile"].items():
        engine = prof["wall_s"] - prof["forward_s"]
        top = ", ".join(f"{name} {sec / prof['wall_s']:.1%}" for name, sec in prof["engine"][:4])
        lines.append(f"profile {label}: forwards {prof['forward_s'] / prof['wall_s']:.0%}, "
                     f"engine {engine / prof['wall_s']:.0%} ({top})")
    lines += ["", "bars (reported, not asserted):"]
    for b in data["bars"]:
        value = _f(b["value"], ".1%" if "overhead" in b["name"] else ".2f")
        lines.append(f"  {b['name']:<38} {b['threshold']:<11} {value:>7}  {b['status']}")
    return "\n".join(lines + [f"note: {n}" for n in data["notes"]])


def in_run_summary(data: dict, min_calls: int = 20) -> str:
    """Mean forward cost inside the runs over the isolated cost curve, per size."""
    curve, parts = data["cost_curve"], []
    isolated = {"draft": curve["draft_s"], "heads": curve["heads_s"],
                "ngram": curve.get("ngram_s")}
    for who, entries in curve["in_run"].items():
        for n, seconds, count in entries:
            if count < min_calls:
                continue
            if who == "target":
                base = curve["target_s"][n - 1] if n <= len(curve["target_s"]) else None
            else:
                base = isolated[who] if n == 1 else None
            if base:
                parts.append(f"{who} n={n} {seconds / base:.2f}")
    return ", ".join(parts) or "-"


def markdown_summary(data: dict, comparison: dict | None = None) -> str:
    """The README's headline table of a JSON result, labelled with its machine, and a line
    on how a second run reproduced it if ``comparison`` (from :func:`compare_runs`, with
    this result as the reference) is given."""
    m, s = data["machine"], data["settings"]
    blas = ", ".join(f"{k}={v}" for k, v in m["blas_threads"].items()) or "default"
    lines = [f"Measured on {m['cpu_model']} ({m['cpu_count']} cores, numpy {m['numpy']}, "
             f"BLAS threads {blas}), {data['timestamp']}: {s['prompts']} held-out prompts "
             f"x {s['repeats']} repeats, {s['new_tokens']} new tokens each. "
             "Best setting per method; speedup is the median over (prompt, repeat) cells, "
             "with a bootstrap 95% CI. The predictions price every forward at its mean cost "
             "inside the runs; the isolated column uses the cost curve timed after them.",
             "",
             "| method | speedup | 95% CI | predicted | predicted from tau "
             "| predicted, isolated costs | measured / predicted | alpha | tau | overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    real = [r for r in data["rows"] if not r["simulated"]]
    groups: dict[tuple, list] = {}
    for r in real:
        groups.setdefault((r["method"], r["temperature"]), []).append(r)
    for rows in groups.values():
        r = max(rows, key=lambda r: r["speedup"])
        lines.append(f"| {r['label']} | {r['speedup']:.2f}x | "
                     "{:.2f}-{:.2f} | ".format(*r["speedup_ci"])
                     + f"{_f(r['predicted_speedup'])} | {_f(r['predicted_speedup_tau'])} | "
                     f"{_f(r['predicted_speedup_isolated'])} | "
                     f"{_f(r['measured_over_predicted'])} | "
                     f"{_f(r['alpha'], '.2f')} | {r['tau']:.2f} | {_f(r['overhead'], '.1%')} |")
    curve, paid = data["cost_curve"], data["in_run_costs"]
    sizes = [n for n in (2, 5, len(curve["n"])) if n <= len(curve["n"])]
    lines += ["", f"Isolated cost curve: T(1) = {curve['target_s'][0] * 1e3:.2f} ms, "
              + ", ".join(f"T({n})/T(1) = {verify_ratio(curve, n):.2f}" for n in sizes)
              + f"; draft cost c = {data['c']:.3f}"
              + ("" if data.get("c_ngram") is None else f", n-gram draft c = {data['c_ngram']:.3f}")
              + ". In the runs: "
              + ", ".join(f"T({n})/T(1) = {verify_ratio(paid, n):.2f}" for n in sizes
                          if verify_ratio(paid, n) is not None)
              + f"; c = {_f(paid['c'], '.3f')}"
              + ("" if paid["c_ngram"] is None else f", n-gram c = {paid['c_ngram']:.3f}")
              + ".", "",
              "| bar | threshold | value | status |", "| --- | --- | --- | --- |"]
    for b in data["bars"]:
        value = _f(b["value"], ".1%" if "overhead" in b["name"] else ".2f")
        lines.append(f"| {b['name']} | {b['threshold']} | {value} | {b['status']} |")
    if comparison is not None:
        if comparison["reference"] != data["timestamp"]:
            raise ValueError("comparison: its reference is not this result")
        n = len(comparison["rows"])
        lines += ["", f"Reproduction (`make bench-check`, a second full run at "
                  f"{comparison['new']}): {comparison['in_reference_ci']} of {n} second-run "
                  f"medians fall inside this run's 95% CI, and the two CIs overlap for "
                  f"{comparison['overlap']} of {n} methods."]
    return "\n".join(lines)


def check_comparable(reference: object, settings: dict) -> None:
    """Raise ``ValueError`` unless ``reference`` is a JSON result run with ``settings``
    (as in ``Settings.as_json``), naming the settings that differ."""
    if (not isinstance(reference, dict) or reference.get("schema") != SCHEMA
            or "rows" not in reference or not isinstance(reference.get("settings"), dict)):
        raise ValueError(f"the reference is not a {SCHEMA} result")
    ref = reference["settings"]
    differ = sorted(key for key in set(ref) | set(settings) if ref.get(key) != settings.get(key))
    if differ:
        raise ValueError(f"the reference run has different settings: {differ}")


def compare_runs(reference: dict, new: dict) -> dict:
    """How well a new run reproduces a reference run (two JSON results of the same settings).

    For every measured row in both: the two medians and 95% CIs, whether the new median
    lies inside the reference CI (``in_reference_ci``) and whether the two CIs overlap.
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
                     "overlap": lo <= new_hi and new_lo <= hi})
    curves = reference["cost_curve"], new["cost_curve"]
    paid = reference.get("in_run_costs"), new.get("in_run_costs")
    costs = {"T(1) ms": [c["target_s"][0] * 1e3 for c in curves]}
    for n in (2, 5, 9):
        costs[f"r({n})"] = [verify_ratio(c, n) for c in curves]
        costs[f"run r({n})"] = [verify_ratio(c, n) if c else None for c in paid]
    costs |= {name: [reference.get(name), new.get(name)] for name in ("c", "c_ngram", "c_heads")}
    costs |= {f"run {name}": [c[name] if c else None for c in paid] for name in ("c", "c_ngram")}
    costs = {name: pair for name, pair in costs.items() if None not in pair}
    return {"reference": reference["timestamp"], "new": new["timestamp"], "rows": rows,
            "in_reference_ci": sum(r["in_reference_ci"] for r in rows),
            "overlap": sum(r["overlap"] for r in rows), "costs": costs}


def format_comparison(comparison: dict) -> str:
    """The terminal report of :func:`compare_runs`."""
    n = len(comparison["rows"])
    lines = [f"reproduction: run of {comparison['new']} against the reference run of "
             f"{comparison['reference']}",
             f"{'method':<38}{'reference [95% CI]':>22}{'new [95% CI]':>22}  inside  overlap",
             "-" * 96]
    for r in comparison["rows"]:
        ref, new = ("{:.2f} [{:.2f},{:.2f}]".format(*r[key]) for key in ("reference", "new"))
        lines.append(f"{r['label']:<38}{ref:>22}{new:>22}  "
                     f"{'yes' if r['in_reference_ci'] else 'NO':>6}  "
                     f"{'yes' if r['overlap'] else 'NO':>7}")
    lines += ["", f"new median inside the reference CI: {comparison['in_reference_ci']} of {n} "
              f"rows; CIs overlap: {comparison['overlap']} of {n}",
              "costs (reference -> new): " + "; ".join(
                  f"{name} {_f(a, '.3f')} -> {_f(b, '.3f')}"
                  for name, (a, b) in comparison["costs"].items())]
    return "\n".join(lines)


def write_json(data: dict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def write_plots(data: dict, directory: str | Path) -> list[Path]:
    """Write the chapter's benchmark figures for a JSON result into ``directory``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import plots

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    figures = {"bench_speedup.png": plots.plot_bench_speedup(data),
               "bench_cost_curve.png": plots.plot_cost_curve(data),
               "bench_overhead.png": plots.plot_overhead_split(data)}
    if data["settings"]["simulate_width"]:
        figures["bench_speedup_simulated.png"] = plots.plot_bench_speedup(data, simulated=True)
    paths = []
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=110, bbox_inches="tight")
        plt.close(fig)
        paths.append(out / name)
    return paths


__all__ = ["QUICK", "BenchResult", "Method", "Models", "Settings", "bootstrap_ci",
           "check_comparable", "compare_runs", "evaluate_bars", "format_comparison",
           "format_table", "markdown_summary", "predicted_speedup", "run", "schedule",
           "simulated_units", "write_json", "write_plots"]
