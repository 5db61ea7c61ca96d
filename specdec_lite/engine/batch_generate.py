"""Batched decoding of a list of prompts in one call: :func:`speculative_generate_batch`
and :func:`generate_batch`, over a :class:`specdec_lite.engine.batch.BatchEngine`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..checks import check_int
from ..rules.distributions import as_generator
from .batch import BatchEngine
from .trace import Generation


def _generators(seeds: object, n: int) -> list[np.random.Generator]:
    """One Generator per sequence: ``seeds`` is a list of n seeds or Generators, an int
    (sequence i gets ``SeedSequence(seeds).spawn(n)[i]``) or None (fresh entropy)."""
    if seeds is None or (isinstance(seeds, int | np.integer) and not isinstance(seeds, bool)):
        children = np.random.SeedSequence(None if seeds is None else int(seeds)).spawn(n)
        return [np.random.default_rng(child) for child in children]
    if not isinstance(seeds, Sequence) or len(seeds) != n:
        raise ValueError(f"seeds must be None, an int, or a list of {n} seeds (one per "
                         f"prompt), got {seeds!r:.60}")
    return [as_generator(seed) for seed in seeds]


def _per_prompt(value: object, n: int, name: str) -> list:
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n:
            raise ValueError(f"{name} must be one value or a list of {n}, got {len(value)}")
        return list(value)
    return [value] * n


def speculative_generate_batch(
    target: object,
    draft: object | None,
    prompts: Sequence[object],
    *,
    k: int,
    max_new_tokens: int | Sequence[int],
    temperature: float = 1.0,
    rule: str = "exact",
    seeds: object = None,
    eos_id: int | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    max_batch: int | None = None,
    spec_max_batch: int | None = None,
    policy: str | None = None,
    **rule_params: float,
) -> list[Generation]:
    """Speculative decoding of every prompt in ``prompts``, batched (:class:`BatchEngine`).

    Returns one :class:`~specdec_lite.engine.decode.Generation` per prompt, in order.
    ``max_new_tokens`` is one number or one per prompt; ``seeds`` one per prompt (each
    sequence's own Generator), an int (spawned into one child seed per prompt) or None.
    ``max_batch`` (default: all prompts) bounds the active sequences; the others join as
    sequences finish. ``spec_max_batch`` makes a step with more active sequences than
    that a plain one (see :class:`BatchEngine`). ``k=0`` (or ``draft=None``) is plain
    batched decoding. ``policy`` names each sequence's draft-length policy, as in
    :func:`specdec_lite.engine.decode.speculative_generate` (``k`` is then its start, or its cap).
    """
    if not isinstance(prompts, Sequence) or isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty list of token sequences")
    n = len(prompts)
    rngs = _generators(seeds, n)
    limits = _per_prompt(max_new_tokens, n, "max_new_tokens")
    engine = BatchEngine(target, draft, k=check_int(k, "k", 0), temperature=temperature,
                         rule=rule, top_k=top_k, top_p=top_p,
                         max_batch=n if max_batch is None else max_batch,
                         spec_max_batch=spec_max_batch, **rule_params)
    for i, (prompt, limit, rng) in enumerate(zip(prompts, limits, rngs, strict=True)):
        try:
            engine.add(prompt, max_new_tokens=limit, seed=rng, eos_id=eos_id, request_id=i,
                       policy=policy)
        except (TypeError, ValueError) as err:
            raise type(err)(f"prompts[{i}]: {err}") from None
    done = engine.run()
    return [done[i] for i in range(n)]


def generate_batch(target: object, prompts: Sequence[object], *,
                   max_new_tokens: int | Sequence[int], temperature: float = 1.0,
                   seeds: object = None, eos_id: int | None = None, top_k: int | None = None,
                   top_p: float | None = None, max_batch: int | None = None) -> list[Generation]:
    """Plain batched decoding: :func:`specdec_lite.engine.decode.generate` for every prompt, one
    batched target call per token (``speculative_generate_batch`` with no draft)."""
    return speculative_generate_batch(target, None, prompts, k=0, max_new_tokens=max_new_tokens,
                                      temperature=temperature, seeds=seeds, eos_id=eos_id,
                                      top_k=top_k, top_p=top_p, max_batch=max_batch)


__all__ = ["generate_batch", "speculative_generate_batch"]
