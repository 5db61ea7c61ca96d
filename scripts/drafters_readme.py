"""Render the README's drafters table from ``bench --drafters`` results (no hand-typed
numbers)::

    python scripts/drafters_readme.py README.md NAME=PATH [NAME=PATH ...]

Replaces the text between ``<!-- drafters:start -->`` and ``<!-- drafters:end -->`` with
one line per result (its NAME, CPU, OpenBLAS kernel, forward and time), then every
speculative method's median speedup over plain decoding, per temperature and category,
one column per result (``+``: the 95% CI lies above 1, ``-``: below). NAME is at most five
characters (a column heading).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench_readme import replace_block

from specdec_lite.bench import drafters


def render(results: dict[str, dict]) -> str:
    lines = []
    for name, data in results.items():
        m = data["machine"]
        lines.append(f"- `{name}`: {m['cpu_model']} ({m['cpu_count']} cores), "
                     f"{m['blas']['kernel']} kernel, {data['backend']} forward, "
                     f"{data['timestamp'][:10]}")
    s = next(iter(results.values()))["settings"]
    lines += ["", f"{s['prompts']} prompts per category, {s['new_tokens']} new tokens, "
              f"{s['repeats']} repeats; median speedup over plain decoding "
              "(+ CI above 1, - CI below 1):", "", "```text",
              drafters.format_speedups(results), "```"]
    return "\n".join(lines)


def main(readme_path: str, *pairs: str) -> None:
    results = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not 0 < len(name) <= 5:
            sys.exit(f"expected NAME=PATH with a NAME of 1 to 5 characters, got {pair!r}")
        results[name] = drafters.read_json(path)
    if not results:
        sys.exit("no results given")
    readme = Path(readme_path)
    readme.write_text(replace_block(readme.read_text(), "drafters", render(results),
                                    readme_path))
    print(f"updated {readme_path} from {len(results)} results")


if __name__ == "__main__":
    main(*sys.argv[1:])
