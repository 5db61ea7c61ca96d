"""Does verifying a Python proposer's tokens in the compiled step pay? An A/B timing.

    python scripts/verify_step_ab.py [--json results/verify_step_ab.json]

On the compiled forward, for prompt lookup (k = 4), the n-gram draft (k = 3) and the
EAGLE-style drafter (k = 3) at T = 0 and T = 1: each held-out prompt decoded with the
compiled step (prompt lookup's and the n-gram's tokens proposed in Python and verified in
one compiled call; the EAGLE drafter's whole step in its own kernel) and with the Python
step, alternately, in one process. Prints and writes the median wall time of each,
the median of the per-run ratios (Python ÷ compiled: above 1, the compiled verification
is faster) with its bootstrap 95% CI, and the machine. Both arms emit the same tokens
(checked here too). It once showed the EAGLE drafter slower compiled: its verification
re-read the whole prompt, since the drafter had run the target in between (fixed, tested).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from specdec_lite.bench.config import choose_prompts
from specdec_lite.bench.stats import bootstrap_ci
from specdec_lite.bench.timing import machine_info, pin_blas_threads

PROMPTS, PROMPT_LEN, NEW_TOKENS, REPEATS = 6, 96, 128, 3


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    pin_blas_threads()
    from specdec_lite import PromptLookup, load_pretrained, speculative_generate
    from specdec_lite.engine import compiled_step
    from specdec_lite.models import fast
    from specdec_lite.models.corpus import fit_ngrams, load_text
    from specdec_lite.pretrained import load_eagle

    if not fast.available():
        sys.exit(f"needs the compiled backend: {fast.INSTALL_HINT}")
    models = load_pretrained(backend="numba")
    prompts = [np.array(models.tokenizer.encode(t), dtype=np.int64)
               for t in choose_prompts(load_text("heldout"), PROMPTS, PROMPT_LEN, 0)]
    ngram = fit_ngrams()[2]
    if ngram.vocab_size != models.target.vocab_size:
        ngram = None  # the corpus n-gram speaks another vocabulary: left out
    proposers = {"prompt lookup": (PromptLookup(), 4),
                 "EAGLE drafter": (load_eagle(models.target), 3)}
    if ngram is not None:
        proposers["n-gram draft"] = (ngram, 3)
    compiled_choice = compiled_step.step_for

    arms = {"compiled": compiled_choice, "python": lambda *a: None}

    def run(arm, proposer, k, temperature, prompt, seed):
        compiled_step.step_for = arms[arm]
        try:
            start = time.perf_counter()
            gen = speculative_generate(models.target, proposer, prompt, k=k,
                                       max_new_tokens=NEW_TOKENS, temperature=temperature,
                                       seed=seed)
            return time.perf_counter() - start, gen.tokens
        finally:
            compiled_step.step_for = compiled_choice

    rows = []
    for name, (proposer, k) in proposers.items():
        for temperature in (0.0, 1.0):
            for arm in arms:  # warm-up: compiles on a first run
                run(arm, proposer, k, temperature, prompts[0], 0)
            seconds = {arm: [] for arm in arms}
            for rep in range(REPEATS):
                for i, prompt in enumerate(prompts):
                    outs = []
                    for arm in (arms if (rep + i) % 2 == 0 else reversed(list(arms))):
                        s, tokens = run(arm, proposer, k, temperature, prompt, rep)
                        seconds[arm].append(s)
                        outs.append(tokens)
                    if not np.array_equal(outs[0], outs[1]):
                        sys.exit(f"{name}, T = {temperature:g}: the two steps disagree")
            ratio = np.array(seconds["python"]) / np.array(seconds["compiled"])  # [runs]
            lo, hi = bootstrap_ci(ratio)
            rows.append({"proposer": name, "k": k, "temperature": temperature,
                         "compiled_ms": 1e3 * float(np.median(seconds["compiled"])),
                         "python_ms": 1e3 * float(np.median(seconds["python"])),
                         "ratio": float(np.median(ratio)), "ratio_ci": [lo, hi],
                         "runs": len(ratio)})
    machine = machine_info()
    print(f"{machine['cpu_model']}, kernel {machine['blas']['kernel']}; {PROMPTS} prompts x "
          f"{REPEATS}, {NEW_TOKENS} new tokens; ratio = Python step / compiled step")
    for r in rows:
        print(f"{r['proposer']:14} k = {r['k']} T = {r['temperature']:g}: compiled "
              f"{r['compiled_ms']:6.1f} ms, Python {r['python_ms']:6.1f} ms, ratio "
              f"{r['ratio']:.2f} [{r['ratio_ci'][0]:.2f}, {r['ratio_ci'][1]:.2f}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "specdec_lite.verify_step_ab/1",
                       "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       "machine": machine, "rows": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
