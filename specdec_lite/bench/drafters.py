"""Benchmark of draft sources and draft-length policies on the shipped models.

Every method decodes the same held-out prompts as plain decoding does, in an interleaved,
seeded order (:func:`specdec_lite.bench.config.schedule`), after one untimed warm-up run
each (which also compiles the numba forward). A row reports, per method and temperature:
the median over (prompt, repeat) cells of its tokens/s divided by plain decoding's in the
same cell (a run is timed from the prompt, its prefill included, as a user waits for it;
the main benchmark prefills before timing), the bootstrap 95% CI of that median, α, τ,
draft-model calls per emitted token, and at T = 0 the share of runs whose tokens equal
plain greedy decoding's (it must be 1).

The methods (:data:`METHODS`): the distilled GPT draft at k = 3 (the main benchmark's
best fixed k), with Hugging Face's adaptive k, with the k Theorem 3.8 picks from the
running α and the measured c, with a confidence stop, with the SpecDec++-style stop
(:mod:`specdec_lite.drafting.stop_head`, up to 8 tokens), and with the automatic policy
(step costs timed on this machine, k = 0 allowed); the EAGLE drafter and the early-exit
draft, each at k = 3 and with the automatic policy; prompt lookup at k = 4 and 8, adaptive
and automatic; and at T = 0 the hindsight oracle (:mod:`specdec_lite.bench.oracle`) for
the GPT draft and prompt lookup, which drafts exactly the tokens the target will accept
(its schedule found by an untimed greedy run first): the ceiling of a stopping rule. Each
runs on two task categories (:func:`category_prompts`): completion of held-out code, and
grounded prompts whose continuation copies text they contain.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ..drafting.draft_length import TheoryK
from ..drafting.proposers import PromptLookup
from ..engine.decode import generate, speculative_generate
from ..engine.trace import Generation
from ..models.corpus import load_text
from ..pretrained import load_eagle, load_early_exit, load_pretrained
from .config import choose_prompts, resolve_backend, schedule
from .oracle import OracleK, oracle_schedule
from .stats import bootstrap_ci
from .timing import cost_curve, machine_info

SCHEMA = "specdec_lite.bench.drafters/2"
PLAIN = "plain decoding"


@dataclass(frozen=True)
class DrafterSettings:
    temperatures: tuple[float, ...] = (0.0, 1.0)
    categories: tuple[str, ...] = ("completion", "grounded")
    prompts: int = 8
    prompt_len: int = 96
    new_tokens: int = 128
    repeats: int = 3
    seed: int = 0
    backend: str = "auto"
    cost_repeats: int = 20


QUICK = DrafterSettings(prompts=2, new_tokens=48, repeats=1, cost_repeats=5)
CATEGORIES = ("completion", "grounded")
COPY_START = 12  # a grounded prompt ends with this many characters of its snippet


@dataclass(frozen=True)
class Method:
    """One row's decoder: ``drafter`` is None (plain), ``"gpt"`` (the distilled draft),
    ``"eagle"`` (the EAGLE drafter), ``"early-exit"`` (the target's first blocks and the
    shipped exit head) or ``"lookup"`` (prompt lookup); ``policy`` a name of
    :func:`specdec_lite.drafting.draft_length.named_policy`, ``"theory"`` (:class:`TheoryK`)
    or ``"oracle"`` (:class:`~specdec_lite.bench.oracle.OracleK`, at T = 0 only), each with
    ``k`` as its largest k."""

    label: str
    drafter: str | None = None
    policy: str = "fixed"
    k: int = 0


METHODS = (
    Method(PLAIN),
    Method("GPT draft, k = 3", "gpt", "fixed", 3),
    Method("GPT draft, adaptive k", "gpt", "heuristic", 4),
    Method("GPT draft, k from theory", "gpt", "theory", 10),
    Method("GPT draft, k = 6, confidence stop", "gpt", "confidence", 6),
    Method("GPT draft, k = 8, specdec++ stop", "gpt", "specdec++", 8),
    Method("GPT draft, auto k", "gpt", "auto", 8),
    Method("GPT draft, oracle k", "gpt", "oracle", 8),
    Method("EAGLE drafter, k = 3", "eagle", "fixed", 3),
    Method("EAGLE drafter, auto k", "eagle", "auto", 8),
    Method("early exit, k = 3", "early-exit", "fixed", 3),
    Method("early exit, auto k", "early-exit", "auto", 8),
    Method("prompt lookup, k = 4", "lookup", "fixed", 4),
    Method("prompt lookup, k = 8", "lookup", "fixed", 8),
    Method("prompt lookup, adaptive k", "lookup", "heuristic", 4),
    Method("prompt lookup, auto k", "lookup", "auto", 8),
    Method("prompt lookup, oracle k", "lookup", "oracle", 8),
)


def category_prompts(category: str, s: DrafterSettings) -> list[str]:
    """Held-out prompts of a task category: ``completion`` continues a slice of held-out
    code; ``grounded`` is a slice, a newline, and the slice's first ``COPY_START``
    characters again, so the natural continuation copies text the prompt already has
    (the situation prompt lookup is made for: an edit, a rename, a repeated block)."""
    if category not in CATEGORIES:
        raise ValueError(f"categories must be among {CATEGORIES}, got {category!r}")
    text = load_text("heldout")
    if category == "completion":
        return choose_prompts(text, s.prompts, s.prompt_len, s.seed)
    return [snippet + "\n" + snippet[:COPY_START]
            for snippet in choose_prompts(text, s.prompts, s.prompt_len, s.seed + 1)]


def make_drafter(name: str, models: object) -> object:
    """The proposer a method's ``drafter`` names, for the shipped ``models``."""
    if name == "gpt":
        return models.draft
    if name == "eagle":
        return load_eagle(models.target)
    if name == "early-exit":
        return load_early_exit(backend=models.target.backend)
    if name == "lookup":
        return PromptLookup()
    raise ValueError(f"drafter must be 'gpt', 'eagle', 'early-exit' or 'lookup', got {name!r}")


