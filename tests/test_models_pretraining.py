"""BertPretrainer: the encoder with the masked-LM and next-sentence heads."""
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertPretrainer
from modeling.checkpoints import name_based


def test_masked_lm_output_is_tied_to_the_word_embeddings(tiny_config, tiny_inputs):
    model = BertPretrainer(tiny_config)
    assert model.masked_lm.embedding_table is model.bert.get_embedding_table()
    names = [name_based.checkpoint_name(v) for v in model.weights]
    assert names.count("bert/embeddings/word_embeddings") == 1
    inputs = dict(tiny_inputs, masked_lm_positions=np.array([[1, 2], [0, 4], [2, 2]]))
    before = model(inputs)["masked_lm_log_probs"]
    assert before.shape == (3, 2, 99)
    np.testing.assert_allclose(tf.reduce_sum(tf.exp(before), -1), 1.0, atol=1e-5)
    table = model.bert.get_embedding_table()
    table.assign(table * 2.0)
    assert np.max(np.abs(model(inputs)["masked_lm_log_probs"] - before)) > 1e-4


def test_pretrainer_needs_all_labels_or_none(tiny_config, tiny_inputs):
    model = BertPretrainer(tiny_config)
    inputs = dict(tiny_inputs, masked_lm_positions=np.array([[1, 2]] * 3))
    assert "total_loss" not in model(inputs)
    with pytest.raises(ValueError, match="needs all of"):
        model(dict(inputs, masked_lm_ids=np.array([[1, 2]] * 3)))
    out = model(dict(inputs, masked_lm_ids=np.array([[5, 6]] * 3),
                     masked_lm_weights=np.ones((3, 2), "float32"),
                     next_sentence_labels=np.array([[0], [1], [0]])))
    np.testing.assert_allclose(out["total_loss"], out["masked_lm_loss"] + out["next_sentence_loss"])
    assert out["masked_lm_example_loss"].shape == (3, 2)
    assert out["next_sentence_example_loss"].shape == (3,)


def test_declared_variables_are_the_models(tiny_config):
    """A converted masked-LM model lacks the pooler and the next-sentence head."""
    names = {name_based.checkpoint_name(v) for v in BertPretrainer(tiny_config).weights}
    assert set(BertPretrainer.OPTIONAL_VARIABLES) == {
        "bert/pooler/dense/kernel", "bert/pooler/dense/bias",
        "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"}
    assert set(BertPretrainer.OPTIONAL_VARIABLES) <= names
    assert BertPretrainer.UNTRAINED_PREFIXES == ()
