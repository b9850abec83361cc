import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertModel, heads
from modeling.encoder import token_rows
from modeling.models.classifier import BertClassifier
from modeling.models.multiple_choice import BertMultipleChoice
from modeling.models.ner import BertTokenClassifier
from modeling.models.pretraining import BertPretrainer


def no_dropout(config):
    return BertConfig.from_dict(dict(config.to_dict(), hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0))


@pytest.fixture
def no_head_dropout(monkeypatch):
    monkeypatch.setattr(heads, "HEAD_DROPOUT_PROB", 0.0)


def test_real_tokens_are_the_masked_positions_in_batch_order(tiny_inputs):
    mask = tiny_inputs["input_mask"]  # rows of 7, 5 and 3 tokens
    layout = token_rows.RealTokens(mask)
    values = np.arange(3 * 7 * 2, dtype="float32").reshape(3, 7, 2)
    rows = layout.rows(values).numpy()
    np.testing.assert_array_equal(rows, values[mask == 1])
    np.testing.assert_array_equal(layout.positions().numpy(), np.nonzero(mask)[1])
    back = layout.batch(rows).numpy()
    np.testing.assert_array_equal(back, values * mask[..., None])  # zeros at padding
    positions = np.array([[0, 6], [4, 1], [2, 0]])
    np.testing.assert_array_equal(layout.row_of(positions).numpy(),
                                  [[0, 6], [11, 8], [14, 12]])
    # A position in the padding (a masked-LM slot of weight 0) reads some real token's row.
    assert 0 <= layout.row_of(np.array([[0, 0], [0, 0], [0, 6]])).numpy()[2, 1] < len(rows)
    every = token_rows.AllPositions(mask)
    np.testing.assert_array_equal(every.batch(every.rows(values)).numpy(), values)
    np.testing.assert_array_equal(every.row_of(positions).numpy(), [[0, 6], [11, 8], [16, 14]])


def test_real_token_output_is_calls_output_at_the_real_tokens(tiny_config, tiny_inputs):
    model = BertModel(tiny_config)
    mask = tiny_inputs["input_mask"][..., None]
    full = model(tiny_inputs)
    packed = model.real_token_output(tiny_inputs).numpy()
    np.testing.assert_allclose(packed * mask, full["sequence_output"].numpy() * mask, atol=1e-5)
    assert not np.any(packed * (1 - mask))
    positions = np.array([[0, 6, 2], [0, 4, 4], [0, 1, 2]], "int32")
    at = model.real_token_output(tiny_inputs, positions).numpy()
    expected = np.take_along_axis(full["sequence_output"].numpy(), positions[..., None], 1)
    np.testing.assert_allclose(at, expected, atol=1e-5)
    np.testing.assert_allclose(model.pooler(at).numpy(), full["pooled_output"].numpy(),
                               atol=1e-5)


def test_under_xla_every_position_is_computed_with_the_same_numbers(tiny_config, tiny_inputs):
    model = BertModel(tiny_config)
    positions = np.array([[0, 3], [0, 4], [0, 2]], "int32")
    layouts = []

    def output():
        layouts.append(type(token_rows.for_input_mask(tiny_inputs["input_mask"])))
        return model.real_token_output(tiny_inputs, positions)

    compiled = tf.function(output, jit_compile=True)().numpy()
    assert layouts == [token_rows.AllPositions]
    np.testing.assert_allclose(compiled, output().numpy(), atol=1e-5)
    assert layouts[-1] is token_rows.RealTokens


def test_training_models_compute_the_losses_of_every_position(tiny_config, tiny_inputs,
                                                                no_head_dropout):
    """Without dropout, training=True (padding and unread positions not computed) and
    training=False (every position, as the original) give the same losses and gradients."""
    config = no_dropout(tiny_config)
    batch = 3
    labels = {"label_ids": np.array([0, 2, 1], "int32")}
    tokens = {"label_ids": tiny_inputs["input_ids"] % 5,
              "label_weights": tiny_inputs["input_mask"].astype("float32")}
    pretraining = {"masked_lm_positions": np.array([[1, 5], [3, 0], [2, 0]], "int32"),
                   "masked_lm_ids": np.array([[4, 9], [7, 0], [1, 0]], "int32"),
                   "masked_lm_weights": np.array([[1, 1], [1, 0], [1, 0]], "float32"),
                   "next_sentence_labels": np.array([0, 1, 1], "int32")}
    choices = {name: np.stack([value, value[::-1]], axis=1) for name, value in
               tiny_inputs.items()}
    cases = [(BertClassifier(config, 3), dict(tiny_inputs, **labels), "loss"),
             (BertTokenClassifier(config, 5), dict(tiny_inputs, **tokens), "loss"),
             (BertPretrainer(config), dict(tiny_inputs, **pretraining), "total_loss"),
             (BertMultipleChoice(config), dict(choices, label_ids=np.ones([batch], "int32")),
              "loss")]
    for model, inputs, name in cases:
        losses, gradients = [], []
        for training in (False, True):
            with tf.GradientTape() as tape:
                loss = model(inputs, training=training)[name]
            losses.append(float(loss))
            gradients.append([None if g is None else tf.convert_to_tensor(g).numpy()
                              for g in tape.gradient(loss, model.trainable_variables)])
        assert losses[0] == pytest.approx(losses[1], rel=1e-5), type(model).__name__
        for every, packed in zip(*gradients):
            assert (every is None) == (packed is None)  # NER's pooler: no gradient either way
            if every is not None:
                np.testing.assert_allclose(packed, every, atol=1e-5)


def test_real_tokens_train_in_mixed_bfloat16(tiny_config, tiny_inputs):
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        model = BertClassifier(tiny_config, 3)
        outputs = model(dict(tiny_inputs, label_ids=np.array([0, 1, 2], "int32")),
                        training=True)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert outputs["logits"].dtype == tf.float32
    assert np.isfinite(float(outputs["loss"]))