def decode_one(target: object, method: Method, drafters: dict, prompt: np.ndarray,
               new_tokens: int, temperature: float, seed: int, c: float,
               oracle_plan: dict[int, int] | None = None) -> Generation:
    """One run of ``method``; ``oracle_plan`` is the oracle's schedule for this prompt
    (see :func:`oracle_schedules`)."""
    if method.drafter is None:
        return generate(target, prompt, max_new_tokens=new_tokens, temperature=temperature,
                        seed=seed)
    draft = drafters[method.label]
    if method.policy == "oracle":
        return speculative_generate(target, draft, prompt, k=OracleK(oracle_plan),
                                    max_new_tokens=new_tokens, temperature=temperature,
                                    seed=seed)
    if method.policy == "theory":
        return speculative_generate(target, draft, prompt, k=TheoryK(c=c, k_max=method.k),
                                    max_new_tokens=new_tokens, temperature=temperature,
                                    seed=seed)
    return speculative_generate(target, draft, prompt, k=method.k, policy=method.policy,
                                max_new_tokens=new_tokens, temperature=temperature, seed=seed)


def measure(s: DrafterSettings = DrafterSettings(), progress: bool = False) -> dict:
    """Run the benchmark; the JSON-ready result (``SCHEMA``)."""
    backend = resolve_backend(s.backend)
    models = load_pretrained(backend=backend)
    prompts = {cat: [models.tokenizer.encode(t) for t in category_prompts(cat, s)]
               for cat in s.categories}
    first = prompts[s.categories[0]][0]
    curve, draft_s, _, _ = cost_curve(models, None, first, 1, s.cost_repeats, s.seed)
    c = float(draft_s / curve[0])  # one draft forward in target forwards, isolated
    drafters = {m.label: make_drafter(m.drafter, models) for m in METHODS if m.drafter}
    cells = [(t, m) for t in s.temperatures for m in METHODS
             if m.policy != "oracle" or t == 0]  # the oracle knows the future at T = 0 only
    oracle = oracle_schedules(models.target, drafters, prompts, s.new_tokens)  # untimed
    for t, m in cells:  # warm-up, untimed (an auto policy measures its step costs here)
        decode_one(models.target, m, drafters, first, s.new_tokens, t, s.seed, c,
                   oracle.get((m.label, s.categories[0], 0)))  # ``first`` is that prompt
    runs = []
    for cat in s.categories:
        order = schedule(len(cells), len(prompts[cat]), s.repeats, s.seed)
        for i, (repeat, p, j) in enumerate(order):
            t, m = cells[j]
            start = time.perf_counter()
            gen = decode_one(models.target, m, drafters, prompts[cat][p], s.new_tokens, t,
                             s.seed + 1000 * repeat + p, c, oracle.get((m.label, cat, p)))
            wall = time.perf_counter() - start
            runs.append({"category": cat, "method": m.label, "temperature": t, "prompt": p,
                         "repeat": repeat, "wall_s": wall, "n_tokens": len(gen.tokens),
                         "tokens_sha256": hashlib.sha256(gen.tokens.tobytes()).hexdigest()[:16],
                         "target_calls": gen.n_target_calls, "draft_calls": gen.n_draft_calls,
                         "accepted": gen.n_accepted, "checked": gen.n_checked,
                         "proposed": gen.n_proposed})
            if progress and (i + 1) % 100 == 0:
                print(f"  {cat}: {i + 1}/{len(order)} runs", flush=True)
    rows = [summarise(runs, m, t, cat, s.seed) for cat in s.categories for t, m in cells]
    return {"schema": SCHEMA, "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(), "backend": backend, "settings": asdict(s),
            "c": c, "rows": rows, "runs": runs}


