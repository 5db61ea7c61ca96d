"""Does the skinny kernel pay in a whole decode on this CPU? An A/B timing.

    python scripts/matmul_path_ab.py blas       # every block through the BLAS paths
    python scripts/matmul_path_ab.py measured   # the block sizes measured at load take
                                                # the skinny kernel (the default)

Run the two alternately, a few times each: every run decodes 6 held-out prompts, 3 times,
plainly and with the draft GPT at k = 3 (greedy, 128 new tokens) on the compiled forward,
and prints the median wall time of each and the median ratio.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from specdec_lite.bench.config import choose_prompts
from specdec_lite.bench.timing import machine_info, pin_blas_threads
from specdec_lite.models import fast


def main(mode: str) -> None:
    pin_blas_threads()
    if mode == "blas":
        rule = fast.matmul_paths
        fast.matmul_paths = lambda kernel, vendor=None: (rule(kernel)[0], 0, rule(kernel)[2])
    from specdec_lite import generate, load_pretrained, speculative_generate
    from specdec_lite.models.corpus import load_text

    models = load_pretrained(backend="numba")
    prompts = [models.tokenizer.encode(t)
               for t in choose_prompts(load_text("heldout"), 6, 96, 0)]

    def plain(p):
        return generate(models.target, p, max_new_tokens=128, temperature=0)

    def speculative(p):
        return speculative_generate(models.target, models.draft, p, k=3,
                                    max_new_tokens=128, temperature=0)

    def seconds(decode, p) -> float:
        start = time.perf_counter()
        decode(p)
        return time.perf_counter() - start

    plain(prompts[0]), speculative(prompts[0])  # warm-up (compiles on a first run)
    pairs = np.array([(seconds(plain, p), seconds(speculative, p))
                      for _ in range(3) for p in prompts])  # [18, 2]
    m = machine_info()
    print(f"{mode}: {m['cpu_model']}, kernel {m['blas']['kernel']}, skinny kernel at "
          f"{models.target.compiled.skinny_rows} rows; plain "
          f"{1e3 * np.median(pairs[:, 0]):.1f} ms, speculative {1e3 * np.median(pairs[:, 1]):.1f}"
          f" ms, speedup {np.median(pairs[:, 0] / pairs[:, 1]):.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("blas", "measured"):
        print("usage: matmul_path_ab.py blas|measured", file=sys.stderr)
        raise SystemExit(2)
    main(sys.argv[1])
