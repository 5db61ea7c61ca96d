"""A process for tests/integration/test_journal.py to kill: one journaled GPT generation,
slowed down, printing the number of committed steps after each one.

    python journal_child.py JOURNAL REQUEST_ID TEMPERATURE SEED MAX_NEW_TOKENS
"""

import sys
import time

from specdec_lite.engine.journal import Journal, journaled_generate
from specdec_lite.teaching.example import gpt_pair, prompt_ids

path, request_id, temperature, seed, max_new_tokens = sys.argv[1:6]
tokenizer, target, draft = gpt_pair()


def on_step(gen, rng):
    print(len(gen.steps), flush=True)  # this step is committed by now
    time.sleep(0.05)  # slow enough that the test kills it mid-generation


with Journal(path) as journal:
    journaled_generate(journal, target, draft, prompt_ids(tokenizer), seed=int(seed),
                       request_id=request_id, k=4, max_new_tokens=int(max_new_tokens),
                       temperature=float(temperature), on_step=on_step)
print("done", flush=True)
