"""Which small-block path should the compiled forward take on this CPU? An A/B timing.

    python scripts/matmul_path_ab.py intel    # the rule Intel CPUs get (BLAS small path)
    python scripts/matmul_path_ab.py vendor   # the rule this CPU's vendor gets

Run the two alternately, a few times each: every run decodes 6 held-out prompts, 3 times,
plainly and with the draft GPT at k = 3 (greedy, 128 new tokens) on the compiled forward,
and prints the median wall time of each and the median ratio. ``specdec_lite.models.fast``'s
``SMALL_PATH_VENDORS`` comment quotes such a run.
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
    if mode == "intel":
        vendor_rule = fast.matmul_paths
        fast.matmul_paths = lambda kernel, vendor=None: vendor_rule(kernel, "GenuineIntel")
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
    print(f"{mode}: {m['cpu_model']}, kernel {m['blas']['kernel']}, paths "
          f"{fast.matmul_paths(m['blas']['kernel'], m['blas']['cpu_vendor'])}; plain "
          f"{1e3 * np.median(pairs[:, 0]):.1f} ms, speculative {1e3 * np.median(pairs[:, 1]):.1f}"
          f" ms, speedup {np.median(pairs[:, 0] / pairs[:, 1]):.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("intel", "vendor"):
        print("usage: matmul_path_ab.py intel|vendor", file=sys.stderr)
        raise SystemExit(2)
    main(sys.argv[1])
