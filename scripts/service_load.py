"""Load-test the service four ways and write the result as JSON (``make service-load``).

Batching on (``--max-batch 16``) and off (``--max-batch 1``), times speculation on (draft
GPT, k = 4) and off (plain decoding): each configuration gets its own server process on a
free 127.0.0.1 port and the same seeded requests (held-out prompts, greedy), sent by
``--concurrency`` clients; each run stops by itself after ``--time-limit`` seconds. The
configurations run one after another, so a busy machine shifts all of them; the JSON records
the machine (CPU, BLAS kernel) and the load average before and after.

    python scripts/service_load.py results/service_load.json [--requests 200] ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from specdec_lite.bench.config import choose_prompts
from specdec_lite.bench.timing import machine_info
from specdec_lite.models.corpus import load_text
from specdec_lite.service.launch import start_server
from specdec_lite.service.loadtest import make_requests, run_load

CONFIGS = [  # (label, max_batch, method)
    ("batched, speculative", 16, "draft"),
    ("batched, plain", 16, "plain"),
    ("one at a time, speculative", 1, "draft"),
    ("one at a time, plain", 1, "plain"),
]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="JSON file to write")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--time-limit", type=float, default=60.0)
    args = p.parse_args()
    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"service_load: error: directory {out.parent} does not exist", file=sys.stderr)
        return 2
    prompts = choose_prompts(load_text("heldout"), 20, 64, seed=11)
    runs = []
    for label, max_batch, method in CONFIGS:
        bodies = make_requests(prompts, args.requests, method=method,
                               max_tokens=args.max_tokens, temperature=0.0, k=4,
                               id_prefix=f"{method}-{max_batch}")
        with tempfile.TemporaryDirectory() as data_dir, \
                start_server(data_dir=data_dir, max_batch=max_batch,
                             max_queue=4 * args.concurrency,
                             deadline_s=args.time_limit) as server:
            load = run_load(server.url, bodies, concurrency=args.concurrency,
                            time_limit_s=args.time_limit)
        summary = dict(label=label, max_batch=max_batch, method=method, **load.summary())
        runs.append(summary)
        print(f"{label:>28}: {summary['tokens_per_s']:7.1f} tok/s, "
              f"p50 {summary['p50_s']:.2f} s, p99 {summary['p99_s']:.2f} s, "
              f"{summary['n_complete']}/{summary['n_requests']} complete, "
              f"{summary['n_lost']} lost", flush=True)
    result = dict(schema="specdec_lite.service_load/1", machine=machine_info(),
                  settings=dict(requests=args.requests, concurrency=args.concurrency,
                                max_tokens=args.max_tokens, time_limit_s=args.time_limit,
                                temperature=0.0, k=4, prompts=len(prompts)),
                  load_average=os.getloadavg(), finished=time.strftime("%Y-%m-%d %H:%M:%S"),
                  runs=runs)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
