"""The decode loops and everything that keeps them running.

* :mod:`.decode`: plain and speculative decoding of one sequence, and the step traces;
* :mod:`.costs`: the step costs the automatic draft length measures;
* :mod:`.sequence`, :mod:`.batch`, :mod:`.batch_generate`: the batched engine, one
  record per sequence, and its one-call wrappers;
* :mod:`.load`: the batch size above which speculation stops paying, measured here;
* :mod:`.medusa_decode`: decoding with Medusa's tree of candidates;
* :mod:`.faults`, :mod:`.batch_boundary`, :mod:`.resilient`, :mod:`.breaker`: the fault
  boundary around the target's forward, in process or in a worker;
* :mod:`.telemetry` and :mod:`.journal`: metrics sinks and the SQLite journal.

The engine uses :mod:`specdec_lite.drafting`, :mod:`specdec_lite.models` and
:mod:`specdec_lite.rules`; the service and the benchmark are built on it.
"""
