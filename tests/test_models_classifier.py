import numpy as np
import pytest
import tensorflow as tf

from modeling import BertModel
from modeling.checkpoints import name_based
from modeling.models.classifier import BertClassifier


def test_head_variables_have_the_originals_root_names(tiny_config):
    model = BertClassifier(tiny_config, num_labels=3)
    names = {name_based.checkpoint_name(v): tuple(v.shape) for v in model.weights}
    assert names["output_weights"] == (3, 32) and names["output_bias"] == (3,)
    assert len(names) == len(BertModel(tiny_config).weights) + 2


def test_a_fine_tuned_checkpoint_round_trips_strictly(tiny_config, tiny_inputs, tmp_path):
    source = BertClassifier(tiny_config, num_labels=3)
    source.output_bias.assign([0.5, -0.5, 0.0])
    name_based.save_original(source, str(tmp_path / "model.ckpt"), global_step=9)
    target = BertClassifier(tiny_config, num_labels=3)
    result = name_based.load_original(target, str(tmp_path / "model.ckpt"))
    assert result.unused == [] and result.skipped == ["global_step"]
    np.testing.assert_array_equal(target(tiny_inputs)["logits"], source(tiny_inputs)["logits"])
    bare = name_based.load_original(BertModel(tiny_config), str(tmp_path / "model.ckpt"))
    assert bare.unused == ["output_bias", "output_weights"]


def test_losses_are_the_originals(tiny_config, tiny_inputs):
    model = BertClassifier(tiny_config, num_labels=3)
    out = model(dict(tiny_inputs, label_ids=np.array([0, 2, 1])))
    log_probs = tf.nn.log_softmax(out["logits"]).numpy()
    expected = -log_probs[[0, 1, 2], [0, 2, 1]]
    np.testing.assert_allclose(out["per_example_loss"], expected, rtol=1e-6)
    np.testing.assert_allclose(out["loss"], expected.mean(), rtol=1e-6)
    np.testing.assert_allclose(tf.reduce_sum(out["probabilities"], -1), 1.0, atol=1e-6)
    regression = BertClassifier(tiny_config, num_labels=1, regression=True)
    scored = regression(dict(tiny_inputs, label_ids=np.array([1.0, 4.5, 0.0], "float32")))
    np.testing.assert_allclose(
        scored["loss"], np.mean((scored["predictions"].numpy() - [1.0, 4.5, 0.0]) ** 2),
        rtol=1e-6)
    with pytest.raises(ValueError, match="one output"):
        BertClassifier(tiny_config, num_labels=2, regression=True)


def test_declared_variables_are_the_models(tiny_config):
    """A pre-trained checkpoint lacks the head; a converted masked-LM one the pooler too."""
    model = BertClassifier(tiny_config, num_labels=3)
    names = {name_based.checkpoint_name(v) for v in model.weights}
    assert set(model.OPTIONAL_VARIABLES) == {"output_weights", "output_bias",
                                             "bert/pooler/dense/kernel", "bert/pooler/dense/bias"}
    assert set(model.OPTIONAL_VARIABLES) <= names
    assert model.UNTRAINED_PREFIXES == ()
