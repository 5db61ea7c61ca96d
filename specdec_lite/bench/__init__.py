"""Benchmark: autoregressive vs draft-model speculative decoding vs Medusa, against theory.

:func:`run` decodes the same held-out prompts with every method and measures wall-clock
tokens/s, target and draft calls, α (accepted / checked draft tokens) and τ, the
target's cost curve T(n), the draft costs, and the engine overhead (wall time outside
the model forwards); it compares each speedup with the one theory predicts at the
measured costs. One module per concern, each documenting its part:

* :mod:`~specdec_lite.bench.config`: the settings, the methods and the run order;
* :mod:`~specdec_lite.bench.timing`: the timing rules, the forward meter, the cost
  curve, the profile and the machine;
* :mod:`~specdec_lite.bench.stats`: speedups and their bootstrap intervals, the
  predictions, the SIMULATED accelerator, comparing two runs;
* :mod:`~specdec_lite.bench.report`: the bars, the terminal table, the README summary;
* :mod:`~specdec_lite.bench.schema`: the JSON result, its fields, reading and writing;
* :mod:`~specdec_lite.bench.run`: the run itself, step by step.
"""

from .config import (
    NGRAM_ORDER,
    QUICK,
    Method,
    Settings,
    build_methods,
    choose_prompts,
    schedule,
)
from .report import (
    evaluate_bars,
    format_bars,
    format_comparison,
    format_table,
    in_run_summary,
    kernels_summary,
    markdown_summary,
)
from .run import BenchResult, Plan, calibrate, decode, ngram_draft, run
from .schema import (
    FIELDS,
    OPTIONAL_FIELDS,
    ROW_FIELDS,
    SCHEMA,
    check_result,
    describe,
    read_json,
    write_json,
)
from .stats import (
    N_BOOT,
    Row,
    Run,
    bootstrap_ci,
    check_comparable,
    compare_runs,
    ends_in_loop,
    in_run_ratios,
    predictions,
    simulated_units,
    summarise,
    verify_ratio,
)
from .timing import (
    BLAS_VARS,
    ForwardMeter,
    blas_info,
    cost_curve,
    function_name,
    in_run_costs,
    machine_info,
    overhead_split,
    pin_blas_threads,
    profile_call,
    profile_split,
)

__all__ = ["BLAS_VARS", "FIELDS", "N_BOOT", "NGRAM_ORDER", "OPTIONAL_FIELDS", "QUICK",
           "ROW_FIELDS", "SCHEMA",
           "BenchResult", "ForwardMeter", "Method", "Plan", "Row", "Run", "Settings",
           "blas_info", "bootstrap_ci", "build_methods", "calibrate", "check_comparable",
           "check_result",
           "choose_prompts", "compare_runs", "cost_curve", "decode", "describe",
           "ends_in_loop", "evaluate_bars", "format_bars", "format_comparison", "format_table",
           "function_name", "in_run_costs", "in_run_ratios", "in_run_summary", "machine_info",
           "kernels_summary", "markdown_summary", "ngram_draft", "overhead_split",
           "pin_blas_threads", "predictions",
           "profile_call", "profile_split", "read_json", "run", "schedule", "simulated_units",
           "summarise", "verify_ratio", "write_json"]
