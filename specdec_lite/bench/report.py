"""Reports of a JSON result: the performance bars, the terminal table, the README's
markdown summary and the comparison of two runs. Every function reads the JSON dict
(``BenchResult.to_json()`` or a loaded result file), so committed results can be
reported again without re-running.
"""

from __future__ import annotations

import math

from .stats import REPRODUCE_WITHIN, verify_ratio


def evaluate_bars(data: dict) -> list[dict]:
    """The project's performance bars on the measured rows of a JSON result (reported only)."""
    real = [r for r in data["rows"] if not r["simulated"]]

    def best(kinds: tuple[str, ...], temperature: float) -> float | None:
        values = [r["speedup"] for r in real
                  if r["method"] in kinds and r["temperature"] == temperature]
        return max(values, default=None)

    ratios = [r["measured_over_predicted"] for r in real
              if r["method"] != "autoregressive" and r["measured_over_predicted"]]
    worst = max(ratios, key=lambda x: abs(math.log(x)), default=None)
    overheads = [r["overhead"] for r in real if r["overhead"] is not None]
    drafts = ("speculative", "ngram")
    bars = [("draft-model greedy speedup, best draft and k", ">= 1.8", best(drafts, 0.0),
             lambda v: v >= 1.8),
            ("draft-model exact T=1 speedup, best draft and k", ">= 1.5", best(drafts, 1.0),
             lambda v: v >= 1.5),
            ("Medusa greedy speedup, best tree", ">= 1.3", best(("medusa",), 0.0),
             lambda v: v >= 1.3),
            ("measured / predicted, worst method", "0.9..1.1", worst,
             lambda v: 0.9 <= v <= 1.1),
            ("engine overhead, worst method", "<= 5%", max(overheads, default=None),
             lambda v: v <= 0.05)]
    comparison = data.get("comparison")
    if comparison and comparison.get("rows") and "reproduced" in comparison:
        share = comparison["reproduced"] / len(comparison["rows"])
        bars.append(("reproduction: second-run medians in the first CI or within 0.05",
                     "all rows", share, lambda v: v == 1.0))
    return [{"name": name, "threshold": threshold, "value": value,
             "status": "n/a" if value is None else ("PASS" if ok(value) else "MISS")}
            for name, threshold, value, ok in bars]


