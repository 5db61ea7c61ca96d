"""The numpy GPT: agreement with torch, KV-cache consistency, tree attention, loading."""

from __future__ import annotations

import numpy as np
import pytest
from support import CONFIG, PARENTS, path_to, random_params, tokens, tree_mask

from specdec_lite.models.bound import BoundModel
from specdec_lite.models.transformer import (
    Block,
    TransformerModel,
    file_sha256,
    load_npz,
)


@pytest.fixture
def model() -> BoundModel:
    """A GPT on a cache of its own: the tests below read and change that cache."""
    return TransformerModel(CONFIG, random_params(CONFIG)).bound()


def test_matches_torch_forward() -> None:
    torch = pytest.importorskip("torch")
    from specdec_lite.training.train import GPT

    torch.manual_seed(0)
    reference = GPT(CONFIG)
    with torch.no_grad():  # move LN gains and biases away from their 1/0 init
        for name, p in reference.named_parameters():
            if name.endswith("bias") or "ln" in name:
                p.add_(0.1 * torch.randn_like(p))
    ids = tokens(CONFIG.max_len)
    with torch.no_grad():
        expected_logits, expected_hidden = reference(torch.from_numpy(ids)[None])
    numpy_model = TransformerModel(CONFIG, reference.numpy_state())
    logits, hidden = numpy_model.forward(ids)
    np.testing.assert_allclose(logits, expected_logits[0].numpy(), atol=1e-4)
    np.testing.assert_allclose(hidden, expected_hidden[0].numpy(), atol=1e-4)


def test_incremental_equals_full_forward(model: BoundModel) -> None:
    ids = tokens(30)
    full = TransformerModel(CONFIG, random_params(CONFIG)).forward(ids).logits  # [30, V]
    pieces = [model.forward(ids[a:b]).logits for a, b in [(0, 7), (7, 8), (8, 20), (20, 30)]]
    np.testing.assert_allclose(np.concatenate(pieces), full, atol=1e-5)
    assert model.cache.length == model.cache.n_causal == 30


def test_truncate_then_extend_equals_fresh(model: BoundModel) -> None:
    ids, other = tokens(25), tokens(25, seed=2)
    model.forward(ids)
    model.rollback(10)
    assert model.n_committed == 10
    extended = model.forward(other[10:]).logits
    fresh = TransformerModel(CONFIG, random_params(CONFIG)).forward(np.r_[ids[:10], other[10:]])
    np.testing.assert_allclose(extended, fresh.logits[10:], atol=1e-5)


def test_probs_reuses_prefix_after_rejection(model: BoundModel) -> None:
    ids, other = tokens(20), tokens(20, seed=3)
    model.probs(ids)
    shorter = np.r_[ids[:12], other[:5]]
    np.testing.assert_allclose(model.probs(shorter),
                               TransformerModel(CONFIG, random_params(CONFIG)).probs(shorter),
                               atol=1e-6)
    assert model.cache.length == 17


def test_tree_mask_matches_each_path(model: BoundModel) -> None:
    prefix, nodes = tokens(5), tokens(len(PARENTS), seed=4)
    mask, depth = tree_mask(PARENTS)
    model.forward(prefix)
    tree = model.forward(nodes, positions=len(prefix) + depth, mask=mask)
    reference = TransformerModel(CONFIG, random_params(CONFIG))
    for node in range(len(PARENTS)):
        path = path_to(node)
        expected = reference.logits(np.r_[prefix, nodes[path]])[-1]
        np.testing.assert_allclose(tree.logits[node], expected, atol=1e-5)
        expected_hidden = reference.hidden(np.r_[prefix, nodes[path]])[-1]
        np.testing.assert_allclose(tree.hidden[node], expected_hidden, atol=1e-5)


def test_keep_path_then_extend_equals_fresh(model: BoundModel) -> None:
    prefix, nodes, more = tokens(5), tokens(len(PARENTS), seed=4), tokens(3, seed=5)
    mask, depth = tree_mask(PARENTS)
    model.forward(prefix)
    model.forward(nodes, positions=len(prefix) + depth, mask=mask)
    assert model.cache.n_causal == 5
    path = path_to(5)  # nodes 0, 2, 4, 5
    model.cache.keep_path(len(prefix) + np.array(path))
    sequence = np.r_[prefix, nodes[path], more]
    np.testing.assert_allclose(model.logits(sequence),  # reuses all 9 kept entries
                               TransformerModel(CONFIG, random_params(CONFIG)).logits(sequence),
                               atol=1e-5)
    assert model.cache.n_causal == len(sequence)


