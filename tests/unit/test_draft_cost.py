"""specdec_lite.bench.draft_cost: the timed proposer passes proposals through unchanged and
counts them; the break-even verification cost is where two proposers' speedups meet."""

import numpy as np
import pytest

from specdec_lite import ModelDraft, PromptLookup, speculative_generate
from specdec_lite.bench.draft_cost import TimedProposer, break_even_verification
from specdec_lite.teaching.exactness import small_pair


def test_a_timed_proposer_emits_the_same_tokens_and_counts_what_it_proposed():
    target, draft, _ = small_pair()
    prompt = [0, 1, 2, 0, 1]
    timed = TimedProposer(ModelDraft(draft))
    runs = [speculative_generate(target, p, prompt, k=3, max_new_tokens=12, seed=7)
            for p in (draft, timed)]
    assert np.array_equal(runs[0].tokens, runs[1].tokens)
    assert timed.tokens == runs[1].n_proposed > 0
    assert timed.seconds > 0 and timed.seconds_per_token == timed.seconds / timed.tokens


def test_a_timed_proposer_keeps_a_missing_vocab_size_missing():
    timed = TimedProposer(PromptLookup())  # lookup has no vocabulary of its own
    assert not hasattr(timed, "vocab_size")
    assert TimedProposer(ModelDraft(small_pair()[1])).vocab_size == 3


def test_a_timed_proposer_refuses_what_cannot_propose_and_has_no_rate_before_a_token():
    with pytest.raises(TypeError, match="proposer"):
        TimedProposer(small_pair()[1])  # a model, not a proposer
    with pytest.raises(ValueError, match="no token"):
        _ = TimedProposer(PromptLookup()).seconds_per_token


@pytest.mark.parametrize(("k", "tau_a", "c_a", "tau_b", "c_b"),
                         [(3, 2.7, 0.3, 2.3, 0.2), (4, 3.0, 0.5, 2.0, 0.1),
                          (2, 2.5, 0.1, 2.0, 0.2)])
def test_at_the_break_even_cost_both_proposers_are_equally_fast(k, tau_a, c_a, tau_b, c_b):
    r = break_even_verification(k, tau_a, c_a, tau_b, c_b)
    assert tau_a / (k * c_a + r) == pytest.approx(tau_b / (k * c_b + r))
    # a dearer verification favours the better guesser a, a cheaper one the cheaper b
    for r_other, a_wins in ((r + 1.0, True), (r - 0.1, False)):
        if k * min(c_a, c_b) + r_other > 0:  # a step must cost something
            assert (tau_a / (k * c_a + r_other) > tau_b / (k * c_b + r_other)) == a_wins


def test_a_better_and_cheaper_proposer_breaks_even_below_zero():
    assert break_even_verification(3, 3.0, 0.1, 2.0, 0.2) < 0  # it wins at any r


@pytest.mark.parametrize(("args", "error", "name"), [
    ((0, 2.5, 0.3, 2.0, 0.2), ValueError, "k"),
    ((3, 2.0, 0.3, 2.5, 0.2), ValueError, "tau_a"),
    ((3, 2.5, -0.1, 2.0, 0.2), ValueError, "c_a"),
    ((3, 2.5, 0.3, 0.0, 0.2), ValueError, "tau_b"),
    ((3, 2.5, 0.3, 2.0, "0.2"), TypeError, "c_b"),
])
def test_break_even_verification_names_a_bad_argument(args, error, name):
    with pytest.raises(error, match=name):
        break_even_verification(*args)
