"""Render the README's benchmark table from a benchmark JSON (no hand-typed numbers).

    python scripts/bench_readme.py results/bench.json README.md [results/bench_check.json]

Replaces the text between ``<!-- bench:start -->`` and ``<!-- bench:end -->``. The optional
third file is a second run made by ``make bench-check``; its comparison is summarised when
it was made against this very result (a stale one is left out).
"""

from __future__ import annotations

import sys
from pathlib import Path

from specdec_lite.bench import markdown_summary, read_json

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def main(json_path: str, readme_path: str, check_path: str | None = None) -> None:
    data = read_json(json_path)
    comparison = None
    if check_path is not None and Path(check_path).is_file():
        comparison = read_json(check_path).get("comparison")
        if comparison is not None and comparison["reference"] != data["timestamp"]:
            print(f"{check_path} compares another run; left out")
            comparison = None
    readme = Path(readme_path)
    text = readme.read_text()
    if START not in text or END not in text:
        sys.exit(f"{readme_path}: no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{markdown_summary(data, comparison)}\n{END}{tail}")
    print(f"updated {readme_path} from {json_path}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
