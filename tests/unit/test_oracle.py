"""The hindsight oracle of the drafters benchmark drafts exactly the tokens the target will
accept: greedy output is the target's, no drafted token is rejected, each k stays within
k_max, and the schedule covers the run. A schedule one token too eager is caught."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite import generate, load_pretrained, speculative_generate
from specdec_lite.bench.oracle import OracleK, oracle_schedule
from specdec_lite.drafting.proposers import PromptLookup


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


PROMPTS = ("def __init__(self", "for i in range(len(x)):\n    for i in range(",
           "import os\nimport sys\nimport ")


def rejected(gen) -> int:
    """Drafted tokens the target judged and turned down."""
    return sum(step.n_checked - step.n_accepted for step in gen.steps)


@pytest.mark.parametrize("drafter", ["gpt", "lookup"])
def test_the_oracle_drafts_exactly_what_is_accepted(shipped, drafter) -> None:
    draft = shipped.draft if drafter == "gpt" else PromptLookup()
    for text in PROMPTS:
        prompt = shipped.tokenizer.encode(text)
        schedule = oracle_schedule(shipped.target, draft, prompt, 60, k_max=6)
        assert max(schedule.values()) <= 6
        positions = sorted(schedule)  # each step starts where the last one's tokens end
        assert positions[0] == 0 and all(b - a == schedule[a] + 1
                                         for a, b in zip(positions, positions[1:], strict=False))
        gen = speculative_generate(shipped.target, draft, prompt, k=OracleK(schedule),
                                   max_new_tokens=60, temperature=0)
        plain = generate(shipped.target, prompt, max_new_tokens=60, temperature=0)
        assert gen.tokens.tolist() == plain.tokens.tolist()
        assert rejected(gen) == 0
        assert [len(step.proposed) for step in gen.steps] == [schedule[p] for p in positions]
        eager = OracleK({p: k + 1 for p, k in schedule.items()})  # one draft too many
        too_many = speculative_generate(shipped.target, draft, prompt, k=eager,
                                        max_new_tokens=60, temperature=0)
        assert too_many.tokens.tolist() == plain.tokens.tolist()
        if drafter == "gpt":  # a model always proposes k tokens, so the extra one is judged
            assert rejected(too_many) > 0


def test_the_oracle_checks_k_max(shipped) -> None:
    prompt = shipped.tokenizer.encode("x = ")
    with pytest.raises(ValueError, match="k_max"):
        oracle_schedule(shipped.target, shipped.draft, prompt, 10, k_max=0)
    assert OracleK().start == 0 and OracleK({0: 3}).start == 3
    assert np.all(np.array(list(oracle_schedule(shipped.target, shipped.draft, prompt, 10,
                                                k_max=1).values())) <= 1)
