"""Benchmark of draft sources and draft-length policies on the shipped models.

Every method decodes the same held-out prompts as plain decoding does, in an interleaved,
seeded order (:func:`specdec_lite.bench.config.schedule`), after one untimed warm-up run
each (which also compiles the numba forward). A row reports, per method and temperature:
the median over (prompt, repeat) cells of its tokens/s divided by plain decoding's in the
same cell (a run is timed from the prompt, its prefill included, as a user waits for it;
the main benchmark prefills before timing), the bootstrap 95% CI of that median, α, τ,
draft-model calls per emitted token, and at T = 0 the share of runs whose tokens equal
plain greedy decoding's (it must be 1).

The methods: the distilled GPT draft at k = 3 (the main benchmark's best fixed k), with
Hugging Face's adaptive k, with the k Theorem 3.8 picks from the running α and the
measured c, and with a confidence stop; prompt lookup at k = 4 and 8 and with adaptive k.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ..corpus import load_text
from ..decode import Generation, generate, speculative_generate
from ..draft_length import AdaptiveK, TheoryK
from ..pretrained import load_pretrained
from ..proposers import ModelDraft, PromptLookup
from .config import choose_prompts, resolve_backend, schedule
from .stats import bootstrap_ci
from .timing import cost_curve, machine_info

SCHEMA = "specdec_lite.bench.drafters/1"
PLAIN = "plain decoding"


@dataclass(frozen=True)
class DrafterSettings:
    temperatures: tuple[float, ...] = (0.0, 1.0)
    prompts: int = 8
    prompt_len: int = 96
    new_tokens: int = 128
    repeats: int = 3
    seed: int = 0
    backend: str = "auto"
    cost_repeats: int = 20


QUICK = DrafterSettings(prompts=2, new_tokens=48, repeats=1, cost_repeats=5)


def methods(draft: object, c: float) -> dict[str, tuple[object, object] | None]:
    """{label: (draft or proposer, k or policy)}, plain decoding as None."""
    return {
        PLAIN: None,
        "GPT draft, k = 3": (draft, 3),
        "GPT draft, adaptive k": (draft, AdaptiveK()),
        "GPT draft, k from theory": (draft, TheoryK(c=c)),
        "GPT draft, k = 6, confidence stop 0.5": (ModelDraft(draft, min_confidence=0.5), 6),
        "prompt lookup, k = 4": (PromptLookup(), 4),
        "prompt lookup, k = 8": (PromptLookup(), 8),
        "prompt lookup, adaptive k": (PromptLookup(), AdaptiveK()),
    }


def decode_one(target: object, method: tuple | None, prompt: np.ndarray, new_tokens: int,
               temperature: float, seed: int) -> Generation:
    if method is None:
        return generate(target, prompt, max_new_tokens=new_tokens, temperature=temperature,
                        seed=seed)
    draft, k = method
    return speculative_generate(target, draft, prompt, k=k, max_new_tokens=new_tokens,
                                temperature=temperature, seed=seed)


def measure(s: DrafterSettings = DrafterSettings(), progress: bool = False) -> dict:
    """Run the benchmark; the JSON-ready result (``SCHEMA``)."""
    backend = resolve_backend(s.backend)
    models = load_pretrained(backend=backend)
    texts = choose_prompts(load_text("heldout"), s.prompts, s.prompt_len, s.seed)
    prompts = [models.tokenizer.encode(t) for t in texts]
    curve, draft_s, _, _ = cost_curve(models, None, prompts[0], 1, s.cost_repeats, s.seed)
    c = float(draft_s / curve[0])  # one draft forward in target forwards, isolated
    table = methods(models.draft, c)
    labels = list(table)
    cells = [(t, label) for t in s.temperatures for label in labels]
    for t, label in cells:  # warm-up, untimed
        decode_one(models.target, table[label], prompts[0], s.new_tokens, t, s.seed)
    runs = []
    order = schedule(len(cells), len(prompts), s.repeats, s.seed)
    for i, (repeat, p, m) in enumerate(order):
        t, label = cells[m]
        start = time.perf_counter()
        gen = decode_one(models.target, table[label], prompts[p], s.new_tokens, t,
                         s.seed + 1000 * repeat + p)
        wall = time.perf_counter() - start
        runs.append({"method": label, "temperature": t, "prompt": p, "repeat": repeat,
                     "wall_s": wall, "n_tokens": len(gen.tokens),
                     "tokens_sha256": hashlib.sha256(gen.tokens.tobytes()).hexdigest()[:16],
                     "target_calls": gen.n_target_calls, "draft_calls": gen.n_draft_calls,
                     "accepted": gen.n_accepted, "checked": gen.n_checked,
                     "proposed": gen.n_proposed})
        if progress and (i + 1) % 50 == 0:
            print(f"  {i + 1}/{len(order)} runs", flush=True)
    rows = [summarise(runs, label, t, s.seed) for t, label in cells]
    return {"schema": SCHEMA, "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(), "backend": backend, "settings": asdict(s),
            "c": c, "rows": rows, "runs": runs}


def summarise(runs: list[dict], label: str, temperature: float, seed: int) -> dict:
    """One method's row at one temperature (see the module docstring)."""
    def cell_map(name: str) -> dict:
        return {(r["prompt"], r["repeat"]): r for r in runs
                if r["method"] == name and r["temperature"] == temperature}

    mine, base = cell_map(label), cell_map(PLAIN)
    cells = sorted(set(mine) & set(base))
    rate = np.array([mine[x]["n_tokens"] / mine[x]["wall_s"] for x in cells])  # [cells]
    ratios = rate / np.array([base[x]["n_tokens"] / base[x]["wall_s"] for x in cells])
    sel = [mine[x] for x in cells]
    tokens = sum(r["n_tokens"] for r in sel)
    checked = sum(r["checked"] for r in sel)
    same = [mine[x]["tokens_sha256"] == base[x]["tokens_sha256"] for x in cells]
    matches = float(np.mean(same)) if temperature == 0 else None
    return {"method": label, "temperature": temperature,
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


def format_rows(data: dict) -> str:
    """The result as a plain-text table, with the machine it ran on."""
    m = data["machine"]
    lines = [f"{m.get('cpu_model') or '?'}; BLAS kernel {m.get('blas', {}).get('kernel', '?')}; "
             f"{data['backend']} forward; c = {data['c']:.3f}",
             f"{'method':<40}{'T':>4}{'speedup':>9}{'95% CI':>16}{'tau':>7}{'alpha':>7}"
             f"{'k':>6}{'draft/tok':>10}"]
    for r in data["rows"]:
        lo, hi = r["speedup_ci"]
        alpha = "" if r["alpha"] is None else f"{r['alpha']:.2f}"
        lines.append(f"{r['method']:<40}{r['temperature']:>4g}{r['speedup']:>8.2f}x"
                     f"   [{lo:.2f}, {hi:.2f}]{r['tau']:>7.2f}{alpha:>7}{r['mean_k']:>6.2f}"
                     f"{r['draft_calls_per_token']:>10.2f}")
    return "\n".join(lines)


__all__ = ["PLAIN", "QUICK", "SCHEMA", "DrafterSettings", "format_rows", "measure", "methods",
           "read_json", "summarise", "write_json"]
