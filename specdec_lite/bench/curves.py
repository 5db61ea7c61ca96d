"""The target's cost curve under each BLAS kernel and each backend, on one machine.

OpenBLAS picks its kernel when it loads, from the CPU or from ``OPENBLAS_CORETYPE``, so
each (kernel, backend) pair is measured in a fresh Python process: the default kernel
(what this CPU gets) and ``Haswell`` (what AMD Zen and older Intel CPUs get), each with
the numpy forward and, where the ``fast`` extra is installed, the compiled one. Every
process times :func:`~specdec_lite.bench.timing.cost_curve` after the same held-out
prefix and reports the kernel OpenBLAS says it loaded
(:func:`specdec_lite.models.kernels.blas_kernel`),
so a setting that did not take effect shows in the result.

``python -m specdec_lite.bench.curves --json results/kernel_curves.json`` writes::

    {"machine": {...}, "settings": {...},
     "curves": [{"coretype_env", "kernel", "backend", "rowwise_max", "n", "target_s",
                 "ratio", "draft_s", "c", and for the compiled backend only "skinny_rows"
                 and "parts" (forward_parts)},
                ...]}
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ..models import fast, kernels
from ..models.corpus import load_text
from ..models.kernels import LN_EPS, causal_bias
from ..models.transformer import TransformerModel
from ..pretrained import load_pretrained
from .config import choose_prompts
from .timing import cost_curve, machine_info, pin_blas_threads

CORETYPES = (None, "Haswell")  # None: the kernel OpenBLAS picks for this CPU
N_MAX = 9  # up to a Medusa tree of 8 nodes plus its root
PREFIX = 160  # tokens cached before each forward: the benchmark's mean decoding context


def measure(backend: str, n_max: int = N_MAX, repeats: int = 30, seed: int = 0) -> dict:
    """One curve in this process: seconds of a target forward over n = 1..n_max tokens
    after a ``PREFIX``-token held-out prefix, and of one draft forward (c = draft / T(1));
    for the compiled backend also the block sizes its target sends to the skinny kernel
    (``skinny_rows``, measured when it loaded) and :func:`forward_parts`."""
    models = load_pretrained(backend=backend)
    text = choose_prompts(load_text("heldout"), 1, PREFIX, seed)[0]
    prefix = np.array(models.tokenizer.encode(text)[:PREFIX], dtype=np.int64)  # [PREFIX]
    target_s, draft_s, _, _ = cost_curve(models, None, prefix, n_max, repeats, seed)
    curve = {"coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
             "kernel": kernels.blas_kernel(), "backend": backend,
             "rowwise_max": kernels.ROWWISE_MAX, "n": list(range(1, n_max + 1)),
             "target_s": target_s.tolist(), "ratio": (target_s / target_s[0]).tolist(),
             "draft_s": draft_s, "c": draft_s / target_s[0]}
    if backend == "numba":
        curve["skinny_rows"] = models.target.compiled.skinny_rows
        curve["parts"] = forward_parts(models.target, prefix, repeats=10 * repeats)
    return curve


def forward_parts(target: TransformerModel, prefix: np.ndarray, ns: tuple[int, ...] = (1, 5, 9),
                  repeats: int = 300) -> dict:
    """Where a compiled target forward's time goes, after ``prefix`` is cached: for n in
    ``ns``, the median seconds of the whole forward and, for each part of ``fast.PARTS``,
    how much less a forward that leaves that part out (in every layer) takes. The rest
    (LayerNorms, residual adds, the output layer, the call itself) is what no part
    explains. The calls of one repetition run back to back in a seeded shuffled order."""
    compiled = fast.compile_forward(target.layers, target.ln_f, target.unembed,
                                    target.config.n_head, LN_EPS)
    cache = target.new_state()
    target.forward(prefix, cache=cache)
    start = cache.length
    masks = [0] + [1 << i for i in range(len(fast.PARTS))]
    rng = np.random.default_rng(0)
    whole, parts = [], {name: [] for name in fast.PARTS}
    for n in ns:
        tokens = np.resize(prefix[::-1], n)  # [n] any valid tokens
        x = target.wte[tokens] + target.wpe[start + np.arange(n)]  # [n, d]
        bias = causal_bias(n) if n > 1 else None
        seconds = np.zeros((repeats, len(masks)))  # [repeats, masks]
        for rep in range(repeats + 1):  # repetition 0 warms up
            for j in rng.permutation(len(masks)):
                begin = time.perf_counter()
                compiled(x.copy(), cache.kv, start, bias, leave_out=masks[j])
                if rep:
                    seconds[rep - 1, j] = time.perf_counter() - begin
        median = np.median(seconds, axis=0)  # [masks]
        whole.append(float(median[0]))
        for i, name in enumerate(fast.PARTS):
            parts[name].append(float(median[0] - median[i + 1]))
    rest = [w - sum(parts[name][i] for name in fast.PARTS) for i, w in enumerate(whole)]
    return {"n": list(ns), "whole_s": whole, "parts_s": parts, "rest_s": rest}


def measure_in_process(coretype: str | None, backend: str, repeats: int, seed: int) -> dict:
    """:func:`measure` in a child process whose OpenBLAS loads with ``coretype``."""
    env = {name: value for name, value in os.environ.items() if name != "OPENBLAS_CORETYPE"}
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    command = [sys.executable, "-m", "specdec_lite.bench.curves", "--one", backend,
               "--repeats", str(repeats), "--seed", str(seed)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {coretype or 'default'} / {backend} curve failed: "
                           f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(repeats: int = 30, seed: int = 0) -> dict:
    """Every (kernel, backend) curve, each in its own process (about 20 s each)."""
    backends = ("numpy", "numba") if fast.available() else ("numpy",)
    curves = [measure_in_process(coretype, backend, repeats, seed)
              for coretype in CORETYPES for backend in backends]
    return {"timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(), "settings": {"prefix": PREFIX, "n_max": N_MAX,
                                                    "repeats": repeats, "seed": seed},
            "curves": curves}


CURVE_FIELDS = ("kernel", "backend", "n", "target_s", "ratio", "draft_s", "c")


def read_curves(path: str | Path) -> dict:
    """Read a curves file written by ``--json``, checking that it holds what the book
    reads; ``ValueError`` names the file and the missing field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable JSON file ({err})") from None
    curves = data.get("curves") if isinstance(data, dict) else None
    if not isinstance(curves, list) or not curves:
        raise ValueError(f"{path}: no 'curves' list")
    for i, curve in enumerate(curves):
        missing = [name for name in CURVE_FIELDS if name not in curve]
        if missing:
            raise ValueError(f"{path}: curves[{i}] lacks {missing}")
        if len(curve["n"]) != len(curve["ratio"]) or len(curve["n"]) != len(curve["target_s"]):
            raise ValueError(f"{path}: curves[{i}] has n, ratio and target_s of different lengths")
    for name in ("machine", "timestamp", "settings"):
        if name not in data:
            raise ValueError(f"{path}: lacks {name!r}")
    return data


