"""Speculation under load (specdec_lite.engine.load): the chosen spec_max_batch is the largest
batch size up to which speculation was faster at every size measured, and it comes from
real timings: a draft that is slow on purpose is never chosen."""

from __future__ import annotations

import time

import numpy as np
import pytest

from specdec_lite import load_pretrained
from specdec_lite.drafting.proposers import PromptLookup
from specdec_lite.engine.load import batch_gains, choose_spec_max_batch, measure_spec_max_batch


@pytest.mark.parametrize(("gains", "chosen"), [
    ({1: 1.2, 2: 1.05, 4: 0.9, 8: 1.1}, 2),  # the first loss ends it, a later gain or not
    ({1: 0.95, 2: 1.3}, 0),  # slower even alone: every step plain
    ({1: 1.4, 4: 1.2, 16: 1.01}, 16),  # faster at every size
    ({1: 1.0}, 0),  # as fast is not faster
])
def test_choose_spec_max_batch(gains, chosen) -> None:
    assert choose_spec_max_batch(gains) == chosen


class SlowLookup(PromptLookup):
    """Prompt lookup that takes 20 ms a call: speculation with it never pays."""

    def propose(self, context, k, sampling, rng):
        time.sleep(0.02)
        return super().propose(context, k, sampling, rng)


def test_a_draft_that_costs_more_than_it_saves_is_never_chosen() -> None:
    shipped = load_pretrained()
    prompt = shipped.tokenizer.encode("for i in range(10):\n    for i in range(")
    chosen, gains = measure_spec_max_batch(shipped.target, SlowLookup(), prompt, k=4,
                                           max_batch=6, new_tokens=6, repeats=1)
    assert sorted(gains) == [1, 2, 4, 6]  # powers of two below max_batch, and max_batch
    assert all(0 < g < 1 for g in gains.values()) and chosen == 0


def test_batch_gains_checks_its_arguments() -> None:
    shipped = load_pretrained()
    prompt = np.array(shipped.tokenizer.encode("x = "))
    with pytest.raises(ValueError, match="sizes"):
        batch_gains(shipped.target, shipped.draft, prompt, k=2, sizes=(0, 2))
    with pytest.raises(ValueError, match="k"):
        batch_gains(shipped.target, shipped.draft, prompt, k=0, sizes=(1,))
    with pytest.raises(ValueError, match="max_batch"):
        measure_spec_max_batch(shipped.target, shipped.draft, prompt, k=2, max_batch=0)