def _f(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def format_table(data: dict, bars: bool = True) -> str:
    """The terminal report of a JSON result: rows (measured, then SIMULATED), cost curve,
    profile, bars (unless ``bars`` is False) and notes."""
    s, m = data["settings"], data["machine"]
    lines = [f"specdec_lite bench{' --quick' if s['quick'] else ''}: {s['prompts']} held-out "
             f"prompts x {s['repeats']} repeats, {s['new_tokens']} new tokens after "
             f"{s['prompt_len']}; {m['cpu_model']} ({m['cpu_count']} cores), "
             f"BLAS threads {m['blas_threads'] or 'default'}"]
    head = (f"{'method':<38}{'speedup':>8} {'95% CI':>13} {'pred':>6} {'pred(tau)':>9} "
            f"{'pred(iso)':>9} {'meas/pred':>9} {'alpha':>6} {'tau':>5} {'tok/s':>7} "
            f"{'overhead':>8}")
    for simulated in (False, True):
        rows = [r for r in data["rows"] if r["simulated"] == simulated]
        if not rows:
            continue
        title = (f"SIMULATED accelerator, width {s['simulate_width']}: a target forward over "
                 f"n <= {s['simulate_width']} tokens costs T(1); times computed, not measured"
                 if simulated else "measured (wall clock, medians over cells)")
        lines += ["", title, head, "-" * len(head)]
        for r in rows:
            ci = "[{:.2f},{:.2f}]".format(*r["speedup_ci"])
            lines.append(f"{r['label']:<38}{r['speedup']:>8.2f} {ci:>13} "
                         f"{_f(r['predicted_speedup']):>6} {_f(r['predicted_speedup_tau']):>9} "
                         f"{_f(r['predicted_speedup_isolated']):>9} "
                         f"{_f(r['measured_over_predicted']):>9} "
                         f"{_f(r['alpha'], '.3f'):>6} {r['tau']:>5.2f} "
                         f"{r['tokens_per_s']:>7.0f} {_f(r['overhead'], '.1%'):>8}")
    curve = data["cost_curve"]
    ratio = " ".join(f"{n}:{x:.2f}" for n, x in zip(curve["n"], curve["ratio"], strict=True))
    lines += ["", f"cost curve after a {curve['prefix']}-token prefix: T(1) = "
              f"{curve['target_s'][0] * 1e3:.3f} ms; T(n)/T(1) = {ratio}",
              f"draft cost c = {data['c']:.3f}; n-gram draft c_ngram = "
              f"{_f(data.get('c_ngram'), '.3f')}; Medusa heads c_heads = "
              f"{_f(data['c_heads'], '.3f')}; alpha on held-out text: greedy "
              f"{data['alpha_text']['greedy']:.3f}, T=1 {data['alpha_text']['T=1']:.3f}"
              + ("" if "ngram" not in data["alpha_text"] else
                 f" (n-gram: greedy {data['alpha_text']['ngram']['greedy']:.3f}, "
                 f"T=1 {data['alpha_text']['ngram']['T=1']:.3f})")]
    paid = data["in_run_costs"]
    lines.append("costs in the runs (they price pred and pred(tau)): T_run(n)/T_run(1) = "
                 + " ".join(f"{n}:{x:.2f}" for n, x in zip(paid["n"], paid["ratio"], strict=True))
                 + f"; c = {_f(paid['c'], '.3f')}, c_ngram = {_f(paid['c_ngram'], '.3f')}, "
                 f"c_heads = {_f(paid['c_heads'], '.3f')}")
    lines.append(f"in-run / isolated forward cost: {in_run_summary(data)}")
    if data["greedy_loops"] is not None:
        lines.append(f"greedy AR outputs ending in a loop: {data['greedy_loops']:.0%}")
    for label, prof in data["profile"].items():
        engine = prof["wall_s"] - prof["forward_s"]
        top = ", ".join(f"{name} {sec / prof['wall_s']:.1%}" for name, sec in prof["engine"][:4])
        lines.append(f"profile {label}: forwards {prof['forward_s'] / prof['wall_s']:.0%}, "
                     f"engine {engine / prof['wall_s']:.0%} ({top})")
        split = prof.get("split")  # absent from results made before it was measured
        if split is not None:
            lines.append(f"  without the profiler, {split['runs']} runs: forwards "
                         f"{split['forwards']:.1%}, the rest of the compiled calls "
                         f"{split['compiled']:.1%}, Python around them {split['python']:.1%}")
    if bars:
        lines += ["", "bars (reported, not asserted):", format_bars(data)]
    return "\n".join(lines + [f"note: {n}" for n in data["notes"]])


def format_bars(data: dict) -> str:
    """The project's performance bars of a JSON result, one aligned line each: name,
    threshold, the value reached and PASS or MISS."""
    width = max((len(b["name"]) for b in data["bars"]), default=0)
    lines = []
    for b in data["bars"]:
        value = _f(b["value"], ".1%" if "overhead" in b["name"] else ".2f")
        lines.append(f"  {b['name']:<{width}}  {b['threshold']:<11} {value:>7}  {b['status']}")
    return "\n".join(lines)


def in_run_summary(data: dict, min_calls: int = 20) -> str:
    """Mean forward cost inside the runs over the isolated cost curve, per size."""
    curve, parts = data["cost_curve"], []
    isolated = {"draft": curve["draft_s"], "heads": curve["heads_s"],
                "ngram": curve.get("ngram_s")}
    for who, entries in curve["in_run"].items():
        for n, seconds, count in entries:
            if count < min_calls:
                continue
            if who == "target":
                base = curve["target_s"][n - 1] if n <= len(curve["target_s"]) else None
            else:
                base = isolated[who] if n == 1 else None
            if base:
                parts.append(f"{who} n={n} {seconds / base:.2f}")
    return ", ".join(parts) or "-"


def kernel_words(data: dict) -> str:
    """", OpenBLAS kernel SkylakeX, numba backend" for a result that records them."""
    blas = data["machine"].get("blas") or {}
    backend = data["settings"].get("backend")
    return ((f", OpenBLAS kernel {blas['kernel']}" if blas.get("kernel") else "")
            + (f", {backend} backend" if backend else ""))


def markdown_summary(data: dict, comparison: dict | None = None) -> str:
    """The README's headline table of a JSON result, labelled with its machine, and a line
    on how a second run reproduced it if ``comparison`` (from :func:`compare_runs`, with
    this result as the reference) is given."""
    m, s = data["machine"], data["settings"]
    blas = ", ".join(f"{k}={v}" for k, v in m["blas_threads"].items()) or "default"
    lines = [f"Measured on {m['cpu_model']} ({m['cpu_count']} cores, numpy {m['numpy']}"
             f"{kernel_words(data)}, BLAS threads {blas}), {data['timestamp']}: "
             f"{s['prompts']} held-out prompts x {s['repeats']} repeats, {s['new_tokens']} "
             "new tokens each. "
             "Best setting per method; speedup is the median over (prompt, repeat) cells, "
             "with a bootstrap 95% CI. The predictions price every forward at its mean cost "
             "inside the runs; the isolated column uses the cost curve timed after them.",
             "",
             "| method | speedup | 95% CI | predicted | predicted from tau "
             "| predicted, isolated costs | measured / predicted | alpha | tau | overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    real = [r for r in data["rows"] if not r["simulated"]]
    groups: dict[tuple, list] = {}
    for r in real:
        groups.setdefault((r["method"], r["temperature"]), []).append(r)
    for rows in groups.values():
        r = max(rows, key=lambda r: r["speedup"])
        lines.append(f"| {r['label']} | {r['speedup']:.2f}x | "
                     "{:.2f}-{:.2f} | ".format(*r["speedup_ci"])
                     + f"{_f(r['predicted_speedup'])} | {_f(r['predicted_speedup_tau'])} | "
                     f"{_f(r['predicted_speedup_isolated'])} | "
                     f"{_f(r['measured_over_predicted'])} | "
                     f"{_f(r['alpha'], '.2f')} | {r['tau']:.2f} | {_f(r['overhead'], '.1%')} |")
    curve, paid = data["cost_curve"], data["in_run_costs"]
    sizes = [n for n in (2, 5, len(curve["n"])) if n <= len(curve["n"])]
    lines += ["", f"Isolated cost curve: T(1) = {curve['target_s'][0] * 1e3:.2f} ms, "
              + ", ".join(f"T({n})/T(1) = {verify_ratio(curve, n):.2f}" for n in sizes)
              + f"; draft cost c = {data['c']:.3f}"
              + ("" if data.get("c_ngram") is None else f", n-gram draft c = {data['c_ngram']:.3f}")
              + ". In the runs: "
              + ", ".join(f"T({n})/T(1) = {verify_ratio(paid, n):.2f}" for n in sizes
                          if verify_ratio(paid, n) is not None)
              + f"; c = {_f(paid['c'], '.3f')}"
              + ("" if paid["c_ngram"] is None else f", n-gram c = {paid['c_ngram']:.3f}")
              + ".", "",
              "| bar | threshold | value | status |", "| --- | --- | --- | --- |"]
    if comparison is not None and comparison["reference"] != data["timestamp"]:
        raise ValueError("comparison: its reference is not this result")
    bars = evaluate_bars(data | {"comparison": comparison}) if comparison else data["bars"]
    for b in bars:
        value = _f(b["value"], ".1%" if "overhead" in b["name"] or "reproduction" in b["name"]
                   else ".2f")
        lines.append(f"| {b['name']} | {b['threshold']} | {value} | {b['status']} |")
    if comparison is not None:
        n = len(comparison["rows"])
        lines += ["", f"Reproduction (`make bench-check`, a second full run at "
                  f"{comparison['new']}): {comparison['in_reference_ci']} of {n} second-run "
                  f"medians fall inside this run's 95% CI"
                  + (f", {comparison['reproduced']} of {n} are inside it or within "
                     f"{REPRODUCE_WITHIN} of this run's median" if "reproduced" in comparison
                     else "")
                  + f", and the two CIs overlap for {comparison['overlap']} of {n} "
                  "configurations."]
    return "\n".join(lines)


def format_comparison(comparison: dict) -> str:
    """The terminal report of :func:`compare_runs`."""
    n = len(comparison["rows"])
    lines = [f"reproduction: run of {comparison['new']} against the reference run of "
             f"{comparison['reference']}",
             f"{'method':<38}{'reference [95% CI]':>22}{'new [95% CI]':>22}  inside  overlap",
             "-" * 96]
    for r in comparison["rows"]:
        ref, new = ("{:.2f} [{:.2f},{:.2f}]".format(*r[key]) for key in ("reference", "new"))
        lines.append(f"{r['label']:<38}{ref:>22}{new:>22}  "
                     f"{'yes' if r['in_reference_ci'] else 'NO':>6}  "
                     f"{'yes' if r['overlap'] else 'NO':>7}")
    reproduced = (f"; inside it or within {REPRODUCE_WITHIN}: {comparison['reproduced']} of {n}"
                  if "reproduced" in comparison else "")
    lines += ["", f"new median inside the reference CI: {comparison['in_reference_ci']} of {n} "
              f"rows{reproduced}; CIs overlap: {comparison['overlap']} of {n}",
              "costs (reference -> new): " + "; ".join(
                  f"{name} {_f(a, '.3f')} -> {_f(b, '.3f')}"
                  for name, (a, b) in comparison["costs"].items())]
    return "\n".join(lines)


def kernels_summary(default: dict, other: dict | None, curves: dict | None) -> str:
    """The README's comparison of BLAS kernels: the cost curves of ``curves`` (from
    ``bench.curves``) and the best measured speedup per method in two full runs on one
    machine, ``default`` (this CPU's kernel) and ``other`` (``OPENBLAS_CORETYPE=Haswell``)."""
    lines = []
    if curves is not None:
        m = curves["machine"]
        lines += [f"Cost curves on {m['cpu_model']}, {curves['timestamp']} "
                  f"(`python -m specdec_lite.bench.curves`, each kernel and backend in its own "
                  f"process, {curves['settings']['prefix']} tokens cached):", "",
                  "| OpenBLAS kernel | backend | T(1) ms | T(2)/T(1) | T(5)/T(1) | T(9)/T(1) "
                  "| draft c |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for c in curves["curves"]:
            ratio = dict(zip(c["n"], c["ratio"], strict=True))
            lines.append(f"| {c['kernel']} | {c['backend']} | {c['target_s'][0] * 1e3:.3f} | "
                         + " | ".join(_f(ratio.get(n)) for n in (2, 5, 9))
                         + f" | {c['c']:.3f} |")
        lines.append("")
    runs = [default] + ([other] if other is not None else [])
    names = [(r["machine"].get("blas") or {}).get("kernel") or "?" for r in runs]
    stamps = ", ".join(f"{n}: {r['timestamp']}" for n, r in zip(names, runs, strict=True))
    backend = default["settings"].get("backend") or "numpy"
    lines += [f"Best measured speedup per method, full runs ({stamps}, {backend} backend):",
              "",
              "| method | " + " | ".join(f"{n} kernel" for n in names) + " |",
              "| --- |" + " --- |" * len(runs)]
    keys = []
    for r in default["rows"]:
        key = (r["method"], r["temperature"])
        if not r["simulated"] and r["method"] != "autoregressive" and key not in keys:
            keys.append(key)
    for method, t in keys:
        cells = []
        for run in runs:
            rows = [r for r in run["rows"] if not r["simulated"] and r["method"] == method
                    and r["temperature"] == t]
            best = max(rows, key=lambda r: r["speedup"], default=None)
            setting = "" if best is None else best["label"].split(" T=")[0]
            cells.append("-" if best is None else f"{best['speedup']:.2f}x ({setting})")
        lines.append(f"| {method}, T={t:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
