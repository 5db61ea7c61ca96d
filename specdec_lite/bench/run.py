"""The benchmark run, step by step: plan, time, price, summarise, profile.

:func:`run` decodes the same held-out prompts with every method (:func:`plan`), times
every run with its forwards metered (:func:`time_runs`), times the isolated cost curve
after the runs (:func:`isolated_costs`), prices the SIMULATED accelerator from the
recorded forwards (:func:`price_simulated`), summarises each method into a row and
profiles a few of them. ``BenchResult.to_json()`` is the JSON result described in
:mod:`specdec_lite.bench.schema`.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime

import numpy as np

from ..drafting.medusa import Tree, chain_tree, sparse_tree, top_k_accuracy
from ..engine.decode import generate, speculative_generate
from ..engine.medusa_decode import medusa_generate
from ..engine.trace import Generation
from ..models.corpus import load_text
from ..models.ngram import NGramModel
from ..pretrained import Pretrained, load_pretrained
from ..rules.distributions import overlap
from .batch import batch_settings
from .batch import measure as measure_batch
from .config import (
    NGRAM_ORDER,
    Method,
    Settings,
    build_methods,
    choose_prompts,
    resolve_backend,
    schedule,
)
from .report import evaluate_bars
from .schema import SCHEMA
from .stats import Row, Run, ends_in_loop, in_run_ratios, simulated_units, summarise
from .timing import (
    ForwardMeter,
    cost_curve,
    in_run_costs,
    machine_info,
    overhead_split,
    profile_call,
)

SHIPPED = "specdec_lite.load_pretrained()"


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
    batch: dict | None = None  # throughput against batch size (bench.batch)

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
        if self.batch is not None:
            data["batch"] = self.batch
        data["bars"] = evaluate_bars(data)
        return json.loads(json.dumps(data))  # plain JSON types (tuples become lists)


def ngram_draft(tokenizer: object) -> NGramModel:
    """An order-``NGRAM_ORDER`` Witten–Bell n-gram fitted on the training split (about
    1.5 s): a second draft that costs almost nothing."""
    ids = tokenizer.encode(load_text("train"))
    return NGramModel(NGRAM_ORDER, tokenizer.vocab_size).fit(ids)


# ---------------------------------------------------------------- one generation


def decode(method: Method, models: Pretrained, ngram: NGramModel | None, trees: dict,
           prompt: np.ndarray, new_tokens: int, seed: int) -> Generation:
    """Generate ``new_tokens`` after ``prompt`` with ``method``, from caches that already
    hold the prompt (:func:`prefill`; the prompt's forward is not part of what is timed)."""
    target, draft = prefill(models, prompt)
    return decode_filled(method, target, draft, models.heads, ngram, trees, prompt,
                         new_tokens, seed)


def prefill(models: Pretrained, prompt: np.ndarray) -> tuple[object, object]:
    """The two GPTs, each on a new cache that holds ``prompt`` (its forward done here)."""
    target, draft = models.target.bound(), models.draft.bound()
    target.probs(prompt)
    draft.probs(prompt)
    return target, draft


def decode_filled(method: Method, target: object, draft: object, heads: object,
                  ngram: NGramModel | None, trees: dict, prompt: np.ndarray, new_tokens: int,
                  seed: int) -> Generation:
    """:func:`decode` on GPTs whose caches :func:`prefill` filled."""
    t = method.temperature
    if method.kind == "autoregressive":
        return generate(target, prompt, max_new_tokens=new_tokens, temperature=t, seed=seed)
    if method.kind in ("speculative", "ngram"):
        draft = draft if method.kind == "speculative" else ngram
        return speculative_generate(target, draft, prompt, k=method.k,
                                    max_new_tokens=new_tokens, temperature=t,
                                    rule=method.rule, seed=seed)
    return medusa_generate(target, heads, prompt, max_new_tokens=new_tokens, temperature=t,
                           tree=trees[method], rule=method.rule, seed=seed)


# ---------------------------------------------------------------- step 1: the plan


def calibrate(models: Pretrained, ngram: NGramModel | None, windows: list[np.ndarray],
              top: int = 3) -> tuple[np.ndarray | None, dict]:
    """Heads' top-``top`` accuracies [H, top] and target/draft α on held-out windows
    (``alpha["ngram"]``: target vs the n-gram draft, if there is one).

    α at T = 0 is how often the two argmaxes agree; at T = 1 it is E[Σ min(p, q)].
    """
    drafts = {"draft": models.draft} | ({"ngram": ngram} if ngram else {})
    acc, greedy, overlaps = [], {name: [] for name in drafts}, {name: [] for name in drafts}
    target = models.target.bound()  # the features below are read from the probs' cache
    for w in windows:
        p = target.probs(w)  # [n, V]
        for name, draft in drafts.items():
            q = draft.probs(w)  # [n, V]
            greedy[name].append(np.mean(p.argmax(1) == q.argmax(1)))
            overlaps[name].append(overlap(p, q).mean())
        if models.heads is not None:
            hidden = target.hidden(w)  # [n, d]
            acc.append(top_k_accuracy(models.heads, hidden, w, top=top))
    alpha = {name: {"greedy": float(np.mean(greedy[name])), "T=1": float(np.mean(overlaps[name]))}
             for name in drafts}
    alpha = alpha.pop("draft") | alpha
    return (np.mean(acc, axis=0) if acc else None), alpha


@dataclass
class Plan:
    """What a run decodes: the methods, their Medusa trees and the prompts, and what the
    calibration text measured."""

    methods: list[Method]
    trees: dict[Method, Tree]
    texts: list[str]  # each prompt with its held-out continuation
    prompts: list[np.ndarray]  # [prompt_len] token ids each
    head_accuracy: np.ndarray | None  # [H, ranks]
    alpha_text: dict
    n_windows: int  # calibration windows


def check_fits(s: Settings, models: Pretrained) -> int:
    """The models' shorter ``max_len``; ``ValueError`` if a run of ``s`` cannot fit in it."""
    limit = min(models.target.config.max_len, models.draft.config.max_len)
    tail = max(max(s.ks) + 1, models.heads.n_heads if models.heads else 0)
    if s.prompt_len + s.new_tokens + tail > limit:
        raise ValueError(f"prompt_len + new_tokens = {s.prompt_len + s.new_tokens} leaves no "
                         f"room for k/tree depth {tail} in the models' max_len {limit}")
    return limit


def plan(s: Settings, models: Pretrained, ngram: NGramModel | None) -> Plan:
    """Calibrate on the first quarter of the held-out split (heads' accuracies, hence the
    trees, and α on text), and choose the prompts from the rest."""
    limit = check_fits(s, models)
    tok = models.tokenizer
    text = load_text("heldout")
    split = len(text) // 4
    windows = [tok.encode(t) for t in choose_prompts(text[:split], 8, limit, s.seed + 1)]
    acc, alpha_text = calibrate(models, ngram, windows)
    n_heads = models.heads.n_heads if models.heads is not None else None
    methods = build_methods(s, n_heads, ngram=ngram is not None)
    trees = {m: sparse_tree(acc, m.tree_nodes) if m.tree_nodes else chain_tree(m.k)
             for m in methods if m.kind == "medusa"}
    texts = choose_prompts(text[split:], s.prompts, s.prompt_len + s.new_tokens, s.seed)
    prompts = [tok.encode(t)[: s.prompt_len] for t in texts]
    return Plan(methods, trees, texts, prompts, acc, alpha_text, len(windows))


# ---------------------------------------------------------------- step 2: the timed runs


@dataclass
class Timed:
    """The timed runs and the forwards the meter saw."""

    runs: list[Run]
    calls: dict[tuple[str, int, int], Counter]  # (label, prompt, repeat): forwards of a run
    all_calls: Counter  # (who, n): calls over every timed run
    all_call_s: Counter  # (who, n): their seconds
    outputs: dict[tuple[str, int, int], tuple]  # (label, prompt, repeat): tokens


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


def time_runs(p: Plan, s: Settings, models: Pretrained, ngram: NGramModel | None,
              progress: bool) -> Timed:
    """One untimed warm-up pass of every method, then the scheduled timed runs, each
    after a prefill of its prompt and with the garbage collector off."""
    methods = p.methods
    order = [(-1, 0, m) for m in range(len(methods))] + schedule(
        len(methods), s.prompts, s.repeats, s.seed)
    bar = _progress(len(order), progress)
    out = Timed([], {}, Counter(), Counter(), {})
    meter = ForwardMeter({"target": models.target, "draft": models.draft,
                          "heads": models.heads, "ngram": ngram})
    try:
        with meter:
            for repeat, prompt, m in order:
                method = methods[m]
                seed = int(np.random.SeedSequence([s.seed, prompt, max(repeat, 0)])
                           .generate_state(1)[0])
                target, draft = prefill(models, p.prompts[prompt])
                meter.reset()
                gc.collect()
                gc.disable()
                start = time.perf_counter()
                gen = decode_filled(method, target, draft, models.heads, ngram, p.trees,
                                    p.prompts[prompt], s.new_tokens, seed)
                wall = time.perf_counter() - start
                gc.enable()
                bar.update(1)
                if repeat < 0:
                    continue
                key = (method.label, prompt, repeat)
                out.runs.append(Run(method.label, prompt, repeat, wall, meter.seconds,
                                    len(gen.tokens), gen.n_target_calls,
                                    # a row's draft calls are Medusa's head calls for Medusa
                                    gen.n_draft_calls + gen.n_head_calls,
                                    gen.n_accepted, gen.n_checked))
                out.calls[key] = meter.calls.copy()
                out.all_calls.update(meter.calls)
                out.all_call_s.update(meter.call_s)
                out.outputs[key] = tuple(gen.tokens.tolist())
    finally:
        gc.enable()
        bar.close()
    return out


# ---------------------------------------------------------------- step 3: the costs


def isolated_costs(p: Plan, s: Settings, models: Pretrained, ngram: NGramModel | None,
                   timed: Timed) -> dict:
    """The ``cost_curve`` field: the isolated cost curve, timed after the runs on the first
    prompt's context, and the costs the runs paid (``in_run``)."""
    n_max = max([k + 1 for k in s.ks] + [t.n_nodes for t in p.trees.values()])
    prefix = models.tokenizer.encode(p.texts[0])[: s.prompt_len + s.new_tokens // 2]
    target_s, draft_s, heads_s, ngram_s = cost_curve(models, ngram, prefix, n_max,
                                                     s.cost_repeats, s.seed)
    return {"prefix": len(prefix), "n": list(range(1, n_max + 1)),
            "target_s": target_s.tolist(), "ratio": (target_s / target_s[0]).tolist(),
            "draft_s": draft_s, "heads_s": heads_s, "ngram_s": ngram_s,
            "in_run": in_run_costs(timed.all_calls, timed.all_call_s)}


def price_simulated(timed: Timed, width: int, t1: float, c: float, c_heads: float | None,
                    c_ngram: float | None) -> None:
    """Set each run's ``sim_s``: its recorded forwards priced by the SIMULATED accelerator
    of ``width`` (``t1``: seconds of one target forward over one token)."""
    for r in timed.runs:
        calls = timed.calls[(r.label, r.prompt, r.repeat)]  # (who, n): count
        target = Counter({n: k for (who, n), k in calls.items() if who == "target"})
        per_model = Counter()  # who: calls of any size
        for (who, _), k in calls.items():
            per_model[who] += k
        units = simulated_units(target, width, per_model["draft"], c, per_model["heads"],
                                c_heads or 0.0, per_model["ngram"], c_ngram or 0.0)
        r.sim_s = units * t1


# ---------------------------------------------------------------- step 4: profile, record


def profiled(methods: list[Method], rows: list[Row]) -> list[Method]:
    """AR at T = 0 and the fastest speculative and Medusa method at each temperature."""
    real = {r.label: r for r in rows if not r.simulated}
    chosen = [m for m in methods if m.kind == "autoregressive" and m.temperature == 0]
    for kind in ("speculative", "ngram", "medusa"):
        for t in sorted({m.temperature for m in methods}):
            group = [m for m in methods if m.kind == kind and m.temperature == t]
            if group:
                chosen.append(max(group, key=lambda m: real[m.label].speedup))
    return chosen


def profile_methods(methods: list[Method], p: Plan, s: Settings, models: Pretrained,
                    ngram: NGramModel | None) -> dict:
    """{label: cProfile split of one run of each method on the first prompt, with
    ``split``: where the wall clock of a run on each prompt goes, timed without the
    profiler (:func:`~specdec_lite.bench.timing.overhead_split`)}."""
    out = {}
    meter = ForwardMeter({"target": models.target, "draft": models.draft,
                          "heads": models.heads, "ngram": ngram})
    for method in methods:
        target, draft = prefill(models, p.prompts[0])
        out[method.label] = profile_call(lambda m=method, t=target, d=draft: decode_filled(
            m, t, d, models.heads, ngram, p.trees, p.prompts[0], s.new_tokens, s.seed))
        def prepared(prompt: np.ndarray, m: Method = method) -> Callable[[], object]:
            target, draft = prefill(models, prompt)  # untimed, just before the run
            return lambda: decode_filled(m, target, draft, models.heads, ngram, p.trees,
                                         prompt, s.new_tokens, s.seed)

        runs = [lambda x=prompt: prepared(x) for prompt in p.prompts]
        with meter:
            out[method.label]["split"] = overhead_split(runs, meter)
    return out


def own_rows_of(model: object) -> list[int] | None:
    """The block sizes a compiled model's forward sends to the skinny kernel, as measured
    when it was compiled (:mod:`specdec_lite.models.paths`); None for a numpy model."""
    compiled = getattr(model, "compiled", None)
    return None if compiled is None else compiled.skinny_rows


def describe_models(models: Pretrained, ngram: NGramModel | None) -> dict:
    """The ``models`` field."""
    ngram_info = None if ngram is None else {
        "order": ngram.order, "smoothing": ngram.smoothing,
        "fitted_on": "the training split of the bundled corpus"}
    return {"target": asdict(models.target.config), "draft": asdict(models.draft.config),
            "backend": {name: getattr(getattr(models, name), "backend", None)
                        for name in ("target", "draft")},
            "skinny_rows": {name: own_rows_of(getattr(models, name))
                            for name in ("target", "draft")},
            "heads": models.heads.n_heads if models.heads is not None else None,
            "ngram": ngram_info,
            "source": SHIPPED if models.manifest else "models given to bench.run()"}


def run_notes(p: Plan) -> list[str]:
    """The ``notes`` field: how the prompts were chosen and what the cost curve times."""
    notes = [f"trees and alpha_text from {p.n_windows} windows of the first quarter of the "
             "held-out split; prompts from the rest",
             "cost curve: target forwards with a causal mask (Medusa verifies with a tree "
             "mask over the same number of tokens)"]
    if not machine_info()["blas_threads"]:
        notes.append("BLAS threads not pinned: set OPENBLAS_NUM_THREADS=1 for stable timings")
    return notes


# ---------------------------------------------------------------- the run


def run(settings: Settings | None = None, models: Pretrained | None = None,
        ngram: NGramModel | None = None, *, progress: bool = True) -> BenchResult:
    """Run the benchmark. ``models`` default to the shipped ones (``load_pretrained()``),
    with an n-gram draft fitted on the training split (:func:`ngram_draft`); given models
    are benchmarked with the n-gram ``ngram`` only if one is given, and on the backend
    they were built with (which the result's ``settings.backend`` records)."""
    s = (settings or Settings()).check()
    if models is None:
        s = replace(s, backend=resolve_backend(s.backend))
        models = load_pretrained(backend=s.backend)
        if ngram is None:
            ngram = ngram_draft(models.tokenizer)
    else:  # the result records the forward the given models run, whatever was asked
        s = replace(s, backend=getattr(models.target, "backend", "numpy"))
    p = plan(s, models, ngram)
    timed = time_runs(p, s, models, ngram, progress)

    curve = isolated_costs(p, s, models, ngram, timed)
    t1 = curve["target_s"][0]
    c = curve["draft_s"] / t1
    c_heads = curve["heads_s"] / t1 if curve["heads_s"] is not None else None
    c_ngram = curve["ngram_s"] / t1 if curve["ngram_s"] is not None else None
    costs = {"speculative": c, "ngram": c_ngram, "medusa": c_heads}
    paid = in_run_ratios(curve["in_run"])

    rows = [summarise(m, timed.runs, timed.outputs, curve, costs, p.trees, s.seed, in_run=paid)
            for m in p.methods]
    if s.simulate_width:
        price_simulated(timed, s.simulate_width, t1, c, c_heads, c_ngram)
        rows += [summarise(m, timed.runs, timed.outputs, curve, costs, p.trees, s.seed,
                           s.simulate_width) for m in p.methods]
    profile = profile_methods(profiled(p.methods, rows), p, s, models, ngram)
    batch = measure_batch(models, p.prompts, batch_settings(s))

    ar_greedy = [out for (label, _, _), out in timed.outputs.items()
                 if label == Method("autoregressive", 0.0).label]
    loops = float(np.mean([ends_in_loop(o) for o in ar_greedy])) if ar_greedy else None
    acc = p.head_accuracy
    return BenchResult(s, describe_models(models, ngram), curve, paid, float(c), c_heads,
                       c_ngram, p.alpha_text, acc.tolist() if acc is not None else [], rows,
                       profile, loops, machine_info(),
                       datetime.now(UTC).isoformat(timespec="seconds"), run_notes(p),
                       timed.runs, batch=batch)
