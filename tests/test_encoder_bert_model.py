import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertModel, BertPretrainer
from modeling.checkpoints import name_based


def _reference_pretrainer(refs):
    model_dir = refs / "model"
    model = BertPretrainer(BertConfig.from_json_file(model_dir / "bert_config.json"))
    name_based.load_original(model, str(model_dir / "bert_model.ckpt"))
    return model, np.load(model_dir / "outputs.npz")


def _reference_inputs(golden):
    names = {"input_ids": "input_ids", "input_mask": "input_mask", "token_type_ids": "segment_ids",
             "masked_lm_positions": "masked_lm_positions", "masked_lm_ids": "masked_lm_ids",
             "masked_lm_weights": "masked_lm_weights",
             "next_sentence_labels": "next_sentence_labels"}
    return {ours: golden["input_" + theirs] for ours, theirs in names.items()}


def test_every_output_matches_the_original(refs):
    model, golden = _reference_pretrainer(refs)
    out = model(_reference_inputs(golden), training=False)
    vocab_size = model.config.vocab_size
    hidden = {
        "embedding_output": out["embedding_output"],
        "encoder_layer_0": out["encoder_outputs"][0],
        "encoder_layer_1": out["encoder_outputs"][1],
        "sequence_output": out["sequence_output"],
        "pooled_output": out["pooled_output"],
        "attention_probs_layer_0": out["attention_probs"][0],
        "attention_probs_layer_1": out["attention_probs"][1],
    }
    for name, value in hidden.items():
        np.testing.assert_allclose(value, golden[name], atol=1e-5, rtol=0, err_msg=name)
    # The original returns masked-LM rows batch-major as [B*P, V]; ours are [B, P, V].
    log_probs_and_losses = {
        "masked_lm_log_probs": tf.reshape(out["masked_lm_log_probs"], [-1, vocab_size]),
        "masked_lm_example_loss": tf.reshape(out["masked_lm_example_loss"], [-1]),
        "masked_lm_loss": out["masked_lm_loss"],
        "next_sentence_log_probs": out["next_sentence_log_probs"],
        "next_sentence_example_loss": out["next_sentence_example_loss"],
        "next_sentence_loss": out["next_sentence_loss"],
        "total_loss": out["total_loss"],
    }
    for name, value in log_probs_and_losses.items():
        np.testing.assert_allclose(value, golden[name], rtol=1e-5, atol=0, err_msg=name)
    padded = golden["input_input_mask"] == 0
    assert np.all(golden["attention_probs_layer_0"][np.broadcast_to(
        padded[:, None, None, :], golden["attention_probs_layer_0"].shape)] == 0)


def test_variable_paths_are_the_original_names(refs):
    model, _ = _reference_pretrainer(refs)
    listed = {}
    for line in (refs / "model/variables.txt").read_text().splitlines():
        if line.strip():
            name, shape = line.split()[0], line.split()[1]
            listed[name] = shape
    ours = {name_based.checkpoint_name(v): v for v in model.weights}
    assert set(ours) == set(listed)
    bare = BertModel(model.config)
    assert {name_based.checkpoint_name(v) for v in bare.weights} == {
        name for name in listed if name.startswith("bert/")}


def test_shapes_and_optional_inputs(tiny_config, tiny_inputs):
    model = BertModel(tiny_config)
    out = model(tiny_inputs)
    assert out["sequence_output"].shape == (3, 7, 32)
    assert out["pooled_output"].shape == (3, 32)
    assert out["embedding_output"].shape == (3, 7, 32)
    assert len(out["encoder_outputs"]) == 2 and len(out["attention_probs"]) == 2
    assert out["attention_probs"][0].shape == (3, 4, 7, 7)
    assert model.get_embedding_table().shape == (99, 32)
    ids = {"input_ids": tiny_inputs["input_ids"]}
    explicit = dict(ids, input_mask=np.ones((3, 7), "int32"),
                    token_type_ids=np.zeros((3, 7), "int32"))
    np.testing.assert_array_equal(model(ids)["sequence_output"],
                                  model(explicit)["sequence_output"])


