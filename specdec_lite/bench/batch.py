"""Throughput against batch size: plain and speculative decoding of B sequences at once.

Every batch size B decodes the same N = max(sizes) held-out prompts (the run's prompts,
repeated when there are fewer), with the same seed per prompt, so the rows of different B
differ only in how the work is batched: the N prompts are cut into consecutive batches of
B, and each batch is decoded by one :class:`specdec_lite.engine.batch.BatchEngine`, all its
sequences joining at the start, once plainly and once speculatively (the draft GPT, k
tokens), in a seeded shuffled order so that drift hits both alike. Throughput is the new
tokens of the N sequences over the wall time of their decoding (each batch's prompts are
prefilled before its clock starts, as in the single-sequence runs). Sequence i has its own
seed, from (seed, repeat, i), whatever B it is decoded in.

A third method, ``"auto"``, is what an engine runs when it is left to choose: the draft
GPT with each sequence's automatic draft length (``policy="auto"``, priced on this
machine, k = 0 allowed) and speculation switched off for steps with more than
``spec_max_batch`` active sequences, a size measured once here before the rows
(:func:`specdec_lite.engine.load.measure_spec_max_batch`, recorded in the settings with
the gains it rests on). It should never fall much below plain decoding, at any B.

The result is the ``batch`` field of a benchmark's JSON: its ``settings`` and one row
per (temperature, method, B) with the median tokens/s over repeats and its bootstrap
95% CI, τ and α over the batch, and for speculative rows the speedup: the median over
repeats of speculative over plain tokens/s of the same repeat. Speculation trades
extra FLOPs (k + 1 positions per target call, plus the drafts) for fewer sequential
calls; a batch already gives the target's matrix products many rows, so the question
is whether the speedup shrinks as B grows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from ..engine.load import decode_together, measure_spec_max_batch
from ..pretrained import Pretrained
from .stats import bootstrap_ci

BATCH_SIZES = (1, 2, 4, 8, 16)
METHODS = ("plain", "speculative", "auto")
DRAFTING = ("speculative", "auto")  # the methods whose rows carry a speedup over plain


@dataclass(frozen=True)
class BatchSettings:
    """What the batch section runs: batch sizes, draft length, temperatures, tokens."""

    sizes: tuple[int, ...] = BATCH_SIZES
    k: int = 3
    temperatures: tuple[float, ...] = (0.0, 1.0)
    new_tokens: int = 64
    repeats: int = 3
    seed: int = 0

    def check(self) -> BatchSettings:
        """Raise ``ValueError`` naming the first bad setting; return ``self``."""
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError(f"sizes must be batch sizes >= 1, got {list(self.sizes)}")
        for name in ("k", "new_tokens", "repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.temperatures or any(not t >= 0 for t in self.temperatures):
            raise ValueError(f"temperatures must be >= 0, got {list(self.temperatures)}")
        return self


QUICK_BATCH = BatchSettings(sizes=(1, 4), temperatures=(0.0,), new_tokens=24, repeats=2)


def batch_settings(settings: object) -> BatchSettings:
    """The section's settings in a benchmark run with ``settings`` (a ``bench.Settings``):
    ``QUICK_BATCH`` for a quick run, else the defaults; the run's seed, and no more new
    tokens than the run's."""
    base = QUICK_BATCH if settings.quick else BatchSettings()
    return replace(base, seed=settings.seed,
                   new_tokens=min(base.new_tokens, settings.new_tokens))


