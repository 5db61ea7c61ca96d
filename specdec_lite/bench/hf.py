"""The transformers rows of the benchmark: our engine against HF's, on the same weights.

The shipped target and draft are exported to GPT-2 format (:mod:`specdec_lite.hf.export`)
into a temporary directory and loaded back with ``transformers``. Six methods then decode
the same held-out prompts as the main benchmark (same ``Settings``: prompt length, new
tokens, prompts, repeats, seed), greedily, interleaved in one seeded shuffled order
(:func:`~specdec_lite.bench.config.schedule`) after one untimed warm-up pass:

* ``HF greedy``: ``model.generate(do_sample=False)`` of the exported target;
* ``HF assisted k=K``: the same with ``assistant_model`` = the exported draft, K draft
  tokens per step (``num_assistant_tokens_schedule="constant"``);
* ``ours AR / ours speculative k=K over HF``: :func:`specdec_lite.generate` and
  :func:`specdec_lite.speculative_generate` over :class:`specdec_lite.hf.bridge.HFModel`;
* ``ours AR / ours speculative k=K over numpy``: the same over the numpy GPTs.

Greedy decoding makes every method emit the same tokens (checked: ``same_tokens``), so the
times compare like with like. Where the time goes: each run's seconds inside model
forwards (the adapters' and numpy models' ``observer`` hooks; torch forward hooks on the
HF modules for HF's own loops) and the rest, the engine (sampling, verification, cache
bookkeeping, and for HF the generation machinery). torch runs on one thread, as BLAS does.

Run it alone with ``python -m specdec_lite.bench.hf --json results/bench_hf.json``, or with
the main benchmark (``python -m specdec_lite bench --hf``), which stores it as ``hf``.
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections.abc import Callable

import numpy as np

from ..engine.decode import generate, speculative_generate
from ..engine.trace import Generation
from ..models.corpus import load_text
from ..pretrained import load_pretrained
from .config import QUICK, Settings, choose_prompts, schedule
from .stats import bootstrap_ci
from .timing import machine_info, pin_blas_threads

K = 4  # draft tokens per step for both engines


class _TorchClock:
    """Seconds spent inside the forward calls of some torch modules (forward hooks)."""

    def __init__(self, modules: list) -> None:
        self.seconds, self.calls, self._start, self._handles = 0.0, 0, 0.0, []
        for module in modules:
            self._handles.append(module.register_forward_pre_hook(self._enter))
            self._handles.append(module.register_forward_hook(self._leave))

    def _enter(self, *args: object) -> None:
        self._start = time.perf_counter()

    def _leave(self, *args: object) -> None:
        self.seconds += time.perf_counter() - self._start
        self.calls += 1

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def require_hf() -> None:
    """Raise ``ValueError`` with the install hint unless torch and transformers import."""
    import importlib.util

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"--hf needs {' and '.join(missing)}: pip install -r "
                         "requirements-hf.txt (the hf extra)")


def methods(k: int = K) -> list[str]:
    """The labels of the six methods, in a fixed order."""
    return ["HF greedy", f"HF assisted k={k}", "ours AR over HF", f"ours speculative k={k} over HF",
            "ours AR over numpy", f"ours speculative k={k} over numpy"]


def _runners(k: int, hf_target, hf_draft, np_target, np_draft, n_new: int) -> dict:
    """{label: run(prompt) -> (tokens, target_calls, draft_calls)} for each method."""
    import torch

    def hf(assistant=None) -> Callable:
        extra = {} if assistant is None else {
            "assistant_model": assistant, "num_assistant_tokens": k,
            "num_assistant_tokens_schedule": "constant"}

        def run(prompt: np.ndarray) -> tuple:
            with torch.inference_mode():
                out = hf_target.model.generate(torch.from_numpy(prompt[None]), do_sample=False,
                                               max_new_tokens=n_new, min_new_tokens=n_new,
                                               **extra)
            return out[0, len(prompt):].numpy(), None, None
        return run

    def ours(target, draft=None) -> Callable:
        def run(prompt: np.ndarray) -> tuple:
            if draft is None:
                gen: Generation = generate(target, prompt, max_new_tokens=n_new, temperature=0)
            else:
                gen = speculative_generate(target, draft, prompt, k=k, max_new_tokens=n_new,
                                           temperature=0)
            return gen.tokens, gen.n_target_calls, gen.n_draft_calls
        return run

    return dict(zip(methods(k), [hf(), hf(hf_draft.model), ours(hf_target),
                                 ours(hf_target, hf_draft), ours(np_target),
                                 ours(np_target, np_draft)], strict=True))


def run_hf(settings: Settings | None = None, k: int = K, *, progress: bool = False) -> dict:
    """Time the six methods (see the module docstring); return the ``hf`` JSON object:
    ``rows`` (label, tokens_per_s median and 95% CI, speedup over HF greedy, forward
    share, target and draft calls per run), ``runs``, ``same_tokens``, ``versions``,
    ``machine`` and ``notes``."""
    import torch
    import transformers

    from ..hf.bridge import HFModel
    from ..hf.export import export_pretrained

    s = (settings or Settings()).check()
    torch.set_num_threads(1)
    pin_blas_threads(1)
    shipped = load_pretrained()
    text = load_text("heldout")
    split = len(text) // 4  # the main benchmark's prompts come from the same part
    texts = choose_prompts(text[split:], s.prompts, s.prompt_len + s.new_tokens, s.seed)
    prompts = [shipped.tokenizer.encode(t)[: s.prompt_len] for t in texts]
    with tempfile.TemporaryDirectory() as tmp:
        paths = export_pretrained(tmp)
        hf_target = HFModel.from_pretrained(paths["target"])
        hf_draft = HFModel.from_pretrained(paths["draft"])
    labels = methods(k)
    runners = _runners(k, hf_target, hf_draft, shipped.target, shipped.draft, s.new_tokens)
    observed = [hf_target, hf_draft, shipped.target, shipped.draft]
    forward_s = [0.0]

    def observe(n: int, seconds: float) -> None:
        forward_s[0] += seconds

    clock = _TorchClock([hf_target.model, hf_draft.model])
    order = [(-1, 0, m) for m in range(len(labels))] + schedule(len(labels), s.prompts,
                                                                  s.repeats, s.seed)
    runs, outputs = [], {}
    try:
        for model in observed:
            model.observer = observe
        for i, (repeat, p, m) in enumerate(order):
            label = labels[m]
            for model in (hf_target, hf_draft):
                model.reset()  # every run starts from an empty cache, as HF's do
            gc.collect()
            gc.disable()
            forward_s[0], clock.seconds = 0.0, 0.0
            start = time.perf_counter()
            tokens, target_calls, draft_calls = runners[label](prompts[p])
            wall = time.perf_counter() - start
            gc.enable()
            if progress:
                print(f"\rbench hf: {i + 1}/{len(order)}", end="", flush=True)
            if repeat < 0:
                continue
            # ours over HF: the adapters' observer and the torch hooks see the same forwards
            fwd = forward_s[0] if label.endswith("numpy") else clock.seconds
            runs.append({"label": label, "prompt": p, "repeat": repeat, "wall_s": wall,
                         "forward_s": fwd, "tokens": len(tokens), "target_calls": target_calls,
                         "draft_calls": draft_calls})
            outputs[(label, p)] = tuple(np.asarray(tokens).tolist())
    finally:
        gc.enable()
        clock.close()
        for model in observed:
            model.observer = None
        if progress:
            print()
    same = all(len({outputs[(label, p)] for label in labels}) == 1 for p in range(s.prompts))
    return {"settings": s.as_json(), "k": k, "rows": summarise_hf(runs, labels, s.seed),
            "runs": runs, "same_tokens": same,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "torch_threads": torch.get_num_threads()},
            "machine": machine_info(),
            "notes": ["greedy decoding; every run starts with empty caches (the prompt's "
                      "prefill is timed, for HF's loops and ours alike)",
                      "forward_s: time inside model forwards (torch hooks for HF modules, "
                      "observer hooks for the numpy GPTs); the rest is the engine"]}


def summarise_hf(runs: list[dict], labels: list[str], seed: int = 0) -> list[dict]:
    """One row per label: median tokens/s with a bootstrap 95% CI, the median speedup over
    HF greedy on the same (prompt, repeat), the share of wall time in forwards, and the
    mean target/draft calls of a run (None for HF's loops, which do not report them)."""
    by = {(r["label"], r["prompt"], r["repeat"]): r for r in runs}
    rows = []
    for label in labels:
        mine = [r for r in runs if r["label"] == label]
        if not mine:
            continue
        rate = [r["tokens"] / r["wall_s"] for r in mine]
        base = [by[("HF greedy", r["prompt"], r["repeat"])]["wall_s"] / r["wall_s"]
                for r in mine if ("HF greedy", r["prompt"], r["repeat"]) in by]
        calls = [r["target_calls"] for r in mine if r["target_calls"] is not None]
        drafts = [r["draft_calls"] for r in mine if r["draft_calls"] is not None]
        rows.append({
            "label": label, "tokens_per_s": float(np.median(rate)),
            "tokens_per_s_ci": list(bootstrap_ci(rate, seed)),
            "speedup_vs_hf_greedy": float(np.median(base)) if base else None,
            "speedup_ci": list(bootstrap_ci(base, seed)) if base else None,
            "forward_share": float(np.median([r["forward_s"] / r["wall_s"] for r in mine])),
            "ms_per_token_forward": float(np.median([1e3 * r["forward_s"] / r["tokens"]
                                                     for r in mine])),
            "ms_per_token_engine": float(np.median([1e3 * (r["wall_s"] - r["forward_s"])
                                                    / r["tokens"] for r in mine])),
            "target_calls": float(np.mean(calls)) if calls else None,
            "draft_calls": float(np.mean(drafts)) if drafts else None,
            "n_runs": len(mine)})
    return rows


def format_hf(result: dict) -> str:
    """The ``hf`` rows as a terminal table."""
    lines = [f"{'method':34} {'tok/s':>8} {'95% CI':>17} {'vs HF greedy':>13} "
             f"{'fwd ms/tok':>10} {'engine ms/tok':>13}"]
    for r in result["rows"]:
        lo, hi = r["tokens_per_s_ci"]
        speed = r["speedup_vs_hf_greedy"]
        lines.append(f"{r['label']:34} {r['tokens_per_s']:8.0f} {f'[{lo:.0f}, {hi:.0f}]':>17} "
                     f"{'' if speed is None else f'{speed:.2f}x':>13} "
                     f"{r['ms_per_token_forward']:10.3f} {r['ms_per_token_engine']:13.3f}")
    lines.append(f"same tokens from every method: {result['same_tokens']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m specdec_lite.bench.hf [--quick] [--json PATH]``."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m specdec_lite.bench.hf",
                                     description="HF generate vs our engine, same weights")
    parser.add_argument("--quick", action="store_true", help="a small run")
    parser.add_argument("--json", metavar="PATH", help="write the result as JSON")
    args = parser.parse_args(argv)
    result = run_hf(QUICK if args.quick else Settings(), progress=True)
    print(format_hf(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
