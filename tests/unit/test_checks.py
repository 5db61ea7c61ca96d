"""The shared validators (checks), the activations' one home (functional), and the
module boundaries they let the library keep."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

import specdec_lite
from specdec_lite import checks
from specdec_lite.functional import sigmoid, silu, softmax, softmax32
from specdec_lite.rules import distributions

PACKAGE = Path(specdec_lite.__file__).parent


@pytest.mark.parametrize("value", [0, 3, np.int32(3), np.int64(7), np.uint8(2)])
def test_check_int_accepts_integers(value) -> None:
    out = checks.check_int(value, "k", 0, 7)
    assert out == int(value) and type(out) is int


@pytest.mark.parametrize(("value", "error"), [
    (True, TypeError), (2.0, TypeError), ("2", TypeError), (None, TypeError),
    (np.float64(1), TypeError), (-1, ValueError), (8, ValueError),
])
def test_check_int_rejects(value, error) -> None:
    with pytest.raises(error, match="k must"):
        checks.check_int(value, "k", 0, 7)


@pytest.mark.parametrize(("value", "error"), [
    (0.0, ValueError), (-1, ValueError), (math.nan, ValueError), (math.inf, ValueError),
    (True, TypeError), ("1", TypeError), (None, TypeError),
])
def test_check_positive_rejects(value, error) -> None:
    with pytest.raises(error, match="theta"):
        checks.check_positive(value, "theta")


def test_check_real_bounds() -> None:
    assert checks.check_real(0, "temperature", minimum=0.0) == 0.0
    assert checks.check_positive(np.float32(0.5), "eps") == 0.5
    with pytest.raises(ValueError, match="temperature"):
        checks.check_real(-0.1, "temperature", minimum=0.0)


def test_check_tokens_and_prompt() -> None:
    for dtype in (np.int8, np.int32, np.int64, np.uint16):
        out = checks.check_tokens(np.array([0, 3, 2], dtype=dtype), 4)
        assert out.dtype == np.int64 and out.tolist() == [0, 3, 2]
    with pytest.raises(ValueError, match="tokens contains id 4"):
        checks.check_tokens([0, 4], 4)
    with pytest.raises(TypeError, match="tokens"):
        checks.check_tokens([0.0, 1.0], 4)
    with pytest.raises(ValueError, match="prompt"):
        checks.check_prompt([], 4)
    assert checks.check_eos(None, 4) is None and checks.check_eos(3, 4) == 3
    with pytest.raises(ValueError, match="eos_id"):
        checks.check_eos(4, 4)


def test_check_probs_has_one_home() -> None:
    assert distributions.check_probs is checks.check_probs is specdec_lite.check_probs
    assert distributions.SUM_TOL == checks.SUM_TOL


def test_softmax_rows() -> None:
    z = np.array([[1.0, 2.0, -np.inf], [1000.0, 1000.0, 0.0]])
    p = softmax(z)
    assert p.dtype == np.float64 and p[0, 2] == 0.0
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(p[1, :2], 0.5)
    np.testing.assert_allclose(softmax(z.T, axis=0), p.T)
    assert softmax(z.astype(np.float32)).dtype == np.float64
    z32 = z.astype(np.float32)
    assert softmax32(z32).dtype == np.float32
    np.testing.assert_allclose(softmax32(z32), p, atol=1e-6)
    before = z.copy()
    softmax(z)
    np.testing.assert_array_equal(z, before)  # the input is never written


def test_sigmoid_and_silu() -> None:
    x = np.linspace(-6, 6, 13)
    np.testing.assert_allclose(sigmoid(x), 1 / (1 + np.exp(-x)))
    np.testing.assert_allclose(silu(x), x * sigmoid(x))
    assert silu(x.astype(np.float32)).dtype == np.float32


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from .module import name`` in ``path``."""
    tree = ast.parse(path.read_text())
    return [(node.module or "", alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 for alias in node.names]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_modules_private_names(path: Path) -> None:
    private = [f"{module}.{name}" for module, name in _imports(path) if name.startswith("_")]
    assert not private, f"{path.name} imports private names {private}"


def test_medusa_drives_the_cache_through_public_methods() -> None:
    source = (PACKAGE / "drafting" / "medusa.py").read_text()
    assert ".cache" not in source
