"""Matplotlib figures for the book. Imported on its own: ``from specdec_lite import plots``.

Every function draws onto an optional ``ax`` (or creates its own figure), takes plain
arrays or library objects, and returns the matplotlib ``Figure``, so notebooks can show
it and widgets can redraw it with new parameters. The modules hold figures only; the
math they draw comes from the library below them:

* :mod:`.common`: colours, style, axes and token-label helpers;
* :mod:`.distributions`: chapter 1 (distributions, overlap, α and temperature);
* :mod:`.acceptance`: chapter 2 (the rules' output laws, from :mod:`specdec_lite.rules.verify`);
* :mod:`.decode`: chapter 3 (traces, τ and acceptance against k and temperature);
* :mod:`.medusa`: Medusa (trees, masks, heads, typical acceptance);
* :mod:`.bench`: figures of a benchmark result, and ``write_figures``;
* :mod:`.speedup`: Thm 3.8 surfaces from :mod:`specdec_lite.rules.theory`;
* :mod:`.roofline`: a layer's measured r(n) against the roofline, and by its size
  (chapter 6).
"""

from .acceptance import (
    THETA_GRID,
    plot_output_vs_target,
    plot_rule_decomposition,
    plot_threshold_drift,
    plot_threshold_tv,
)
from .bench import (
    bench_rows,
    plot_bench_speedup,
    plot_cost_curve,
    plot_curves_by_cpu,
    plot_engine_split,
    plot_kernel_curves,
    plot_medusa_speedups,
    plot_reproduction,
    plot_speedup_vs_k,
    write_figures,
)
from .common import COLORS, Probs, char_labels, setup_style
from .decode import (
    VISIBLE_WHITESPACE,
    plot_acceptance_vs_k,
    plot_speculative_run,
    plot_tau_vs_k,
    plot_tau_vs_temperature,
    plot_trace,
    plot_traces,
)
from .distributions import (
    plot_alpha_along_text,
    plot_alpha_heatmap,
    plot_alpha_vs_temperature,
    plot_distribution,
    plot_distribution_grid,
    plot_draft_orders,
    plot_overlap,
    plot_temperature_overlap,
)
from .medusa import (
    plot_head_accuracy,
    plot_head_training,
    plot_tree,
    plot_tree_mask,
    plot_typical_tradeoff,
)
from .roofline import plot_rows_by_size, plot_rows_cost
from .speedup import (
    plot_cost_per_token,
    plot_optimal_k_heatmap,
    plot_speedup_explorer,
    plot_theory_multiples,
)

__all__ = [
    "COLORS",
    "THETA_GRID",
    "VISIBLE_WHITESPACE",
    "Probs",
    "bench_rows",
    "char_labels",
    "plot_acceptance_vs_k",
    "plot_alpha_along_text",
    "plot_alpha_heatmap",
    "plot_alpha_vs_temperature",
    "plot_bench_speedup",
    "plot_curves_by_cpu",
    "plot_kernel_curves",
    "plot_cost_curve",
    "plot_cost_per_token",
    "plot_distribution",
    "plot_distribution_grid",
    "plot_draft_orders",
    "plot_engine_split",
    "plot_head_accuracy",
    "plot_head_training",
    "plot_medusa_speedups",
    "plot_optimal_k_heatmap",
    "plot_output_vs_target",
    "plot_overlap",
    "plot_reproduction",
    "plot_rows_by_size",
    "plot_rows_cost",
    "plot_rule_decomposition",
    "plot_speculative_run",
    "plot_speedup_explorer",
    "plot_speedup_vs_k",
    "plot_tau_vs_k",
    "plot_tau_vs_temperature",
    "plot_temperature_overlap",
    "plot_theory_multiples",
    "plot_threshold_drift",
    "plot_threshold_tv",
    "plot_trace",
    "plot_traces",
    "plot_tree",
    "plot_tree_mask",
    "plot_typical_tradeoff",
    "setup_style",
    "write_figures",
]
