"""The book's figures for chapters 1-3 and Medusa draw from the library's own functions;
smoke tests that each one draws, and that the names notebooks call through ``plots`` are
the library's."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from specdec_lite import TableModel, chain_tree, generate, plots, speculative_generate
from specdec_lite.drafting.medusa import make_tree
from specdec_lite.models.tokenizer import CharTokenizer
from specdec_lite.rules import theory
from specdec_lite.rules.verify import output_law

P = np.array([0.43, 0.25, 0.14, 0.12, 0.06])  # target
Q = np.array([0.20, 0.40, 0.30, 0.05, 0.05])  # draft
LABELS = list("abcde")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_plots_holds_figures_only():
    for name in ("one_token_output", "output_law", "sample_first_tokens",
                 "alpha_temperature_grid", "theory_speedup", "speedup_curve"):
        assert not hasattr(plots, name), name


def test_chapter_1_figures_draw():
    temps = np.linspace(0.2, 2.0, 7)
    figures = [
        plots.plot_distribution(P, LABELS, n_show=3),
        plots.plot_distribution_grid({"p": P, "q": Q}, LABELS, n_show=4, ncols=2),
        plots.plot_overlap(P, Q, LABELS, n_show=4),
        plots.plot_alpha_vs_temperature(P, Q, temps),
        plots.plot_alpha_heatmap(P, Q, temps, mark=(1.0, 0.5)),
        plots.plot_temperature_overlap(P, Q, 0.7, 1.3, LABELS, temperatures=temps),
        plots.plot_draft_orders([1, 2, 3], np.array([0.4, 0.6, 0.7]), np.array([2.0, 1.6, 1.4]),
                                target_ce=1.2),
        plots.plot_alpha_along_text("ab\nc", np.array([0.2, 0.9, np.nan, 0.5])),
    ]
    assert all(isinstance(fig, plt.Figure) for fig in figures)
    assert plots.char_labels(" a\n") == ["␣", "a", "↵"]


def test_overlap_figure_reports_alpha_over_all_tokens():
    fig = plots.plot_overlap(P, Q, LABELS, n_show=2)
    note = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("α")][0]
    assert f"{theory.acceptance_probability(P, Q):.3f}" in note
    fig = plots.plot_overlap(P, Q, LABELS, symbol="β")
    assert any(t.get_text().startswith("β = Σ min(p, q)") for t in fig.axes[0].texts)


def test_chapter_2_figures_draw_the_exact_laws():
    fig = plots.plot_threshold_drift(P, Q, 1.5, LABELS, n_samples=200)
    bars = [patch.get_height() for patch in fig.axes[0].patches]
    np.testing.assert_allclose(bars[5:10], output_law(P, Q, "threshold", theta=1.5))
    for fig in (plots.plot_rule_decomposition(P, Q, LABELS),
                plots.plot_output_vs_target(P, output_law(P, Q, "typical"), LABELS),
                plots.plot_threshold_tv(P, Q, theta=1.5, sampled=([1.5], [0.1]))):
        assert isinstance(fig, plt.Figure)


def test_chapter_3_figures_draw():
    tok = CharTokenizer("abcd")
    target, draft = TableModel(np.array([0.7, 0.1, 0.1, 0.1])), TableModel(np.full(4, 0.25))
    gens = [speculative_generate(target, draft, [0], k=k, max_new_tokens=30, seed=1)
            for k in (2, 4)]
    fig = plots.plot_trace(gens[0], tok, max_steps=4)
    kinds = [kind for step in gens[0].steps[:4] for _, kind in step.token_kinds()]
    assert len(fig.axes[0].patches) == len(kinds)  # one cell per token kind
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "target's token, nothing drafted" not in labels  # no step drafted nothing
    plain = generate(target, [0], max_new_tokens=3, seed=1)  # every step drafts nothing
    labels = [t.get_text() for t in plots.plot_trace(plain, tok).axes[0].get_legend().get_texts()]
    assert "target's token, nothing drafted" in labels
    ks = np.array([1, 2, 4])
    figures = [
        plots.plot_traces(gens, tok, max_steps=3),
        plots.plot_speculative_run(target, draft, tok, "ab", k=3, max_new_tokens=12),
        plots.plot_tau_vs_k(ks, np.array([1.5, 1.9, 2.4]), 0.6),
        plots.plot_acceptance_vs_k(ks, np.full(3, 0.6), 0.6**ks, np.array([0.6, 0.5, 0.4]),
                                   0.6),
        plots.plot_tau_vs_temperature(np.array([0.5, 1.0]), np.array([2.0, 1.8]),
                                      np.array([0.7, 0.6]), k=4),
    ]
    assert all(isinstance(fig, plt.Figure) for fig in figures)


def test_medusa_figures_draw():
    tree = make_tree([[0], [1], [0, 0], [0, 1], [0, 0, 0]])
    acc = np.array([[0.5, 0.2, 0.1], [0.3, 0.2, 0.1]])  # [H, s]
    figures = [
        plots.plot_tree(tree, highlight=[1, 3]),
        plots.plot_tree(chain_tree(3)),
        plots.plot_tree_mask(tree),
        plots.plot_head_accuracy({"heads": acc}),
        plots.plot_head_training(np.random.default_rng(0).random((50, 2))),
        plots.plot_typical_tradeoff(np.array([0.01, 0.1]), np.array([1.5, 2.0]),
                                    np.array([0.01, 0.05]), current=0.05),
    ]
    assert all(isinstance(fig, plt.Figure) for fig in figures)
