"""The package's layout is its architecture: layers in subpackages, imports only downward.

Each subpackage (and each module left at the root) has a rank; a module may import from
a lower rank or from its own subpackage, never from a higher one. An import under
``if TYPE_CHECKING:`` names a type for annotations only and is not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import specdec_lite

PACKAGE = Path(specdec_lite.__file__).parent

RANK = {
    "checks": 0, "functional": 0,  # validation and small math shared by every layer
    "rules": 1,                     # distributions, the acceptance rules, the theory
    "models": 2,                    # the models and their caches
    "drafting": 3,                  # proposers, drafters, draft-length policies
    "engine": 4,                    # the decode loops, batching, the fault boundary
    "pretrained": 5,                # the shipped weights, loaded
    "hf": 6,                        # the transformers bridge
    "bench": 7, "service": 7, "training": 7,
    "plots": 8,
    "teaching": 9,
    "cli": 10, "__init__": 10,
    "__main__": 11,
}
MAX_ROOT_MODULES = 14


def package_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def unit_of(path: Path, root: Path = PACKAGE) -> str:
    """The layer a file belongs to: its subpackage, or its own name at the root."""
    return path.relative_to(root).with_suffix("").parts[0]


def type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imported_units(path: Path, root: Path = PACKAGE) -> set[str]:
    """Every layer of the package that ``path`` imports at run time."""
    tree = ast.parse(path.read_text())
    skip = type_checking_lines(tree)
    package = path.relative_to(root.parent).with_suffix("").parts[:-1]  # ("specdec_lite", "engine")
    units: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
            else:
                base = []
            module = base + (node.module.split(".") if node.module else [])
            if module[:1] != ["specdec_lite"]:
                continue
            if len(module) > 1:
                units.add(module[1])
            else:  # `from specdec_lite import a, b`: each name is a unit or a root export
                units.update(a.name for a in node.names if a.name in RANK)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "specdec_lite" and len(parts) > 1:
                    units.add(parts[1])
    return units


def test_every_layer_has_a_rank():
    units = {unit_of(p) for p in package_files()}
    assert units <= set(RANK), f"give these a rank: {sorted(units - set(RANK))}"


def test_few_modules_at_the_root():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


@pytest.mark.parametrize("path", package_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down(path):
    unit = unit_of(path)
    upward = sorted(u for u in imported_units(path) - {unit} if RANK[u] >= RANK[unit])
    assert not upward, f"{path.relative_to(PACKAGE)} ({unit}) imports upward: {upward}"


def test_the_checker_sees_an_upward_import(tmp_path):
    """Control: a copy of the transformer that imports the engine fails the rule, and the
    same import under ``if TYPE_CHECKING:`` does not."""
    root = tmp_path / "specdec_lite"
    copy = root / "models" / "transformer.py"
    copy.parent.mkdir(parents=True)
    original = (PACKAGE / "models" / "transformer.py").read_text()
    copy.write_text(original + "\nfrom ..engine.decode import generate\n")
    assert "engine" in imported_units(copy, root)
    copy.write_text(original + "\nif TYPE_CHECKING:\n    from ..engine.decode import Generation\n")
    assert "engine" not in imported_units(copy, root)
    assert unit_of(copy, root) == "models"
