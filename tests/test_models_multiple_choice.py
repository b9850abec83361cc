"""BertMultipleChoice: one score per (context, ending) sequence, a softmax over the choices."""
import numpy as np
import tensorflow as tf

from modeling import BertModel
from modeling.checkpoints import name_based
from modeling.models.multiple_choice import BertMultipleChoice


def _inputs(config, batch=2, choices=4, seq=7):
    rng = np.random.default_rng(5)
    return {"input_ids": rng.integers(1, config.vocab_size, (batch, choices, seq)).astype("int32"),
            "input_mask": np.ones((batch, choices, seq), "int32"),
            "token_type_ids": np.zeros((batch, choices, seq), "int32")}


def test_the_scoring_vector_has_root_names(tiny_config):
    model = BertMultipleChoice(tiny_config)
    names = {name_based.checkpoint_name(v): tuple(v.shape) for v in model.weights}
    assert names["output_weights"] == (1, 32) and names["output_bias"] == (1,)
    assert len(names) == len(BertModel(tiny_config).weights) + 2


def test_declared_variables_are_the_models(tiny_config):
    model = BertMultipleChoice(tiny_config)
    names = {name_based.checkpoint_name(v) for v in model.weights}
    assert set(model.OPTIONAL_VARIABLES) == {"output_weights", "output_bias",
                                             "bert/pooler/dense/kernel", "bert/pooler/dense/bias"}
    assert set(model.OPTIONAL_VARIABLES) <= names
    assert model.UNTRAINED_PREFIXES == ()  # the score reads the pooler


def test_each_choice_is_scored_alone_and_the_softmax_runs_over_choices(tiny_config):
    model = BertMultipleChoice(tiny_config)
    inputs = _inputs(tiny_config)
    outputs = model(dict(inputs, label_ids=np.array([3, 1])))
    assert outputs["logits"].shape == (2, 4)
    pooled = model.bert({k: v.reshape(8, 7) for k, v in inputs.items()})["pooled_output"]
    scores = pooled.numpy() @ model.output_weights.numpy().T + model.output_bias.numpy()
    np.testing.assert_allclose(outputs["logits"], scores.reshape(2, 4), atol=1e-5)
    swapped = model({k: v[:, ::-1] for k, v in inputs.items()})
    np.testing.assert_allclose(swapped["logits"], outputs["logits"].numpy()[:, ::-1], atol=1e-5)
    log_probs = tf.nn.log_softmax(outputs["logits"]).numpy()
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(-1), 1.0, atol=1e-6)
    expected = -log_probs[[0, 1], [3, 1]]
    np.testing.assert_allclose(outputs["per_example_loss"], expected, rtol=1e-5)
    np.testing.assert_allclose(outputs["loss"], expected.mean(), rtol=1e-5)
