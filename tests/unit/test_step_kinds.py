"""decode.Step.token_kinds: how a trace classifies each token of one target call."""

import matplotlib.pyplot as plt
import numpy as np

from specdec_lite import TableModel, generate, plots, speculative_generate
from specdec_lite.engine.decode import Step
from specdec_lite.models.tokenizer import CharTokenizer


def test_kinds_of_hand_made_steps():
    assert Step((5, 6, 7), 1, (5, 9), "correction").token_kinds() == [
        (5, "accepted"), (6, "rejected"), (7, "unchecked"), (9, "correction")]
    assert Step((5, 6), 2, (5, 6, 8), "bonus").token_kinds() == [
        (5, "accepted"), (6, "accepted"), (8, "bonus")]
    assert Step((), 0, (4,), "sample").token_kinds() == [(4, "sample")]
    # EOS (token 5) cut the step after its first accepted token: the second was judged and
    # accepted but never emitted, the third was still judged (and rejected), the
    # correction is gone
    assert Step((5, 6, 7), 2, (5,), "correction").token_kinds() == [
        (5, "accepted"), (6, "cut"), (7, "rejected")]
    assert Step((5, 6), 2, (5,), "bonus").token_kinds() == [(5, "accepted"), (6, "cut")]


def test_kinds_account_for_every_emitted_token():
    target, draft = TableModel(np.array([0.7, 0.1, 0.1, 0.1])), TableModel(np.full(4, 0.25))
    gens = [speculative_generate(target, draft, [0], k=3, max_new_tokens=40, seed=1),
            speculative_generate(target, draft, [0], k=3, max_new_tokens=40, seed=2, eos_id=3),
            generate(target, [0], max_new_tokens=5, seed=0)]
    for gen in gens:
        for step in gen.steps:
            kinds = step.token_kinds()
            roles = [role for _, role in kinds]
            assert [t for t, _ in kinds[: len(step.proposed)]] == list(step.proposed)
            assert roles.count("rejected") == (step.n_accepted < len(step.proposed))
            emitted = [t for t, role in kinds if role not in ("rejected", "unchecked", "cut")]
            assert tuple(emitted) == step.emitted
            if len(step.emitted) == step.n_accepted + 1:
                assert roles[-1] == step.extra


def test_trace_legend_names_drafts_cut_by_eos_only_when_there_are_some():
    tok = CharTokenizer("abcd")
    cut = Step((0, 3, 1), 3, (0, 3), "bonus")  # token 3 is EOS: token 1 was accepted, then cut
    assert [role for _, role in cut.token_kinds()] == ["accepted", "accepted", "cut"]
    gen = speculative_generate(TableModel(np.full(4, 0.25)), TableModel(np.full(4, 0.25)), [0],
                               k=3, max_new_tokens=4, seed=0)
    for steps, has_cut in ((gen.steps, False), ([cut], True)):
        gen.steps = steps
        fig = plots.plot_trace(gen, tok)
        labels = [t.get_text() for t in fig.axes[0].get_legend().texts]
        plt.close(fig)
        assert ("accepted, cut off" in labels) == has_cut
