"""Render the README's benchmark table from a benchmark JSON (no hand-typed numbers).

    python scripts/bench_readme.py results/bench.json README.md

Replaces the text between ``<!-- bench:start -->`` and ``<!-- bench:end -->``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specdec_lite.bench import markdown_summary

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def main(json_path: str, readme_path: str) -> None:
    data = json.loads(Path(json_path).read_text())
    readme = Path(readme_path)
    text = readme.read_text()
    if START not in text or END not in text:
        sys.exit(f"{readme_path}: no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{markdown_summary(data)}\n{END}{tail}")
    print(f"updated {readme_path} from {json_path}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
