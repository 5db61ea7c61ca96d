"""Render the README's benchmark table from a benchmark JSON (no hand-typed numbers).

    python scripts/bench_readme.py results/bench.json README.md [results/bench_check.json
        [results/bench_haswell.json [results/kernel_curves.json]]]

Replaces the text between ``<!-- bench:start -->`` and ``<!-- bench:end -->``. The optional
third file is a second run made by ``make bench-check``; its comparison is summarised when
it was made against this very result (a stale one is left out). The fourth and fifth, a
full run under ``OPENBLAS_CORETYPE=Haswell`` and the kernels' cost curves, fill the
``<!-- kernels:start -->`` ... ``<!-- kernels:end -->`` block (missing files are left out).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specdec_lite.bench import kernels_summary, markdown_summary, read_json


def replace_block(text: str, name: str, body: str, where: str) -> str:
    """``text`` with the lines between ``<!-- name:start -->`` and ``<!-- name:end -->``
    replaced by ``body``; exits naming ``where`` if the markers are missing."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        sys.exit(f"{where}: no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def main(json_path: str, readme_path: str, check_path: str | None = None,
         haswell_path: str | None = None, curves_path: str | None = None) -> None:
    data = read_json(json_path)
    comparison = None
    if check_path is not None and Path(check_path).is_file():
        comparison = read_json(check_path).get("comparison")
        if comparison is not None and comparison["reference"] != data["timestamp"]:
            print(f"{check_path} compares another run; left out")
            comparison = None
    readme = Path(readme_path)
    text = replace_block(readme.read_text(), "bench", markdown_summary(data, comparison),
                         readme_path)
    if haswell_path is not None and Path(haswell_path).is_file():
        curves = None
        if curves_path is not None and Path(curves_path).is_file():
            curves = json.loads(Path(curves_path).read_text())
        text = replace_block(text, "kernels",
                             kernels_summary(data, read_json(haswell_path), curves), readme_path)
    readme.write_text(text)
    print(f"updated {readme_path} from {json_path}")


if __name__ == "__main__":
    main(*sys.argv[1:6])
