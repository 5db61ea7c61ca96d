"""Write the key figure of each chapter at slide size (16:9, large fonts) into one folder.

Usage: python scripts/figures.py OUT_DIR

Every figure is computed here from the library and the committed benchmark results, as
in the chapters; nothing is copied from a notebook's output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from specdec_lite import (  # noqa: E402
    apply_temperature,
    dense_tree,
    example,
    plots,
    speculative_generate,
)

ROOT = Path(__file__).resolve().parent.parent
SLIDE = (13.33, 7.5)  # inches: 16:9
SLIDE_STYLE = {"font.size": 20, "axes.titlesize": 22, "axes.labelsize": 20,
               "xtick.labelsize": 16, "ytick.labelsize": 16, "legend.fontsize": 16,
               "lines.linewidth": 3, "lines.markersize": 10}


def restrict(p: np.ndarray, q: np.ndarray, labels: list[str], n_keep: int) -> tuple:
    """The pair (p, q) conditioned on the n_keep tokens most likely under p: a smaller pair,
    still two distributions, for a bar chart a room can read."""
    keep = np.sort(np.argsort(-p, kind="stable")[:n_keep])  # [n_keep] token ids
    p_small, q_small = p[keep], q[keep]
    return p_small / p_small.sum(), q_small / q_small.sum(), [labels[i] for i in keep]


CONTINUATION = ", "  # after "def __init__(self, " the two n-grams disagree visibly


def running_rows() -> tuple:
    """Target and draft rows after the running prompt and ``CONTINUATION``, with labels."""
    tokenizer, target, draft = example.ngram_pair()
    ids = tokenizer.encode(example.PROMPT + CONTINUATION)
    labels = plots.char_labels(tokenizer.alphabet)
    return target.probs(ids)[-1], draft.probs(ids)[-1], labels, (tokenizer, target, draft)


def chapter1(p, q, labels) -> plt.Figure:
    return plots.plot_overlap(p, q, labels, n_show=10,
                              title="Target p and draft q after 'def __init__(self, '")


def chapter2(p, q, labels) -> plt.Figure:
    p_small, q_small, labels_small = restrict(p, q, labels, 8)
    return plots.plot_rule_decomposition(
        p_small, q_small, labels_small,
        title="The exact rule gives exactly p (8 likeliest tokens)")


def chapter3(pair) -> plt.Figure:
    tokenizer, target, draft = pair
    ids = example.prompt_ids(tokenizer)
    ks = np.arange(1, 9)
    runs = [speculative_generate(target, draft, ids, k=int(k), max_new_tokens=200,
                                 temperature=1.0, seed=0) for k in ks]
    tau = np.array([run.tau for run in runs])  # [len(ks)]
    alpha = float(np.mean([run.alpha for run in runs]))
    return plots.plot_tau_vs_k(ks, tau, alpha,
                               title="Tokens per target call, n-gram pair, T = 1")


def chapter4() -> plt.Figure:
    tokenizer, target, draft = example.gpt_pair()
    run = speculative_generate(target, draft, example.prompt_ids(tokenizer), k=4,
                               max_new_tokens=48, temperature=1.0, seed=0)
    return plots.plot_trace(run, tokenizer, max_steps=8,
                            title="GPT pair, k = 4: accepted, corrected and bonus tokens")


def chapter5() -> plt.Figure:
    tree = dense_tree([3, 2, 1])
    fig, (left, right) = plt.subplots(1, 2, figsize=SLIDE)
    plots.plot_tree(tree, ax=left, title="A candidate tree")
    plots.plot_tree_mask(tree, ax=right, title="Its attention mask")
    return fig


def chapter6(bench: dict) -> plt.Figure:
    alpha = float(np.median([row["alpha"] for row in bench["rows"]
                             if row.get("method") == "speculative" and row.get("alpha")
                             and row.get("temperature") == 0.0]))
    return plots.plot_speedup_vs_k(bench, 0.0, alpha,
                                   title="Measured speedup against k, greedy (T = 0)")


def appendix(bench: dict) -> plt.Figure:
    return plots.plot_cost_curve(bench)


def enlarge_text(fig: plt.Figure, minimum: float = 15.0) -> None:
    """Raise every text of ``fig`` to at least ``minimum`` points: functions that set their
    own small sizes for the page stay readable on a projector."""
    for text in fig.findobj(matplotlib.text.Text):
        if text.get_text() and text.get_fontsize() < minimum:
            text.set_fontsize(minimum)


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bench = json.loads((ROOT / "results" / "bench.json").read_text())
    plots.setup_style()
    plt.rcParams.update(SLIDE_STYLE | {"figure.figsize": SLIDE})
    p, q, labels, pair = running_rows()
    p1, q1 = apply_temperature(p, 1.0), apply_temperature(q, 1.0)
    figures = {
        "01_overlap": lambda: chapter1(p1, q1, labels),
        "02_exact_rule": lambda: chapter2(p1, q1, labels),
        "03_tau_vs_k": lambda: chapter3(pair),
        "04_trace": chapter4,
        "05_tree": chapter5,
        "06_speedup_vs_k": lambda: chapter6(bench),
        "07_cost_curve": lambda: appendix(bench),
    }
    for name, draw in figures.items():
        fig = draw()
        fig.set_size_inches(*SLIDE)
        enlarge_text(fig)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=150)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python scripts/figures.py OUT_DIR")
    main(sys.argv[1])