def oracle_schedules(target: object, drafters: dict, prompts: dict[str, list[np.ndarray]],
                     new_tokens: int) -> dict[tuple[str, str, int], dict[int, int]]:
    """The oracle's schedule (:func:`~specdec_lite.bench.oracle.oracle_schedule`) of each
    oracle method for each prompt, keyed ``(method, category, prompt index)``."""
    return {(m.label, cat, p): oracle_schedule(target, drafters[m.label], prompt, new_tokens,
                                               m.k)
            for m in METHODS if m.policy == "oracle"
            for cat, some in prompts.items() for p, prompt in enumerate(some)}


def summarise(runs: list[dict], method: Method, temperature: float, category: str,
              seed: int) -> dict:
    """One method's row at one temperature in one category (see the module docstring)."""
    def cell_map(name: str) -> dict:
        return {(r["prompt"], r["repeat"]): r for r in runs if r["method"] == name
                and r["temperature"] == temperature and r["category"] == category}

    mine, base = cell_map(method.label), cell_map(PLAIN)
    cells = sorted(set(mine) & set(base))
    rate = np.array([mine[x]["n_tokens"] / mine[x]["wall_s"] for x in cells])  # [cells]
    ratios = rate / np.array([base[x]["n_tokens"] / base[x]["wall_s"] for x in cells])
    sel = [mine[x] for x in cells]
    tokens = sum(r["n_tokens"] for r in sel)
    checked = sum(r["checked"] for r in sel)
    same = [mine[x]["tokens_sha256"] == base[x]["tokens_sha256"] for x in cells]
    matches = float(np.mean(same)) if temperature == 0 else None
    return {"method": method.label, "drafter": method.drafter, "policy": method.policy,
            "category": category, "temperature": temperature,
            "speedup": float(np.median(ratios)), "speedup_ci": list(bootstrap_ci(ratios, seed)),
            "tokens_per_s": float(np.median(rate)),
            "alpha": sum(r["accepted"] for r in sel) / checked if checked else None,
            "tau": tokens / sum(r["target_calls"] for r in sel),
            "draft_calls_per_token": sum(r["draft_calls"] for r in sel) / tokens,
            "mean_k": sum(r["proposed"] for r in sel) / sum(r["target_calls"] for r in sel),
            "matches_plain": matches, "n_runs": len(sel)}


