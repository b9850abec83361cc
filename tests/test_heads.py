import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertPretrainer, heads
from modeling.checkpoints import name_based


def test_masked_lm_loss_is_weighted_mean_with_epsilon():
    log_probs = np.log(np.full((2, 3, 5), 0.2, "float32"))
    log_probs[0, 0] = np.log([0.1, 0.6, 0.1, 0.1, 0.1])
    ids = np.array([[1, 0, 4], [2, 3, 0]])
    weights = np.array([[1, 1, 0], [1, 0, 0]], "float32")
    loss, per_example = heads.masked_lm_loss(tf.constant(log_probs), ids, weights)
    expected = [[-np.log(0.6), -np.log(0.2), -np.log(0.2)], [-np.log(0.2)] * 3]
    np.testing.assert_allclose(per_example, expected, rtol=1e-6)
    np.testing.assert_allclose(loss, (-np.log(0.6) - 2 * np.log(0.2)) / (3 + 1e-5), rtol=1e-6)
    zero, _ = heads.masked_lm_loss(tf.constant(log_probs), ids, np.zeros((2, 3), "float32"))
    assert float(zero) == 0.0


def test_next_sentence_loss_is_the_mean():
    log_probs = tf.math.log(tf.constant([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]]))
    loss, per_example = heads.next_sentence_loss(log_probs, np.array([[0], [1], [1]]))
    np.testing.assert_allclose(per_example, -np.log([0.9, 0.7, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(loss, -np.log([0.9, 0.7, 0.5]).mean(), rtol=1e-6)


def test_gather_positions_takes_each_rows_own_positions():
    sequence = tf.reshape(tf.range(2 * 4 * 3, dtype=tf.float32), [2, 4, 3])
    gathered = heads.gather_positions(sequence, np.array([[3, 0], [1, 1]]))
    np.testing.assert_array_equal(gathered, np.stack([sequence[0].numpy()[[3, 0]],
                                                      sequence[1].numpy()[[1, 1]]]))


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


def test_every_model_runs_eagerly_in_mixed_bfloat16(tiny_config, tiny_inputs):
    """Head variables are read in float32 (no autocast), so float32 logits + bias add up."""
    from modeling.models.classifier import BertClassifier
    from modeling.models.squad import BertSpanModel
    from modeling.models.ner import BertTokenClassifier
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        models = [BertPretrainer(tiny_config), BertClassifier(tiny_config, 3),
                  BertSpanModel(tiny_config), BertTokenClassifier(tiny_config, 4)]
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    inputs = dict(tiny_inputs, masked_lm_positions=np.ones((3, 2), "int32"))
    for model in models:
        outputs = model(inputs)
        logits = [v for k, v in outputs.items() if "logit" in k or "log_prob" in k]
        assert logits and all(v.dtype == tf.float32 for v in logits), model.name
