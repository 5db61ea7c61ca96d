"""Speculation under load: the batch size above which drafting stops paying on this machine.

A batch already gives the target's matrix products many rows, so the k extra rows per
sequence that a speculative step verifies weigh more as the batch grows (chapter 7):
past some batch size a plain batched step emits tokens faster. Serving engines turn
speculation off there (vLLM by batch-size range, TensorRT-LLM by a threshold);
:class:`~specdec_lite.engine.batch.BatchEngine` does it with ``spec_max_batch``, and
:func:`measure_spec_max_batch` finds that size on the machine it runs on, in a few
seconds (2.6–2.7 s for batch sizes up to 16 on a 2-core Xeon): for each batch size B
it decodes B copies of a prompt together, plainly and speculatively, and keeps the
largest B up to which speculation was faster at every size it measured.

The answer rests on timings, so two processes can choose differently. It decides only
which steps draft, never how a token is drawn, so every step keeps the target's law and
greedy output stays the target's; at T > 0 a seed's tokens can differ between processes
that chose differently.
"""

from __future__ import annotations

import time

import numpy as np

from ..checks import check_int
from .batch import BatchEngine


def batch_gains(target: object, draft: object, prompt: np.ndarray, *, k: int,
                sizes: tuple[int, ...], new_tokens: int = 16, repeats: int = 3,
                temperature: float = 0.0, seed: int = 0) -> dict[int, float]:
    """``{B: speculative over plain tokens/s}`` for each batch size B in ``sizes``: the
    median over ``repeats`` rounds, each decoding B copies of ``prompt`` for
    ``new_tokens`` tokens together in one engine, once plainly and once with ``draft``
    at ``k`` (prefill untimed), in an order shuffled by ``seed``, after one untimed
    round that warms up."""
    k = check_int(k, "k", 1)
    repeats = check_int(repeats, "repeats", 1)
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes must be batch sizes >= 1, got {list(sizes)}")
    rng = np.random.default_rng(seed)
    ratios: dict[int, list[float]] = {int(b): [] for b in sizes}
    for round_ in range(repeats + 1):
        for b in rng.permutation(list(ratios)).tolist():
            rate = {}
            for kind in rng.permutation(["plain", "speculative"]).tolist():
                rate[kind] = _tokens_per_s(target, draft if kind == "speculative" else None,
                                           k, prompt, b, new_tokens, temperature)
            if round_:
                ratios[b].append(rate["speculative"] / rate["plain"])
    return {b: float(np.median(r)) for b, r in ratios.items()}


def _tokens_per_s(target: object, draft: object | None, k: int, prompt: np.ndarray, b: int,
                  new_tokens: int, temperature: float) -> float:
    seconds, gens = decode_together(target, draft, [prompt] * b, k=k, new_tokens=new_tokens,
                                    temperature=temperature, seeds=list(range(b)))
    return sum(len(gen.tokens) for gen in gens) / seconds


def decode_together(target: object, draft: object | None, prompts: list[np.ndarray], *,
                    k: int, new_tokens: int, temperature: float, seeds: list[object],
                    spec_max_batch: int | None = None,
                    policy: str | None = None) -> tuple[float, list]:
    """Decode ``prompts`` as one batch (a :class:`BatchEngine` of that many slots, plain
    without ``draft``), sequence i seeded by ``seeds[i]``, ``new_tokens`` each, greedily
    at ``temperature`` 0 and by the exact rule otherwise. Returns the wall seconds of the
    decoding, after the prompts are prefilled, and the Generations in prompt order."""
    engine = BatchEngine(target, draft, k=k if draft is not None else 0,
                         temperature=temperature,
                         rule="greedy" if temperature == 0 else "exact",
                         max_batch=len(prompts), spec_max_batch=spec_max_batch)
    for i, (prompt, seed) in enumerate(zip(prompts, seeds, strict=True)):
        engine.add(prompt, max_new_tokens=new_tokens, seed=seed, request_id=i, policy=policy)
    engine.admit()  # the prefill, untimed
    start = time.perf_counter()
    done = engine.run()
    return time.perf_counter() - start, [done[i] for i in range(len(prompts))]


def choose_spec_max_batch(gains: dict[int, float]) -> int:
    """The largest batch size B of ``gains`` (:func:`batch_gains`) such that speculation
    was faster than plain decoding (a gain above 1) at every measured size up to B; 0
    when it was not faster even for one sequence."""
    chosen = 0
    for b in sorted(gains):
        if not gains[b] > 1:
            break
        chosen = b
    return chosen


def measure_spec_max_batch(target: object, draft: object, prompt: np.ndarray, *, k: int,
                           max_batch: int, **options) -> tuple[int, dict[int, float]]:
    """``spec_max_batch`` for engines of up to ``max_batch`` sequences of ``target`` and
    ``draft`` at ``k``, measured here (:func:`batch_gains` over B = 1, 2, 4, ... and
    ``max_batch``; ``options`` are its own), and the gains it rests on. ``max_batch``
    itself means speculation paid at every size (no step need be plain); 0 that it did
    not pay even alone (every step plain)."""
    max_batch = check_int(max_batch, "max_batch", 1)
    sizes = sorted({1, max_batch, *(2 ** i for i in range(1, 9) if 2 ** i < max_batch)})
    gains = batch_gains(target, draft, prompt, k=k, sizes=tuple(sizes), **options)
    return choose_spec_max_batch(gains), gains


__all__ = ["batch_gains", "choose_spec_max_batch", "decode_together",
           "measure_spec_max_batch"]
