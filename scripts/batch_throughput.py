"""Throughput against batch size, alone (``make batch-throughput``): the benchmark's
``batch`` section (:mod:`specdec_lite.bench.batch`) with 5 repeats, written as JSON with
the machine (CPU, BLAS kernel, load average), for chapter 7.

    python scripts/batch_throughput.py results/batch_throughput.json [--backend numba]

``--backend`` is the GPTs' forward (default numpy, the committed file's): with ``numba``
the batched engine runs the compiled forward, batch-first, as the service does by default.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from specdec_lite.bench.batch import BatchSettings, format_batch, measure
from specdec_lite.bench.config import choose_prompts
from specdec_lite.bench.timing import machine_info, pin_blas_threads
from specdec_lite.models.corpus import load_text
from specdec_lite.pretrained import BACKEND_CHOICES, load_pretrained, resolve_backend


def main(argv: list[str]) -> int:
    backend = "numpy"
    if len(argv) == 3 and argv[1] == "--backend" and argv[2] in BACKEND_CHOICES:
        backend, argv = argv[2], argv[:1]
    if len(argv) != 1 or not Path(argv[0]).parent.is_dir():
        print("usage: batch_throughput.py OUT.json [--backend auto|numpy|numba] (OUT in an "
              "existing directory)", file=sys.stderr)
        return 2
    try:
        backend = resolve_backend(backend)
    except ValueError as exc:
        print(f"batch_throughput.py: error: {exc}", file=sys.stderr)
        return 2
    pin_blas_threads()
    models = load_pretrained(backend=backend)
    texts = choose_prompts(load_text("heldout"), 16, 96, seed=0)
    prompts = [models.tokenizer.encode(t) for t in texts]
    section = measure(models, prompts, replace(BatchSettings(), repeats=5))
    section["machine"] = machine_info()
    section["backend"] = backend
    Path(argv[0]).write_text(json.dumps(section, indent=1) + "\n")
    print(format_batch(section))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
