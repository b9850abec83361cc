"""The heads and their losses, each defined once (modeling/heads.py)."""
import keras
import numpy as np
import tensorflow as tf

from modeling import BertPretrainer, heads


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


def test_masked_lm_loss_divides_by_the_global_weight_given():
    log_probs = tf.math.log(tf.fill([2, 3, 5], 0.2))
    weights = np.array([[1, 1, 0], [1, 0, 0]], "float32")
    loss, _ = heads.masked_lm_loss(log_probs, np.zeros((2, 3)), weights, tf.constant(7.0))
    np.testing.assert_allclose(loss, -3 * np.log(0.2) / (7 + 1e-5), rtol=1e-6)


def test_classification_loss_is_the_mean_or_the_sum_over_the_global_batch():
    """The next-sentence, classifier and multiple-choice loss; labels [B] or [B, 1]."""
    log_probs = tf.math.log(tf.constant([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]]))
    loss, per_example = heads.classification_loss(log_probs, np.array([[0], [1], [1]]))
    np.testing.assert_allclose(per_example, -np.log([0.9, 0.7, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(loss, -np.log([0.9, 0.7, 0.5]).mean(), rtol=1e-6)
    loss, _ = heads.classification_loss(log_probs, np.array([0, 1, 1]), tf.constant(6.0))
    np.testing.assert_allclose(loss, -np.log([0.9, 0.7, 0.5]).sum() / 6, rtol=1e-6)


def test_regression_loss_is_the_squared_error():
    loss, per_example = heads.regression_loss(tf.constant([1.0, 2.0, 4.0]),
                                              np.array([1.5, 2.0, 1.0], "float32"))
    np.testing.assert_allclose(per_example, [0.25, 0.0, 9.0])
    np.testing.assert_allclose(loss, 9.25 / 3, rtol=1e-6)
    loss, _ = heads.regression_loss(tf.constant([1.0]), np.array([3.0]), tf.constant(8.0))
    np.testing.assert_allclose(loss, 0.5)


def test_token_classification_loss_counts_only_labelled_tokens():
    log_probs = tf.math.log(tf.constant([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]],
                                         [[0.2, 0.2, 0.6], [1 / 3, 1 / 3, 1 / 3]]]))
    labels = np.array([[0, 1], [2, 0]])
    weights = np.array([[1, 0], [1, 0]], "float32")
    loss, per_token = heads.token_classification_loss(log_probs, labels, weights)
    np.testing.assert_allclose(per_token, [[-np.log(0.5), 0], [-np.log(0.6), 0]], rtol=1e-6)
    np.testing.assert_allclose(loss, -(np.log(0.5) + np.log(0.6)) / 2, rtol=1e-6)
    loss, _ = heads.token_classification_loss(log_probs, labels, weights, tf.constant(5.0))
    np.testing.assert_allclose(loss, -(np.log(0.5) + np.log(0.6)) / 5, rtol=1e-6)
    zero, _ = heads.token_classification_loss(log_probs, labels, np.zeros((2, 2), "float32"))
    assert float(zero) == 0.0  # divided by max(Σ w, 1): no label, no loss, no NaN


def test_span_loss_is_the_mean_of_the_start_and_end_cross_entropies():
    start = tf.math.log(tf.constant([[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]))
    end = tf.math.log(tf.constant([[0.1, 0.1, 0.8], [0.5, 0.4, 0.1]]))
    loss, per_example = heads.span_loss(start, end, np.array([0, 2]), np.array([2, 1]))
    expected = -np.array([np.log(0.5) + np.log(0.8), np.log(0.6) + np.log(0.4)]) / 2
    np.testing.assert_allclose(per_example, expected, rtol=1e-5)
    np.testing.assert_allclose(loss, expected.mean(), rtol=1e-5)
    loss, _ = heads.span_loss(start, end, np.array([0, 2]), np.array([2, 1]), tf.constant(4.0))
    np.testing.assert_allclose(loss, expected.sum() / 4, rtol=1e-5)


def test_output_logits_apply_the_originals_out_by_in_weights():
    rows = np.arange(6, dtype="float32").reshape(2, 3)
    weights = np.array([[1, 0, 0], [0, 1, 1]], "float32")  # [out 2, in 3]
    logits = heads.output_logits(tf.constant(rows), weights, np.array([0.5, -1], "float32"))
    np.testing.assert_allclose(logits, rows @ weights.T + [0.5, -1])
    bfloat16 = heads.output_logits(tf.cast(rows, tf.bfloat16), weights, np.zeros(2, "float32"))
    assert bfloat16.dtype == tf.float32


def test_fine_tuning_heads_read_the_dropout_when_built(tiny_config, monkeypatch):
    from modeling.models.classifier import BertClassifier
    from modeling.models.multiple_choice import BertMultipleChoice
    from modeling.models.ner import BertTokenClassifier
    builds = (lambda: BertClassifier(tiny_config, 2), lambda: BertMultipleChoice(tiny_config),
              lambda: BertTokenClassifier(tiny_config, 3))
    assert [build().dropout.rate for build in builds] == [0.1] * 3
    monkeypatch.setattr(heads, "HEAD_DROPOUT_PROB", 0.0)
    assert [build().dropout.rate for build in builds] == [0.0] * 3


def test_gather_positions_takes_each_rows_own_positions():
    sequence = tf.reshape(tf.range(2 * 4 * 3, dtype=tf.float32), [2, 4, 3])
    gathered = heads.gather_positions(sequence, np.array([[3, 0], [1, 1]]))
    np.testing.assert_array_equal(gathered, np.stack([sequence[0].numpy()[[3, 0]],
                                                      sequence[1].numpy()[[1, 1]]]))


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
