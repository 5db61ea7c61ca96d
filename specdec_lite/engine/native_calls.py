"""Calls from numba-compiled code into C, by address: one uniform from a numpy
BitGenerator (its ``next_double``, as ``Generator.random`` draws it) and the time on a
monotonic clock (the C library's ``clock_gettime``). The kernels of
:mod:`specdec_lite.engine.compiled_step` draw and time with them; called by address, they
need neither the GIL nor a Python object, and the kernels that use them stay cacheable.

numba caches those kernels keyed by their own file, not this one: whoever changes an
intrinsic here must touch that file too.
"""

from __future__ import annotations

import functools
import time

import numpy as np


def uniform_intrinsic() -> object:
    """``next_double(draw, state)``: one uniform in [0, 1) from a numpy BitGenerator, given
    the addresses of its ``next_double`` function and its state (its ``ctypes`` interface),
    exactly as ``Generator.random()`` draws it. Passing two integers instead of the
    Generator spares the call numba's typing of a Generator argument, which costs more
    than the rest of a step's Python."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def next_double(typingctx, draw, state):
        def codegen(context, builder, signature, args):
            state_ptr = ir.IntType(8).as_pointer()
            fn_type = ir.FunctionType(ir.DoubleType(), [state_ptr])
            fn = builder.inttoptr(args[0], fn_type.as_pointer())
            return builder.call(fn, [builder.inttoptr(args[1], state_ptr)])
        return types.float64(types.uintp, types.uintp), codegen

    return next_double


def clock_intrinsic() -> object:
    """``now(clock_gettime, clock_id)``: seconds on a monotonic clock, read by calling the
    C library's ``clock_gettime`` at the address given (:func:`clock_source`). A function
    that calls it can run without the GIL and be cached by numba, which neither numba's
    object mode nor a ctypes function in its globals allows."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def now(typingctx, fn, clock_id):
        def codegen(context, builder, signature, args):
            i32, i64, f64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()
            spec = cgutils.alloca_once(builder, i64, size=2)  # struct timespec {sec, nsec}
            fn_type = ir.FunctionType(i32, [i32, spec.type])
            call = builder.inttoptr(args[0], fn_type.as_pointer())
            builder.call(call, [builder.trunc(args[1], i32), spec])
            sec = builder.sitofp(builder.load(spec), f64)
            nsec = builder.sitofp(builder.load(builder.gep(spec, [ir.Constant(i32, 1)])), f64)
            return builder.fadd(sec, builder.fmul(nsec, ir.Constant(f64, 1e-9)))
        return types.float64(types.int64, types.int64), codegen

    return now


@functools.cache
def _clock_address() -> int | None:
    """The address of the C library's ``clock_gettime``; None where there is none."""
    import ctypes  # here, not at import: the browser edition's Python has no use for it

    try:
        return ctypes.cast(ctypes.CDLL(None).clock_gettime, ctypes.c_void_p).value
    except (AttributeError, OSError, TypeError):
        return None


def clock_source() -> np.ndarray | None:
    """[address of the C library's ``clock_gettime``, ``CLOCK_MONOTONIC``], int64, which
    the kernels time forwards with; None where there is none (Windows), and a run with a
    meter then takes the Python step."""
    address = _clock_address()
    return None if address is None else np.array([address, time.CLOCK_MONOTONIC],
                                                 dtype=np.int64)


def uniform_source(rng: np.random.Generator) -> tuple[int, int]:
    """The addresses (``next_double``, state) the kernels draw ``rng``'s uniforms from."""
    import ctypes  # here, not at import: the browser edition's Python has no use for it

    bits = rng.bit_generator.ctypes
    return ctypes.cast(bits.next_double, ctypes.c_void_p).value, bits.state_address


__all__ = ["clock_intrinsic", "clock_source", "uniform_intrinsic", "uniform_source"]
