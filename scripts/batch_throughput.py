"""Throughput against batch size, alone (``make batch-throughput``): the benchmark's
``batch`` section (:mod:`specdec_lite.bench.batch`) with 5 repeats, written as JSON with
the machine (CPU, BLAS kernel, load average), for chapter 7.

    python scripts/batch_throughput.py results/batch_throughput.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from specdec_lite.bench.batch import BatchSettings, format_batch, measure
from specdec_lite.bench.config import choose_prompts
from specdec_lite.bench.timing import machine_info, pin_blas_threads
from specdec_lite.corpus import load_text
from specdec_lite.pretrained import load_pretrained


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).parent.is_dir():
        print("usage: batch_throughput.py OUT.json (in an existing directory)", file=sys.stderr)
        return 2
    pin_blas_threads()
    models = load_pretrained()
    texts = choose_prompts(load_text("heldout"), 16, 96, seed=0)
    prompts = [models.tokenizer.encode(t) for t in texts]
    section = measure(models, prompts, replace(BatchSettings(), repeats=5))
    section["machine"] = machine_info()
    Path(argv[0]).write_text(json.dumps(section, indent=1) + "\n")
    print(format_batch(section))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
