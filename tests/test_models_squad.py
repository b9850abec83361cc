"""BertSpanModel: the original's variable names, logits and loss."""
import numpy as np
import tensorflow as tf

from modeling.checkpoints import name_based
from modeling.models.squad import BertSpanModel


def _inputs(config, batch=3, seq=7):
    rng = np.random.default_rng(0)
    return {"input_ids": rng.integers(1, config.vocab_size, (batch, seq)).astype("int32"),
            "input_mask": np.array([[1] * seq, [1] * (seq - 2) + [0] * 2, [1] * 3 + [0] * 4],
                                   "int32"),
            "token_type_ids": np.zeros((batch, seq), "int32")}


def test_head_variables_have_the_original_names(tiny_config):
    model = BertSpanModel(tiny_config)
    names = {name_based.checkpoint_name(v): tuple(v.shape) for v in model.weights}
    assert names["cls/squad/output_weights"] == (2, tiny_config.hidden_size)
    assert names["cls/squad/output_bias"] == (2,)
    assert all(name.startswith("bert/") for name in names if not name.startswith("cls/squad"))


def test_logits_are_the_head_applied_to_the_sequence_output(tiny_config):
    model = BertSpanModel(tiny_config)
    model.squad.output_bias.assign([0.5, -0.25])
    inputs = _inputs(tiny_config)
    outputs = model(inputs)
    hidden = model.bert(inputs)["sequence_output"].numpy()  # [B, T, H]
    weights = model.squad.output_weights.numpy()  # [2, H]
    expected = hidden @ weights.T + np.array([0.5, -0.25])
    np.testing.assert_allclose(outputs["start_logits"], expected[:, :, 0], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"], expected[:, :, 1], atol=1e-5)


def test_loss_is_the_mean_of_start_and_end_cross_entropies(tiny_config):
    model = BertSpanModel(tiny_config)
    inputs = dict(_inputs(tiny_config), start_positions=np.array([1, 0, 2]),
                  end_positions=np.array([3, 0, 2]))
    outputs = model(inputs)
    start, end = outputs["start_logits"].numpy(), outputs["end_logits"].numpy()

    def nll(logits, positions):
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -log_probs[np.arange(len(positions)), positions]
    per_example = (nll(start, inputs["start_positions"]) + nll(end, inputs["end_positions"])) / 2
    np.testing.assert_allclose(outputs["per_example_loss"], per_example, rtol=1e-5)
    np.testing.assert_allclose(float(outputs["loss"]), per_example.mean(), rtol=1e-5)


def test_an_original_squad_checkpoint_round_trips_strictly(tiny_config, tmp_path):
    model = BertSpanModel(tiny_config)
    model.squad.output_bias.assign([1.0, 2.0])
    name_based.save_original(model, str(tmp_path / "model.ckpt"), global_step=7)
    other = BertSpanModel(tiny_config)
    result = name_based.load_original(other, tmp_path / "model.ckpt")
    assert "cls/squad/output_bias" in result.loaded and result.skipped == ["global_step"]
    for a, b in zip(model.weights, other.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert tf.train.load_checkpoint(str(tmp_path / "model.ckpt")).get_tensor("global_step") == 7


def test_declared_variables_are_the_models(tiny_config):
    """The span head is new to a pre-trained checkpoint; the pooler feeds nothing, so it may
    be absent (Hugging Face's question-answering models) and is not trained."""
    model = BertSpanModel(tiny_config)
    names = {name_based.checkpoint_name(v) for v in model.weights}
    assert set(model.OPTIONAL_VARIABLES) == {"cls/squad/output_weights", "cls/squad/output_bias",
                                             "bert/pooler/dense/kernel", "bert/pooler/dense/bias"}
    assert set(model.OPTIONAL_VARIABLES) <= names
    assert model.UNTRAINED_PREFIXES == ("bert/pooler/",)