def format_parts(parts: dict) -> str:
    """:func:`forward_parts` as a table: each part's microseconds at each n, and what one
    more token adds to it on average from the first n to the last."""
    ns = parts["n"]
    span = ns[-1] - ns[0]
    lines = [f"{'part':18}" + "".join(f"{f'n={n} µs':>10}" for n in ns)
             + f"{'per extra token':>17}"]
    rows = list(parts["parts_s"].items()) + [("rest", parts["rest_s"]),
                                            ("whole forward", parts["whole_s"])]
    for name, seconds in rows:
        lines.append(f"{name:18}" + "".join(f"{s * 1e6:10.0f}" for s in seconds)
                     + f"{(seconds[-1] - seconds[0]) / span * 1e6:14.0f} µs")
    return "\n".join(lines)


def format_curves(data: dict) -> str:
    """The curves as a table: T(1) and r(n) per kernel and backend."""
    ns = data["curves"][0]["n"]
    lines = [f"{'kernel':<10}{'backend':<8}{'T(1) ms':>8}{'c':>7}  "
             + " ".join(f"r({n})".rjust(5) for n in ns[1:])]
    for curve in data["curves"]:
        lines.append(f"{curve['kernel'] or '?':<10}{curve['backend']:<8}"
                     f"{curve['target_s'][0] * 1e3:>8.3f}{curve['c']:>7.3f}  "
                     + " ".join(f"{r:5.2f}" for r in curve["ratio"][1:]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specdec_lite.bench.curves",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="write the curves as JSON")
    parser.add_argument("--one", choices=("numpy", "numba"),
                        help="measure one curve in this process and print it as JSON")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.one:
        pin_blas_threads(1)
        print(json.dumps(measure(args.one, repeats=args.repeats, seed=args.seed)))
        return
    if args.json and not Path(args.json).parent.is_dir():
        parser.error(f"--json {args.json}: no folder {Path(args.json).parent}")
    data = run(args.repeats, args.seed)
    print(format_curves(data))
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