def write_json(data: dict, path: str | Path) -> None:
    """Write ``data`` to ``path`` (its folder created), after checking it is a result."""
    if data.get("schema") != SCHEMA or not isinstance(data.get("rows"), list):
        raise ValueError(f"not a {SCHEMA} result")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def read_json(path: str | Path) -> dict:
    """A result written by :func:`write_json`; ``ValueError`` naming ``path`` otherwise."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a {SCHEMA} result")
    return data


def pool_counts(gens: Sequence[Generation]) -> dict:
    """α, τ, tokens proposed per target call and draft calls of several decodes, the counts
    summed before dividing (as :func:`summarise` pools runs); α is None if nothing was
    checked."""
    if isinstance(gens, Generation) or not isinstance(gens, Sequence) or not gens:
        raise TypeError(f"gens must be a non-empty sequence of Generation, got {gens!r:.60}")
    if not all(isinstance(g, Generation) for g in gens):
        raise TypeError("gens must hold Generation objects only")
    calls = sum(g.n_target_calls for g in gens)
    if calls == 0:
        raise ValueError("gens made no target call: there is nothing to pool")
    checked = sum(g.n_checked for g in gens)
    return {"alpha": sum(g.n_accepted for g in gens) / checked if checked else None,
            "tau": sum(len(g.tokens) for g in gens) / calls,
            "proposed": sum(g.n_proposed for g in gens) / calls,
            "draft_calls": sum(g.n_draft_calls for g in gens)}


def row_index(results: dict[str, dict]) -> dict[tuple[str, str, str, float], dict]:
    """The rows of several results (a name, such as the forward's, to a result of
    :func:`measure`), keyed ``(name, category, method, temperature)``."""
    if not isinstance(results, dict) or not results:
        raise TypeError(f"results must be a non-empty dict of name to result, got {results!r:.60}")
    index = {}
    for name, data in results.items():
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"results[{name!r}] is not a {SCHEMA} result")
        for r in data["rows"]:
            index[(name, r["category"], r["method"], r["temperature"])] = r
    return index


def keep_methods(data: dict, methods: Sequence[str]) -> dict:
    """A copy of one result (of :func:`measure`) with the rows and runs of plain decoding and
    of ``methods`` only (labels of :data:`METHODS`), for a table that shows some of them."""
    known = {m.label for m in METHODS}
    unknown = [m for m in methods if m not in known]
    if isinstance(methods, str) or unknown:
        raise ValueError(f"methods must be labels of drafters.METHODS, got {unknown or methods!r}")
    keep = {PLAIN, *methods}
    return {**data, "rows": [r for r in data["rows"] if r["method"] in keep],
            "runs": [r for r in data["runs"] if r["method"] in keep]}


def ci_side(row: dict) -> str:
    """Where a row's 95% speedup CI lies relative to 1: ``"above"`` (measurably faster than
    plain decoding), ``"below"`` (measurably slower) or ``"contains"``."""
    lo, hi = row["speedup_ci"]
    return "above" if lo > 1 else "below" if hi < 1 else "contains"


def cis_overlap(a: dict, b: dict) -> bool:
    """Whether two rows' speedup CIs share a point (then neither is shown faster)."""
    return a["speedup_ci"][0] <= b["speedup_ci"][1] and b["speedup_ci"][0] <= a["speedup_ci"][1]


def short_label(method: str) -> str:
    """A method's label shortened for a narrow table: ``"GPT, k = 3"``, ``"lookup, auto k"``."""
    return (method.replace("GPT draft", "GPT").replace("prompt lookup", "lookup")
            .replace("EAGLE drafter", "EAGLE").replace("k = 6, confidence stop", "confidence")
            .replace("k = 8, specdec++ stop", "specdec++"))


def methods_in(results: dict[str, dict]) -> list[str]:
    """The speculative methods with a row in any of several results (a name to a result,
    as :func:`row_index` takes), in :data:`METHODS`' order: a result made before a method
    was added lacks its rows."""
    present = {key[2] for key in row_index(results)}
    return [m.label for m in METHODS if m.drafter and m.label in present]


def format_speedups(results: dict[str, dict]) -> str:
    """Each speculative method's median speedup per temperature, category and result (a
    name, such as the forward's, to a result of :func:`measure`, as :func:`row_index`
    takes), marked ``+`` where its 95% CI lies above 1 and ``-`` where it lies below."""
    rows, names = row_index(results), list(results)
    mark = {"above": "+", "below": "-", "contains": " "}
    lines = []
    for t in next(iter(results.values()))["settings"]["temperatures"]:
        lines.append(f"{'T = ' + format(t, 'g'):18}"
                     + "".join(f"{cat:^{7 * len(names)}}" for cat in CATEGORIES))
        lines.append(f"{'':18}" + "".join(f" {name:<5} " for name in names) * len(CATEGORIES))
        for method in methods_in(results):
            keys = [(name, cat, method, t) for cat in CATEGORIES for name in names]
            if not any(key in rows for key in keys):  # the oracle has no rows at T > 0
                continue
            lines.append(f"{short_label(method):18}" + "".join(
                f"{rows[key]['speedup']:6.2f}" + mark[ci_side(rows[key])] if key in rows
                else f"{'-':>6} " for key in keys))
    return "\n".join(lines)


