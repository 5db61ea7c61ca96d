"""The EAGLE drafter in the batched engine: its own state per sequence, or the per-thread one.

    python scripts/eagle_batch_ab.py [--repeats 5] [--tokens 64]

``BatchEngine`` gives a drafter that has ``propose_with`` (the EAGLE drafter) one drafter
cache per sequence and the features of the batched target cache. Wrapped so that only
``propose`` shows, the same drafter reads its features from the target's per-thread
default cache and keeps one drafter cache for every sequence, as any proposer would: each
sequence of a batch then catches both caches up from where the previous one left them.
This script times the two, and plain batched decoding, at B = 1 and 4 (greedy, k = 3, the
compiled forward where numba is installed, one BLAS thread), in a seeded shuffled order,
and prints the median tokens/s of each, with the machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from specdec_lite import BatchEngine, load_pretrained
from specdec_lite.bench.config import choose_prompts
from specdec_lite.bench.timing import machine_info, pin_blas_threads
from specdec_lite.models.corpus import load_text
from specdec_lite.pretrained import load_eagle, resolve_backend


class OnlyPropose:
    """A drafter seen only through ``propose``, as a proposer of any kind is."""

    def __init__(self, drafter: object) -> None:
        self.drafter = drafter

    def propose(self, context, k, sampling, rng):
        return self.drafter.propose(context, k, sampling, rng)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    pin_blas_threads()
    backend = resolve_backend("auto")
    models = load_pretrained(backend=backend)
    eagle = load_eagle(models.target)
    drafts = {"plain": None, "per-thread state": OnlyPropose(eagle), "own state": eagle}
    prompts = [models.tokenizer.encode(t)
               for t in choose_prompts(load_text("heldout"), 4, 96, 3)]

    def run(name: str, b: int) -> float:
        draft = drafts[name]
        engine = BatchEngine(models.target, draft, k=0 if draft is None else 3,
                             temperature=0.0, rule="greedy", max_batch=b)
        for i, prompt in enumerate(prompts[:b]):
            engine.add(prompt, max_new_tokens=args.tokens, seed=i, request_id=i)
        engine.admit()  # the prefill, untimed
        start = time.perf_counter()
        engine.run()
        return time.perf_counter() - start

    for name in drafts:  # warm-up
        run(name, 4)
    seconds: dict = {}
    rng = np.random.default_rng(0)
    for _ in range(args.repeats):
        for b in (1, 4):
            for name in rng.permutation(list(drafts)):
                seconds.setdefault((name, b), []).append(run(name, b))
    info = machine_info()
    print(f"{info['cpu_model']}, {info['cpu_count']} cores, OpenBLAS {info['blas']['kernel']}"
          f" kernel, {backend} forward; greedy, k = 3, {args.tokens} tokens per sequence, "
          f"{args.repeats} repeats")
    for b in (1, 4):
        for name in drafts:
            rate = b * args.tokens / np.median(seconds[(name, b)])
            print(f"B={b}  {name:<17} {rate:7.0f} tokens/s")


if __name__ == "__main__":
    main()