def test_dropout_only_when_training(tiny_config, tiny_inputs):
    model = BertModel(tiny_config)
    first = model(tiny_inputs, training=False)["sequence_output"]
    np.testing.assert_array_equal(first, model(tiny_inputs)["sequence_output"])
    trained = model(tiny_inputs, training=True)["sequence_output"]
    assert np.max(np.abs(first - trained)) > 1e-3


def test_compiled_call_equals_eager(tiny_config, tiny_inputs):
    model = BertModel(tiny_config)
    compiled = tf.function(lambda x: model(x)["sequence_output"], jit_compile=True)
    np.testing.assert_allclose(compiled(tiny_inputs), model(tiny_inputs)["sequence_output"],
                               atol=1e-5)


@pytest.mark.parametrize("change, message", [
    (lambda x: dict(x, input_ids=x["input_ids"] + 98), "input_ids contains 1.*vocab_size=99"),
    (lambda x: dict(x, input_ids=-x["input_ids"]), "input_ids contains -"),
    (lambda x: dict(x, token_type_ids=x["token_type_ids"] + 2),
     "token_type_ids contains 3.*type_vocab_size=3"),
    (lambda x: {k: np.tile(v, (1, 4)) for k, v in x.items()},
     "sequence length 28 exceeds max_position_embeddings 23"),
    (lambda x: {"input_ids": x["input_ids"][0]}, "rank 2"),
    (lambda x: dict(x, input_mask=x["input_mask"][:, :5]), "input_mask must have the shape"),
    (lambda x: dict(x, segment_ids=x["token_type_ids"]), "unknown inputs.*segment_ids"),
    (lambda x: {k: v[:, :0] for k, v in x.items()}, r"shape \(3, 0\) has rows without tokens"),
])
def test_bad_inputs_raise_clear_errors(tiny_config, tiny_inputs, change, message):
    with pytest.raises(ValueError, match=message):
        BertModel(tiny_config)(change(tiny_inputs))


def test_bad_ids_fail_inside_a_graph_too(tiny_config, tiny_inputs):
    model = BertModel(tiny_config)
    signature = [{k: tf.TensorSpec([None, None], tf.int32) for k in tiny_inputs}]
    call = tf.function(lambda x: model(x)["sequence_output"], input_signature=signature)
    call(tiny_inputs)
    with pytest.raises(tf.errors.InvalidArgumentError, match="id >= vocab_size=99"):
        call(dict(tiny_inputs, input_ids=tiny_inputs["input_ids"] + 99))
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings 23"):
        call({k: np.tile(v, (1, 4)) for k, v in tiny_inputs.items()})
    # Shapes left open at tracing are compared when the graph runs, not broadcast.
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_mask must have the shape"):
        call(dict(tiny_inputs, input_mask=tiny_inputs["input_mask"][:1, :5]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="token_type_ids must have the sh"):
        call(dict(tiny_inputs, token_type_ids=tiny_inputs["token_type_ids"][:, :1]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="rows without tokens"):
        call({k: v[:, :0] for k, v in tiny_inputs.items()})


def test_an_empty_batch_gives_empty_outputs(tiny_config):
    model = BertModel(tiny_config)
    empty = {k: np.zeros([0, 0], np.int32) for k in ("input_ids", "input_mask", "token_type_ids")}
    signature = [{k: tf.TensorSpec([None, None], tf.int32) for k in empty}]
    compiled = tf.function(lambda x: model(x), input_signature=signature)
    for outputs in (model(empty), compiled(empty)):
        assert outputs["sequence_output"].shape == (0, 0, 32)
        assert outputs["pooled_output"].shape == (0, 32)


def test_keras_serialization_round_trip(tiny_config, tiny_inputs, tmp_path):
    model = BertModel(tiny_config)
    path = str(tmp_path / "bert.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.config == tiny_config
    np.testing.assert_array_equal(restored(tiny_inputs)["pooled_output"],
                                  model(tiny_inputs)["pooled_output"])


@pytest.mark.parametrize("filename", ["pretrainer.weights.h5", "pretrainer.keras"])
def test_load_weights_takes_the_encoder_of_a_pretrainer_file(tiny_config, tiny_inputs,
                                                             tmp_path, filename):
    # What convert_checkpoint.py writes for Google's checkpoints, which carry the cls/ heads.
    pretrainer = BertPretrainer(tiny_config)
    path = str(tmp_path / filename)
    pretrainer.save_weights(path) if filename.endswith(".weights.h5") else pretrainer.save(path)

    model = BertModel(tiny_config)
    model.load_weights(path)

    assert len(model.weights) == len(pretrainer.bert.weights)
    for ours, theirs in zip(model.weights, pretrainer.bert.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)
    np.testing.assert_array_equal(model(tiny_inputs)["pooled_output"],
                                  pretrainer.bert(tiny_inputs)["pooled_output"])


def test_load_weights_of_another_config_names_both_readings(tiny_config, tmp_path):
    path = str(tmp_path / "pretrainer.weights.h5")
    BertPretrainer(tiny_config).save_weights(path)
    other = BertConfig.from_dict(dict(tiny_config.to_dict(), vocab_size=98))
    with pytest.raises(ValueError, match=r"does not fit this BertModel \(2 layers, hidden_size "
                                         r"32, vocab_size 98\)[\s\S]*As the encoder \(bert\)"):
        BertModel(other).load_weights(path)


def test_mixed_bfloat16_stays_close(tiny_config, tiny_inputs):
    reference = BertModel(tiny_config)
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = BertModel(tiny_config)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    mixed.set_weights(reference.get_weights())
    assert all(v.dtype == "float32" for v in mixed.weights)
    out = mixed(tiny_inputs)["sequence_output"]
    assert out.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(out, tf.float32), reference(tiny_inputs)["sequence_output"],
                               atol=0.1)


def _causal_model(causal=True):
    return BertModel(BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=16, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, causal_attention=causal))


def _causal_inputs():
    ids = np.random.RandomState(3).randint(5, 99, size=(3, 7))
    mask = np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])
    return {"input_ids": ids, "input_mask": mask}


