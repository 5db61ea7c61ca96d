"""Every test a chapter names as the check of a claim exists under that name in tests/, so a
renamed or deleted test cannot leave the book pointing at nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"`(test_\w+?)(\.py)?`")


def _names_in_notebooks() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        found += [(path.name, name + (ext or "")) for name, ext in NAMED.findall(text)]
    return found


def _defined() -> tuple[set[str], set[str]]:
    files = {p.name for p in (ROOT / "tests").rglob("test_*.py")}
    functions = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        functions |= set(re.findall(r"^(?:async )?def (test_\w+)\(", path.read_text(),
                                    re.MULTILINE))
    return files, functions


def test_the_service_appendix_names_its_tests():
    assert any(page == "12_appendix_service.ipynb" for page, _ in _names_in_notebooks())


@pytest.mark.parametrize("page, name", _names_in_notebooks())
def test_a_named_test_exists(page, name):
    files, functions = _defined()
    assert name in (files if name.endswith(".py") else functions), f"{page} names {name}"
