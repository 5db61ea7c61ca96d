"""kernels: which BLAS kernel numpy loaded, and the matrix-product path chosen for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from specdec_lite.bench.timing import blas_info
from specdec_lite.models import kernels


@pytest.mark.parametrize("kernel", ["SkylakeX", "Cooperlake", "SapphireRapids"])
def test_small_matrix_kernels_never_go_row_by_row(kernel: str) -> None:
    assert kernels.rowwise_max_for(kernel) == 1


@pytest.mark.parametrize("kernel", ["Haswell", "Zen", "Sandybridge", "Prescott", "", None])
def test_packing_kernels_go_row_by_row_up_to_three(kernel: str | None) -> None:
    assert kernels.rowwise_max_for(kernel) == 3


def test_blas_kernel_is_named_here() -> None:
    """numpy's wheels ship scipy-openblas, which can say which kernel it chose."""
    kernel = kernels.blas_kernel()
    assert kernel is None or isinstance(kernel, str)
    if np.show_config(mode="dicts")["Build Dependencies"]["blas"].get("name") != "scipy-openblas":
        pytest.skip("numpy is not linked to scipy-openblas here")
    assert isinstance(kernel, str) and kernel
    assert kernel == kernel.strip() and kernel.isprintable()
    assert kernels.ROWWISE_MAX == kernels.rowwise_max_for(kernel)


CHILD = """
import json
from specdec_lite.models import fast, kernels
from specdec_lite.bench.timing import blas_info
print(json.dumps({"kernel": kernels.blas_kernel(), "rowwise_max": kernels.ROWWISE_MAX,
                  "paths": fast.matmul_paths(kernels.blas_kernel()), "info": blas_info()}))
"""


def child_report(coretype: str | None) -> dict:
    """What a fresh interpreter reports with OPENBLAS_CORETYPE set to ``coretype``."""
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    env["OPENBLAS_NUM_THREADS"] = "1"
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_coretype_haswell_forces_the_row_by_row_path() -> None:
    """What the benchmark relies on to measure both kernels on one x86-64 machine."""
    if kernels.blas_kernel() is None:
        pytest.skip("the loaded BLAS cannot name its kernel")
    if os.uname().machine not in ("x86_64", "AMD64"):
        pytest.skip("OPENBLAS_CORETYPE=Haswell needs an x86-64 CPU")
    report = child_report("Haswell")
    assert report["kernel"] == "Haswell"
    assert report["rowwise_max"] == 3
    assert report["paths"] == [3, -1, 0]  # row by row for 2-3 rows; the skinny rows measured
    assert report["info"]["kernel"] == "Haswell"
    assert report["info"]["rowwise_max"] == 3
    assert report["info"]["coretype_env"] == "Haswell"


def test_a_fresh_process_without_coretype_agrees_with_this_one() -> None:
    if os.environ.get("OPENBLAS_CORETYPE"):
        pytest.skip("this process runs under OPENBLAS_CORETYPE")
    report = child_report(None)
    assert report["kernel"] == kernels.blas_kernel()
    assert report["rowwise_max"] == kernels.ROWWISE_MAX
    assert report["info"]["coretype_env"] is None


def test_blas_info_has_the_new_keys() -> None:
    info = blas_info()
    assert {"library", "version", "kernel", "rowwise_max", "coretype_env", "numba"} <= set(info)
    assert info["kernel"] == kernels.blas_kernel()
    assert info["rowwise_max"] == kernels.ROWWISE_MAX
    assert info["rowwise_max"] in (1, 3)
    assert info["coretype_env"] == os.environ.get("OPENBLAS_CORETYPE")
    try:
        import numba
    except ImportError:
        assert info["numba"] is None
    else:
        assert info["numba"] == numba.__version__
    json.dumps(info)  # it goes into the benchmark's JSON as it is
