"""The rules: distributions and the acceptance rules, with the theory that prices them.

* :mod:`.distributions`: temperature, top-k / top-p, sampling, the :class:`Sampling` record;
* :mod:`.verify`: the exact rule (accept with min(1, p/q), else draw from the residual),
  greedy and typical acceptance, and the lossy relatives the book compares;
* :mod:`.theory`: α, the expected tokens per step and the speedup (Leviathan et al.).

These modules import nothing of the package but :mod:`specdec_lite.checks` and
:mod:`specdec_lite.functional`.
"""