def test_score_tree_commit_path_equals_fresh(model: BoundModel) -> None:
    """The public tree interface: score a block on the committed prefix, commit one path,
    and the model then continues exactly as a causal forward of prefix + path would."""
    prefix, nodes, more = tokens(5), tokens(len(PARENTS), seed=4), tokens(3, seed=5)
    mask, depth = tree_mask(PARENTS)
    model.logits(prefix)
    assert model.n_committed == 5
    model.score_tree(tokens(2, seed=9), np.array([0, 1]), np.tri(2, dtype=bool))  # dropped
    tree = model.score_tree(nodes, depth, mask)
    assert model.n_committed == 5
    reference = TransformerModel(CONFIG, random_params(CONFIG))
    sequence = np.r_[prefix, nodes[path_to(5)]]
    np.testing.assert_allclose(tree.logits[5], reference.logits(sequence)[-1], atol=1e-5)
    model.commit_path(path_to(5))  # nodes 0, 2, 4, 5
    assert model.n_committed == 9
    np.testing.assert_allclose(model.hidden_at(8), reference.hidden(sequence)[-1], atol=1e-5)
    longer = np.r_[sequence, more]
    np.testing.assert_allclose(model.logits(longer), reference.logits(longer), atol=1e-5)


def test_tree_interface_rejects_bad_arguments(model: BoundModel) -> None:
    model.logits(tokens(4))
    with pytest.raises(ValueError, match="length"):
        model.rollback(5)
    with pytest.raises(TypeError, match="length"):
        model.rollback(2.0)
    with pytest.raises(ValueError, match="i"):
        model.hidden_at(4)
    model.score_tree(tokens(3), np.array([0, 1, 1]), np.array([[1, 0, 0], [1, 1, 0], [1, 0, 1]],
                                                              dtype=bool))
    with pytest.raises(ValueError, match="rows"):
        model.commit_path([0, 3])  # the block has nodes 0..2 only
    with pytest.raises(ValueError, match="rows"):
        model.commit_path([1, 0])


def test_the_model_keeps_no_cache_of_its_own() -> None:
    """Without cache= a sequence call runs on a cache it then drops: its answer does not
    depend on earlier calls. The calls that read or change a cache's entries need one."""
    model = TransformerModel(CONFIG, random_params(CONFIG))
    ids, other = tokens(12), tokens(12, seed=6)
    alone = model.logits(ids)
    model.logits(np.r_[ids[:7], other[:3]])  # would leave 7 shared entries on a kept cache
    np.testing.assert_array_equal(model.logits(ids), alone)
    np.testing.assert_array_equal(model.forward(ids).logits, alone)  # from position 0
    assert not hasattr(model, "cache") and not hasattr(model, "n_committed")
    mask, depth = tree_mask(PARENTS)
    for call in (lambda: model.rollback(0), lambda: model.hidden_at(0),
                 lambda: model.score_tree(tokens(len(PARENTS)), depth, mask),
                 lambda: model.commit_path([0])):
        with pytest.raises(TypeError, match="cache="):
            call()


def test_blocks_are_named_and_positional(model: BoundModel) -> None:
    block = model.layers[0]
    assert isinstance(block, Block) and len(block) == 8
    assert block.c_attn_w is block[0] and block.mlp_c_proj_b is block[7]
    d = CONFIG.d_model
    assert block.c_attn_w.shape == (d, 3 * d) and block.c_fc_w.shape == (d, 4 * d)
    assert block.attn_c_proj_w.shape == (d, d) and block.mlp_c_proj_w.shape == (4 * d, d)


def test_probs_rows_sum_to_one(model: BoundModel) -> None:
    p = model.probs(tokens(30))
    assert p.shape == (30, CONFIG.vocab_size) and p.dtype == np.float64
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-9)
    assert model.probs([]).shape == (0, CONFIG.vocab_size)


@pytest.mark.parametrize("bad", [[1, 2, 13], [-1], [[1, 2]]])
def test_bad_tokens_raise(model: TransformerModel, bad: list) -> None:
    with pytest.raises(ValueError, match="tokens"):
        model.probs(bad)


def test_too_long_raises(model: BoundModel) -> None:
    with pytest.raises(ValueError, match="max_len"):
        model.probs(tokens(CONFIG.max_len + 1))


def test_bad_mask_and_positions_raise(model: BoundModel) -> None:
    with pytest.raises(ValueError, match="mask"):
        model.forward(tokens(3), mask=np.zeros((3, 3), dtype=bool))
    with pytest.raises(ValueError, match="positions"):
        model.forward(tokens(2), positions=[0, CONFIG.max_len])


def test_load_npz_checks_file(tmp_path) -> None:
    path = tmp_path / "tiny.npz"
    np.savez(path, **{k: v.astype(np.float16) for k, v in random_params(CONFIG).items()})
    digest = file_sha256(path)
    loaded = TransformerModel.from_npz(path, CONFIG, digest)
    assert loaded.probs(tokens(4)).shape == (4, CONFIG.vocab_size)
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        load_npz(tmp_path / "missing.npz", digest)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="tiny.npz"):
        load_npz(path, digest)
    with pytest.raises(ValueError, match="tiny.npz"):
        load_npz(path, file_sha256(path))  # checksum fits, but the archive is broken