def format_counts(data: dict) -> str:
    """α and τ of each speculative method in one result, per temperature and category."""
    rows = row_index({"": data})
    lines = [f"{'':18}" + "".join(f"{cat:^12}" for cat in CATEGORIES),
             f"{'':18}" + "    α     τ " * len(CATEGORIES)]
    for t in data["settings"]["temperatures"]:
        lines.append(f"T = {t:g}")
        for method in methods_in({"": data}):
            cells = [rows.get(("", cat, method, t)) for cat in CATEGORIES]
            if not any(cells):  # the oracle has no rows at T > 0
                continue
            lines.append(f"{short_label(method):18}" + "".join(
                f" {'-' if r['alpha'] is None else format(r['alpha'], '.2f'):>5} {r['tau']:5.2f}"
                for r in cells))
    return "\n".join(lines)


def format_rows(data: dict) -> str:
    """The result as a plain-text table, with the machine it ran on."""
    m = data["machine"]
    lines = [f"{m.get('cpu_model') or '?'}; BLAS kernel {m.get('blas', {}).get('kernel', '?')}; "
             f"{data['backend']} forward; c = {data['c']:.3f}",
             f"{'category':<11}{'method':<36}{'T':>4}{'speedup':>9}{'95% CI':>16}{'tau':>7}"
             f"{'alpha':>7}{'k':>6}{'draft/tok':>10}"]
    for r in data["rows"]:
        lo, hi = r["speedup_ci"]
        alpha = "" if r["alpha"] is None else f"{r['alpha']:.2f}"
        lines.append(f"{r['category']:<11}{r['method']:<36}{r['temperature']:>4g}"
                     f"{r['speedup']:>8.2f}x   [{lo:.2f}, {hi:.2f}]{r['tau']:>7.2f}{alpha:>7}"
                     f"{r['mean_k']:>6.2f}{r['draft_calls_per_token']:>10.2f}")
    return "\n".join(lines)


SIDES = ("above", "contains", "below")  # the values of ci_side
# a Method's drafter, as tables show it
DRAFTER_NAMES = {"gpt": "GPT", "eagle": "EAGLE", "early-exit": "exit", "lookup": "lookup"}


def side_counts(results: dict[str, dict]) -> dict[tuple[str, str, float, str], dict[str, int]]:
    """How many speculative rows of each ``(name, category, temperature, drafter)`` of
    several results (a name to a result, as :func:`row_index` takes) have their speedup
    CI above 1, containing it, or below it: ``{"above": n, "contains": n, "below": n}``."""
    counts: dict = {}
    for (name, category, _, temperature), r in row_index(results).items():
        if r["drafter"] and r.get("policy") != "oracle":  # a ceiling, not a method to run
            key = (name, category, temperature, r["drafter"])
            counts.setdefault(key, dict.fromkeys(SIDES, 0))[ci_side(r)] += 1
    return counts


def format_sides(results: dict[str, dict]) -> str:
    """:func:`side_counts` as a table: a line per temperature and result, a cell
    ``above/contains/below`` per category and drafter (``-`` where there is no row)."""
    counts = side_counts(results)
    kinds = [d for d in dict.fromkeys(m.drafter for m in METHODS if m.drafter)
             if any(key[3] == d for key in counts)]  # [drafters present], in METHODS' order
    width = 7 * len(kinds) + 2
    lines = ["rows whose speedup CI lies above 1 / contains 1 / lies below 1",
             f"{'':14}" + "".join(f"{cat:<{width}}" for cat in CATEGORIES),
             f"{'':14}" + ("".join(f"{DRAFTER_NAMES.get(d, d):<7}" for d in kinds) + "  ")
             * len(CATEGORIES)]
    for t in sorted({key[2] for key in counts}):
        for name in results:
            cells = [["/".join(str(n[s]) for s in SIDES) if n else "-" for n in
                      (counts.get((name, cat, t, d)) for d in kinds)] for cat in CATEGORIES]
            lines.append(f"{name + ', T = ' + format(t, 'g'):14}"
                         + "".join("".join(f"{c:<7}" for c in cat) + "  " for cat in cells))
    return "\n".join(line.rstrip() for line in lines)


__all__ = ["CATEGORIES", "DRAFTER_NAMES", "METHODS", "PLAIN", "QUICK", "SCHEMA", "SIDES",
           "DrafterSettings", "Method", "category_prompts", "ci_side", "cis_overlap",
           "format_counts", "format_rows", "format_sides", "format_speedups", "keep_methods",
           "measure", "methods_in", "oracle_schedules",
           "pool_counts", "read_json", "row_index", "short_label", "side_counts", "summarise",
           "write_json"]
