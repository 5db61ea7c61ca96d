"""Render the README's tables for batching, the service and the transformers bridge from
their committed JSON (no hand-typed numbers).

    python scripts/extras_readme.py README.md

Replaces the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` for NAME in
``batch`` (results/batch_throughput.json), ``service`` (results/service_load.json) and
``hf`` (results/bench_hf.json); a missing file leaves its section as it is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"


def machine(m: dict) -> str:
    blas = m.get("blas") or {}
    return (f"{m['cpu_model']} ({m['cpu_count']} cores), numpy {m['numpy']}, "
            f"{blas.get('library', '?')} {blas.get('kernel', '?')} kernel")


def batch_table(d: dict) -> str:
    s = d["settings"]
    lines = [f"Measured on {machine(d['machine'])}: k = {s['k']}, {s['new_tokens']} new tokens "
             f"per sequence, {s['repeats']} repeats; tokens/s over the whole batch (medians).",
             "", "| T | B | plain tok/s | speculative tok/s | speedup | 95% CI | tau |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    plain = {(r["temperature"], r["batch"]): r for r in d["rows"] if r["method"] == "plain"}
    for r in d["rows"]:
        if r["method"] == "plain":
            continue
        p = plain[(r["temperature"], r["batch"])]
        lo, hi = r["speedup_ci"]
        lines.append(f"| {r['temperature']:g} | {r['batch']} | {p['tokens_per_s']:.0f} | "
                     f"{r['tokens_per_s']:.0f} | {r['speedup']:.2f}x | {lo:.2f}-{hi:.2f} | "
                     f"{r['tau']:.2f} |")
    return "\n".join(lines)


def service_table(d: dict) -> str:
    s = d["settings"]
    lines = [f"Measured on {machine(d['machine'])}, {d['finished']}: {s['requests']} requests "
             f"from {s['concurrency']} clients, {s['max_tokens']} greedy tokens each, k = "
             f"{s['k']}, each run bounded to {s['time_limit_s']:g} s.", "",
             "| configuration | tokens/s | requests/s | p50 latency | p99 latency | "
             "complete | lost |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in d["runs"]:
        lines.append(f"| {r['label']} | {r['tokens_per_s']:.0f} | {r['requests_per_s']:.1f} | "
                     f"{r['p50_s']:.2f} s | {r['p99_s']:.2f} s | {r['n_complete']}/"
                     f"{r['n_requests']} | {r['n_lost']} |")
    return "\n".join(lines)


def hf_table(d: dict) -> str:
    v = d["versions"]
    lines = [f"Measured on {machine(d['machine'])}, torch {v['torch']}, transformers "
             f"{v['transformers']}, one thread; greedy, k = {d['k']}, the exported shipped "
             f"GPT pair, interleaved; same tokens from every method: {d['same_tokens']}.", "",
             "| method | tokens/s | 95% CI | vs HF greedy | forward ms/token | "
             "engine ms/token |", "| --- | --- | --- | --- | --- | --- |"]
    for r in d["rows"]:
        lo, hi = r["tokens_per_s_ci"]
        speed = r["speedup_vs_hf_greedy"]
        lines.append(f"| {r['label']} | {r['tokens_per_s']:.0f} | {lo:.0f}-{hi:.0f} | "
                     f"{'-' if speed is None else f'{speed:.2f}x'} | "
                     f"{r['ms_per_token_forward']:.2f} | {r['ms_per_token_engine']:.2f} |")
    return "\n".join(lines)


SECTIONS = {"batch": ("batch_throughput.json", batch_table),
            "service": ("service_load.json", service_table),
            "hf": ("bench_hf.json", hf_table)}


def main(readme_path: str) -> None:
    readme = Path(readme_path)
    text = readme.read_text()
    for name, (file, render) in SECTIONS.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        path = RESULTS / file
        if start not in text or end not in text or not path.is_file():
            print(f"{name}: no markers or no {path}; left as it is")
            continue
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{render(json.loads(path.read_text()))}\n{end}{tail}"
    readme.write_text(text)
    print(f"updated {readme_path}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
