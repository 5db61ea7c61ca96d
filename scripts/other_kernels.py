"""Print the OpenBLAS kernels, other than the one this machine loads, that this CPU can run.

Usage: python scripts/other_kernels.py   (run by `make nbval-kernels`)

Strict nbval compares printed digits, and the digits of a float32 rounding error depend on
the BLAS kernel's order of summation. Two kernels cover the x86-64 CPUs readers have:
``SkylakeX`` (AVX-512: recent Intel, and AMD Zen 4 and later) and ``Haswell`` (AVX2: AMD Zen
1-3 and older Intel, and what OpenBLAS falls back to). ``make nbval`` runs the notebooks under
the kernel this machine picks; ``make nbval-kernels`` runs them again under each kernel printed
here (space-separated, possibly none), selected with ``OPENBLAS_CORETYPE``. A CPU cannot run a
kernel whose instructions it lacks, so a kernel is printed only where /proc/cpuinfo shows them.
"""

from pathlib import Path

from specdec_lite.models.kernels import blas_kernel

# kernel -> the CPU flags (as /proc/cpuinfo names them) its code needs.
KERNEL_FLAGS = {
    "Haswell": {"avx2", "fma"},
    "SkylakeX": {"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512cd"},
}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The flags of the first processor in ``cpuinfo``; empty where there is no such file."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def other_kernels(loaded: str | None, flags: set[str]) -> list[str]:
    """The kernels of KERNEL_FLAGS that ``flags`` can run, less ``loaded``."""
    return [name for name, needs in KERNEL_FLAGS.items() if needs <= flags and name != loaded]


if __name__ == "__main__":
    print(" ".join(other_kernels(blas_kernel(), cpu_flags())))