def run_batch(models: Pretrained, method: str, batch: list[np.ndarray], temperature: float,
              s: BatchSettings, repeat: int, first: int = 0,
              spec_max_batch: int | None = None) -> tuple[float, list]:
    """Decode ``batch`` together with ``method`` (one of :data:`METHODS`; ``"auto"`` turns
    speculation off above ``spec_max_batch`` active sequences); return (wall seconds of
    the decoding, after the prompts are prefilled, and the Generations). The batch holds
    sequences ``first``, ``first + 1``, ... of the run, and sequence i is seeded by
    (seed, repeat, i)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    auto = method == "auto"
    seeds = [np.random.default_rng(np.random.SeedSequence([s.seed, repeat, i]))
             for i in range(first, first + len(batch))]
    # the prefill is untimed, as in the single-sequence runs
    return decode_together(models.target, None if method == "plain" else models.draft,
                           list(batch), k=s.k, new_tokens=s.new_tokens,
                           temperature=temperature, seeds=seeds,
                           spec_max_batch=spec_max_batch if auto else None,
                           policy="auto" if auto else None)


def run_in_batches(models: Pretrained, method: str, sequences: list[np.ndarray],
                   b: int, temperature: float, s: BatchSettings,
                   repeat: int, spec_max_batch: int | None = None) -> tuple[float, list]:
    """Decode ``sequences`` in consecutive batches of ``b`` (the last may be smaller);
    return (the summed wall seconds of the decodings, every Generation in order)."""
    wall, gens = 0.0, []
    for first in range(0, len(sequences), b):
        seconds, done = run_batch(models, method, sequences[first:first + b], temperature,
                                  s, repeat, first, spec_max_batch)
        wall += seconds
        gens += done
    return wall, gens


def measure(models: Pretrained, prompts: list[np.ndarray],
            settings: BatchSettings | None = None) -> dict:
    """The ``batch`` section: throughput of plain and speculative decoding per batch size
    (see the module docstring). ``prompts`` are token arrays; every batch size decodes the
    first max(sizes) of them (reused in turn when there are fewer)."""
    s = (settings or BatchSettings()).check()
    if not prompts:
        raise ValueError("prompts must not be empty")
    rng = np.random.default_rng(s.seed)
    sequences = [prompts[i % len(prompts)] for i in range(max(s.sizes))]
    spec_max_batch, gains = measure_spec_max_batch(models.target, models.draft, prompts[0],
                                                   k=s.k, max_batch=max(s.sizes))
    for t in s.temperatures:  # untimed: the automatic policy prices its steps here
        run_in_batches(models, "auto", sequences[:1], 1, t, s, 0, spec_max_batch)
    cells = []  # (temperature, method, B, repeat, tokens/s, tokens, tau, alpha)
    for repeat in range(s.repeats):
        for b in rng.permutation(s.sizes).tolist():
            for t in s.temperatures:
                for method in rng.permutation(list(METHODS)).tolist():
                    wall, gens = run_in_batches(models, method, sequences, b, t, s, repeat,
                                                spec_max_batch)
                    tokens = sum(len(g.tokens) for g in gens)
                    checked = sum(g.n_checked for g in gens)
                    cells.append((t, method, b, repeat, tokens / wall, tokens,
                                  tokens / sum(g.n_target_calls for g in gens),
                                  sum(g.n_accepted for g in gens) / checked if checked else None))
    return {"settings": {**asdict(s), "sizes": list(s.sizes),
                         "temperatures": list(s.temperatures),
                         "spec_max_batch": spec_max_batch,
                         "spec_gains": {str(b): g for b, g in gains.items()}},
            "rows": summarise(cells, s)}


def summarise(cells: list[tuple], s: BatchSettings) -> list[dict]:
    """One row per (temperature, method, B) measured: medians, CIs and the paired
    speedup."""
    rows = []
    for t in s.temperatures:
        for method in METHODS:
            for b in s.sizes:
                mine = sorted((c for c in cells if c[:3] == (t, method, b)), key=lambda c: c[3])
                if not mine:
                    continue
                rate = [c[4] for c in mine]
                row = {"method": method, "temperature": t, "batch": b,
                       "k": s.k if method in DRAFTING else 0,
                       "tokens_per_s": float(np.median(rate)),
                       "tokens_per_s_ci": list(bootstrap_ci(rate, s.seed)),
                       "tokens": int(sum(c[5] for c in mine)),
                       "tau": float(np.mean([c[6] for c in mine])),
                       "alpha": (float(np.mean([c[7] for c in mine if c[7] is not None]))
                                 if method in DRAFTING
                                 and any(c[7] is not None for c in mine) else None),
                       "speedup": None, "speedup_ci": None, "n_runs": len(mine)}
                if method in DRAFTING:
                    plain = sorted((c for c in cells if c[:3] == (t, "plain", b)),
                                   key=lambda c: c[3])
                    ratio = [c[4] / p[4] for c, p in zip(mine, plain, strict=True)]
                    row["speedup"] = float(np.median(ratio))
                    row["speedup_ci"] = list(bootstrap_ci(ratio, s.seed))
                rows.append(row)
    return rows


def format_batch(section: dict) -> str:
    """The batch section as a terminal table: tokens/s per B, plain and speculative, and
    the automatic method's speedup where the section has it (runs before it lack it)."""
    s = section["settings"]
    by_key = {(r["temperature"], r["method"], r["batch"]): r for r in section["rows"]}
    has_auto = any(r["method"] == "auto" for r in section["rows"])
    lines = [f"Throughput against batch size (k={s['k']}, {s['new_tokens']} new tokens per "
             f"sequence, {s['repeats']} repeats; tokens/s over the whole batch)",
             f"{'T':>4} {'B':>3} {'plain tok/s':>12} {'spec tok/s':>11} {'speedup':>8} "
             f"{'95% CI':>12} {'tau':>5} {'alpha':>6}"
             + (f" {'auto':>7} {'95% CI':>12}" if has_auto else "")]
    for t in s["temperatures"]:
        for b in s["sizes"]:
            plain, spec = by_key[(t, "plain", b)], by_key[(t, "speculative", b)]
            lo, hi = spec["speedup_ci"]
            line = (f"{t:>4g} {b:>3} {plain['tokens_per_s']:>12.0f} "
                    f"{spec['tokens_per_s']:>11.0f} {spec['speedup']:>7.2f}x "
                    f"{lo:>5.2f}-{hi:<6.2f} {spec['tau']:>5.2f} {spec['alpha']:>6.2f}")
            auto = by_key.get((t, "auto", b))
            if auto is not None:
                a_lo, a_hi = auto["speedup_ci"]
                line += f" {auto['speedup']:>6.2f}x {a_lo:>5.2f}-{a_hi:<6.2f}"
            lines.append(line)
    if has_auto:
        lines.append(f"auto: the draft GPT with policy='auto', speculation off above "
                     f"spec_max_batch = {s.get('spec_max_batch')} active sequences "
                     "(measured before the rows)")
    return "\n".join(lines)


__all__ = ["BATCH_SIZES", "DRAFTING", "METHODS", "QUICK_BATCH", "BatchSettings",
           "batch_settings", "format_batch", "measure", "run_batch", "summarise"]
