"""BertTokenClassifier: root-level head variables, per-token logits and the weighted loss."""
import numpy as np
import tensorflow as tf

from modeling import BertModel
from modeling.checkpoints import name_based
from modeling.models.ner import BertTokenClassifier


def test_head_variables_have_root_names(tiny_config):
    model = BertTokenClassifier(tiny_config, num_labels=5)
    names = {name_based.checkpoint_name(v): tuple(v.shape) for v in model.weights}
    assert names["output_weights"] == (5, 32) and names["output_bias"] == (5,)
    assert len(names) == len(BertModel(tiny_config).weights) + 2


def test_the_head_is_drawn_from_a_normal_of_the_configs_range(tiny_config):
    """Not the classifier's truncated normal: CoNLL-2003 trained a point of F1 better from a
    normal head. A normal cut at two standard deviations, even one widened to a spread of
    0.02, draws nothing beyond 0.05; a normal of 0.02 draws 1.2% there."""
    weights = BertTokenClassifier(tiny_config, num_labels=100).output_weights.numpy()
    assert tiny_config.initializer_range == 0.02 and weights.shape == (100, 32)
    assert abs(weights.std() - 0.02) < 0.001 and abs(weights.mean()) < 0.0015
    assert 0.005 < np.mean(np.abs(weights) > 0.05) < 0.025
    assert np.all(BertTokenClassifier(tiny_config, num_labels=5).output_bias.numpy() == 0)


def test_declared_variables_are_the_models(tiny_config):
    """The head is new to a pre-trained checkpoint; the pooler feeds nothing, so it may be
    absent (Hugging Face's token classifiers) and is not trained."""
    model = BertTokenClassifier(tiny_config, num_labels=5)
    names = {name_based.checkpoint_name(v) for v in model.weights}
    assert set(model.OPTIONAL_VARIABLES) == {"output_weights", "output_bias",
                                             "bert/pooler/dense/kernel", "bert/pooler/dense/bias"}
    assert set(model.OPTIONAL_VARIABLES) <= names
    assert model.UNTRAINED_PREFIXES == ("bert/pooler/",)
    inputs = {"input_ids": np.ones((2, 5), "int32"), "label_ids": np.zeros((2, 5), "int32"),
              "label_weights": np.ones((2, 5), "float32")}
    with tf.GradientTape() as tape:
        loss = model(inputs, training=True)["loss"]
    gradients = {name_based.checkpoint_name(v): g for v, g in
                 zip(model.trainable_variables, tape.gradient(loss, model.trainable_variables))}
    assert [name for name, g in gradients.items() if g is None] == [
        "bert/pooler/dense/kernel", "bert/pooler/dense/bias"]


def test_logits_predictions_and_loss(tiny_config, tiny_inputs):
    model = BertTokenClassifier(tiny_config, num_labels=5)
    model.output_bias.assign([0.0, 0.5, -0.5, 1.0, 0.0])
    labels = np.array([[0, 1, 2, 3, 4, 0, 1]] * 3)
    weights = np.array([[0, 1, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0], [0] * 7], "float32")
    outputs = model(dict(tiny_inputs, label_ids=labels, label_weights=weights))
    hidden = model.bert(tiny_inputs)["sequence_output"].numpy()  # [B, T, H]
    logits = hidden @ model.output_weights.numpy().T + model.output_bias.numpy()
    np.testing.assert_allclose(outputs["logits"], logits, atol=1e-5)
    np.testing.assert_array_equal(outputs["predictions"], np.argmax(logits, -1))
    log_probs = tf.nn.log_softmax(logits).numpy()
    nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(outputs["per_token_loss"], nll * weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outputs["loss"], (nll * weights).sum() / 4, rtol=1e-5)
