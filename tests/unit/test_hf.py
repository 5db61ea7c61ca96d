"""The transformers bridge: the shipped GPTs exported to GPT-2, and the HFModel adapter.

Cross-checks (issue 16):

* the exported models' logits equal the numpy GPT's on held-out text, with and without
  the adapter's KV cache, within ``LOGIT_ATOL`` (float32 in two summation orders; the
  largest difference measured is about 1.2e-5 on logits up to about 14);
* greedy ``speculative_generate`` over the adapter gives the same tokens as HF greedy
  ``generate`` and HF assisted ``generate(assistant_model=...)`` on the exported pair;
* sampling through the adapter keeps the target's law (the library's chi-square), at
  T = 1 and with top-p, on tiny random GPT-2 models whose continuations can be enumerated.

Everything is read from local directories; no hub is contacted (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from support import imports_module

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
WHY = "needs the hf extra (torch, transformers): pip install -r requirements-hf.txt"
torch = pytest.importorskip("torch", reason=WHY)
transformers = pytest.importorskip("transformers", reason=WHY)

from specdec_lite import speculative_generate  # noqa: E402
from specdec_lite.hf.bridge import HFModel  # noqa: E402
from specdec_lite.hf.export import export_pretrained  # noqa: E402
from specdec_lite.models.corpus import load_text  # noqa: E402
from specdec_lite.pretrained import load_pretrained  # noqa: E402
from specdec_lite.teaching.exactness import chi_square, sample_continuations, sequence_law  # noqa: E402
from specdec_lite.teaching.example import PROMPT  # noqa: E402

LOGIT_ATOL = 1e-4  # float32 logits of magnitude <= ~15, summed in different orders


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_pretrained(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


@pytest.fixture(scope="module")
def heldout_ids(shipped):
    text = load_text("heldout")
    start = text.index("\n    def ", len(text) // 2) + 1
    return shipped.tokenizer.encode(text[start : start + 256])  # [256], the full window


@pytest.mark.parametrize("name", ["target", "draft"])
def test_exported_logits_equal_the_numpy_gpt_without_a_cache(exported, shipped, heldout_ids,
                                                             name):
    hf = HFModel.from_pretrained(exported[name])
    ours = getattr(shipped, name)
    expected = ours.logits(heldout_ids)  # [256, V]
    with torch.inference_mode():
        got = hf.model(torch.from_numpy(heldout_ids[None])).logits[0].numpy()  # [256, V]
    np.testing.assert_allclose(got, expected, rtol=0, atol=LOGIT_ATOL)
    np.testing.assert_allclose(hf.probs(heldout_ids), ours.probs(heldout_ids), rtol=0, atol=1e-5)


def test_exported_logits_equal_the_numpy_gpt_through_the_cache(exported, shipped, heldout_ids):
    """Blocks of 1, k + 1 and more tokens through the adapter's cache, with a rollback
    after a wrong guess, give the rows of one full forward."""
    hf = HFModel.from_pretrained(exported["target"])
    expected = shipped.target.logits(heldout_ids)  # [256, V]
    rows, done = [], 0
    for end in (40, 41, 46, 47, 120, 256):
        wrong = heldout_ids[:end].copy()
        wrong[-1] = (wrong[-1] + 1) % hf.vocab_size
        hf.logits(wrong, end - done)  # caches a token that is then rolled back
        rows.append(hf.logits(heldout_ids[:end], end - done))
        done = end
    np.testing.assert_allclose(np.concatenate(rows), expected, rtol=0, atol=LOGIT_ATOL)
    # the cache did its job: each wrong guess forwarded only the tokens new since the last
    # call (256 in all), and each correction only its last token (6 calls)
    assert hf.n_forwarded == 256 + 6
    # rows older than the adapter keeps (KEEP_ROWS) are computed again, from the start
    np.testing.assert_allclose(hf.logits(heldout_ids), expected, rtol=0, atol=LOGIT_ATOL)
    assert hf.n_forwarded == 2 * 256 + 6


def test_the_character_tokenizer_loads_in_transformers(exported, shipped, heldout_ids):
    tok = transformers.AutoTokenizer.from_pretrained(exported["target"], local_files_only=True)
    text = shipped.tokenizer.decode(heldout_ids)
    assert tok.encode(text, add_special_tokens=False) == heldout_ids.tolist()
    assert tok.decode(heldout_ids.tolist()) == text


@pytest.mark.parametrize("prompt_text", [PROMPT, "class Request:\n    def "])
def test_greedy_speculative_equals_hf_greedy_and_hf_assisted(exported, shipped, prompt_text):
    target = HFModel.from_pretrained(exported["target"])
    draft = HFModel.from_pretrained(exported["draft"])
    prompt = target.encode(prompt_text)
    n_new = 80
    ours = speculative_generate(target, draft, prompt, k=4, max_new_tokens=n_new,
                                temperature=0).tokens
    ids = torch.from_numpy(prompt[None])
    with torch.inference_mode():
        greedy = target.model.generate(ids, do_sample=False, max_new_tokens=n_new)
        assisted = target.model.generate(ids, do_sample=False, max_new_tokens=n_new,
                                         assistant_model=draft.model)
    assert greedy[0, len(prompt):].tolist() == ours.tolist()
    assert assisted[0, len(prompt):].tolist() == ours.tolist()
    numpy_run = speculative_generate(shipped.target, shipped.draft, prompt, k=4,
                                     max_new_tokens=n_new, temperature=0).tokens
    assert numpy_run.tolist() == ours.tolist()


def tiny_gpt2(seed: int) -> HFModel:
    """A random 1-layer GPT-2 over 4 tokens, its weights large enough for uneven rows (at
    seeds 0 and 1 the rows differ by 0.1 to 0.7 in total variation; top-p 0.8 leaves 13
    of the 64 continuations of length 3)."""
    config = transformers.GPT2Config(vocab_size=4, n_positions=16, n_embd=16, n_layer=1,
                                     n_head=2, initializer_range=0.3, bos_token_id=None,
                                     eos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    return HFModel(transformers.GPT2LMHeadModel(config))


@pytest.mark.parametrize("top_p", [None, 0.8])
def test_sampling_through_the_adapter_keeps_the_target_law(top_p):
    target, draft = tiny_gpt2(0), tiny_gpt2(1)
    prompt, length = [0, 1], 3
    law = sequence_law(target, prompt, length, temperature=1.0, top_p=top_p)
    assert len(law) > 8  # the test has cells to compare
    samples = sample_continuations(target, draft, prompt, length, 2000, seed=7, k=2,
                                   temperature=1.0, top_p=top_p)
    result = chi_square(samples, law)
    assert result.passed(), str(result)
    # the draft is a different model: the check compares two laws, not one with itself
    assert sequence_law(draft, prompt, length, top_p=top_p) != law


def test_the_adapter_checks_its_input(exported):
    hf = HFModel.from_pretrained(exported["draft"])
    with pytest.raises(ValueError, match="tokens"):
        hf.probs([0, 96])
    with pytest.raises(ValueError, match="tokens"):
        hf.probs([])
    with pytest.raises(ValueError, match="max_len"):
        hf.probs(np.zeros(257, dtype=np.int64))
    with pytest.raises(ValueError, match="n_rows"):
        hf.last_probs([1, 2], n_rows=3)
    with pytest.raises(TypeError, match="model"):
        HFModel(object())
    with pytest.raises(ValueError, match="tokenizer"):
        HFModel(hf.model).encode("x")
    with pytest.raises(FileNotFoundError, match="config.json"):
        HFModel.from_pretrained(exported["draft"] / "nowhere")


def test_importing_the_library_does_not_import_torch():
    assert not imports_module("import specdec_lite, specdec_lite.hf.bridge", "torch")


def test_the_hf_benchmark_rows_come_from_one_small_interleaved_run():
    from specdec_lite.bench import Settings
    from specdec_lite.bench.hf import format_hf, methods, run_hf

    settings = Settings(prompts=2, prompt_len=16, new_tokens=10, repeats=1)
    result = run_hf(settings, k=3)
    assert [r["label"] for r in result["rows"]] == methods(3)
    assert result["same_tokens"]  # greedy: every engine emits the same tokens
    assert len(result["runs"]) == 6 * 2
    for row in result["rows"]:
        lo, hi = row["tokens_per_s_ci"]
        assert 0 < lo <= row["tokens_per_s"] <= hi
        assert 0 < row["forward_share"] <= 1
    by_label = {r["label"]: r for r in result["rows"]}
    assert by_label["HF greedy"]["speedup_vs_hf_greedy"] == 1.0
    assert by_label["ours AR over numpy"]["target_calls"] == 10  # one forward per token
    assert by_label["HF greedy"]["target_calls"] is None  # HF's loop does not report them
    assert "same tokens from every method: True" in format_hf(result)