def test_causal_attention_sees_no_later_token():
    model = _causal_model()
    inputs = _causal_inputs()
    changed = dict(inputs, input_ids=inputs["input_ids"].copy())
    changed["input_ids"][:, 4:] = 7  # every token from position 4 on
    before, after = model(inputs), model(changed)
    np.testing.assert_array_equal(before["sequence_output"][:, :4], after["sequence_output"][:, :4])
    assert np.abs(before["sequence_output"][0, 4:] - after["sequence_output"][0, 4:]).min() > 0
    probs = before["attention_probs"][0].numpy()  # [B, N, T, T]
    assert np.all(np.triu(probs[0, 0], k=1) == 0) and np.all(probs[0, 0][np.tril_indices(7)] > 0)
    bidirectional = _causal_model(causal=False)(inputs)["attention_probs"][0].numpy()
    assert np.all(bidirectional[0, 0] > 0)


def test_causal_pooler_reads_the_last_real_token_in_every_path():
    model = _causal_model()
    inputs = _causal_inputs()
    outputs = model(inputs)
    last = outputs["sequence_output"].numpy()[[0, 1, 2], [6, 4, 2]]  # [B, H]
    np.testing.assert_allclose(outputs["pooled_output"], model.pooler(last[:, None]), atol=1e-6)
    np.testing.assert_allclose(model.pooled_output(inputs, training=True),
                               outputs["pooled_output"], atol=1e-5)
    positions = tf.constant([[0, 2], [4, 1], [2, 0]])  # the last layer at these alone
    np.testing.assert_allclose(
        model.real_token_output(inputs, positions),
        tf.gather(outputs["sequence_output"], positions, batch_dims=1), atol=1e-5)


def test_causal_attention_is_in_the_config_json_only_when_true():
    assert "causal_attention" not in _causal_model(causal=False).config.to_dict()
    config = _causal_model().config
    assert BertConfig.from_dict(config.to_dict()).causal_attention is True
    with pytest.raises(ValueError, match="causal_attention must be true or false, got 'yes'"):
        BertConfig(vocab_size=99, causal_attention="yes")
