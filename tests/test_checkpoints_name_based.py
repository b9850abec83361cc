import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertModel, BertPretrainer
from modeling.checkpoints import name_based


def _tensors(ckpt_path):
    reader = tf.train.load_checkpoint(str(ckpt_path))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_bare_model_reports_the_head_tensors_as_unused(refs):
    config = BertConfig.from_json_file(refs / "model/bert_config.json")
    result = name_based.load_original(BertModel(config), str(refs / "model/bert_model.ckpt"))
    assert len(result.loaded) == 39 and result.skipped == []
    assert result.unused == sorted(
        ["cls/predictions/output_bias", "cls/predictions/transform/dense/kernel",
         "cls/predictions/transform/dense/bias", "cls/predictions/transform/LayerNorm/beta",
         "cls/predictions/transform/LayerNorm/gamma", "cls/seq_relationship/output_weights",
         "cls/seq_relationship/output_bias"])


def test_load_save_round_trip_is_bit_identical(refs, tmp_path):
    source = refs / "model/bert_model.ckpt"
    model = BertPretrainer(BertConfig.from_json_file(refs / "model/bert_config.json"))
    name_based.load_original(model, str(source))
    target = tmp_path / "out" / "bert_model.ckpt"
    name_based.save_original(model, str(target))
    expected, written = _tensors(source), _tensors(target)
    assert expected.keys() == written.keys()
    for name, value in expected.items():
        assert written[name].dtype == value.dtype and written[name].shape == value.shape
        assert written[name].tobytes() == value.tobytes(), name
    for suffix in (".index", ".data-00000-of-00001"):  # the original Saver's very bytes
        assert (tmp_path / "out" / f"bert_model.ckpt{suffix}").read_bytes() == \
            (refs / f"model/bert_model.ckpt{suffix}").read_bytes()
    assert tf.train.latest_checkpoint(str(tmp_path / "out")) == str(target)
    assert not list((tmp_path / "out").glob("*tmp*"))


def test_real_tf1_training_checkpoint_skips_optimizer_state(data):
    ckpt_dir = data / "checkpoints/keras_bert_tiny_pretrain_ckpt"
    model = BertPretrainer(BertConfig.from_json_file(ckpt_dir / "bert_config.json"))
    result = name_based.load_original(model, str(ckpt_dir))  # a directory works too
    assert len(result.loaded) == 46 and result.unused == []
    assert "global_step" in result.skipped and len(result.skipped) == 1 + 2 * 46
    assert all(name.endswith(("adam_m", "adam_v", "global_step")) for name in result.skipped)
    reader = tf.train.load_checkpoint(str(ckpt_dir / "bert_model.ckpt"))
    np.testing.assert_array_equal(model.bert.get_embedding_table().numpy(),
                                  reader.get_tensor("bert/embeddings/word_embeddings"))


def test_names_and_shapes_equal_googles_bert_base_release(data):
    ckpt_dir = data / "checkpoints/chinese_L-12_H-768_A-12_index_only"
    released = dict(tf.train.list_variables(str(ckpt_dir / "bert_model.ckpt")))
    model = BertPretrainer(BertConfig.from_json_file(ckpt_dir / "bert_config.json"))
    ours = {name_based.checkpoint_name(v): list(v.shape) for v in model.weights}
    assert ours == released
    assert len(ours) == 206


def test_shape_mismatch_lists_names_and_both_shapes(refs, tiny_config):
    config = BertConfig.from_json_file(refs / "model/bert_config.json").to_dict()
    config["intermediate_size"] = 256
    with pytest.raises(ValueError) as error:
        name_based.load_original(BertModel(BertConfig.from_dict(config)),
                                 str(refs / "model/bert_model.ckpt"))
    message = str(error.value)
    assert "bert/encoder/layer_0/intermediate/dense/kernel: model (128, 256) vs checkpoint " \
           "(128, 512)" in message
    assert "bert/encoder/layer_1/output/dense/kernel" in message


def test_missing_variables_are_listed(tmp_path, tiny_config):
    one_layer = BertConfig.from_dict(dict(tiny_config.to_dict(), num_hidden_layers=1))
    name_based.save_original(BertModel(one_layer), str(tmp_path / "small.ckpt"))
    with pytest.raises(ValueError, match="missing from checkpoint: bert/encoder/layer_1/"):
        name_based.load_original(BertModel(tiny_config), str(tmp_path / "small.ckpt"))
    with pytest.raises(ValueError, match="not found"):
        name_based.load_original(BertModel(tiny_config), str(tmp_path / "nothing.ckpt"))


def test_classifier_checkpoint_loads_into_a_bare_model(tmp_path, tiny_config, tiny_inputs):
    source = BertModel(tiny_config)
    names = [name_based.checkpoint_name(v) for v in source.weights]
    tensors = [v.value for v in source.weights]
    extras = {"output_weights": tf.ones([3, 32]), "output_bias": tf.zeros([3]),
              "output_weights/adam_m": tf.ones([3, 32]), "global_step": tf.constant(7, tf.int64)}
    tf.raw_ops.SaveV2(prefix=str(tmp_path / "model.ckpt"), tensor_names=names + list(extras),
                      shape_and_slices=[""] * (len(names) + len(extras)),
                      tensors=tensors + list(extras.values()))
    target = BertModel(tiny_config)
    result = name_based.load_original(target, str(tmp_path / "model.ckpt"))
    assert result.unused == ["output_bias", "output_weights"]
    assert result.skipped == ["global_step", "output_weights/adam_m"]
    np.testing.assert_array_equal(target(tiny_inputs)["sequence_output"],
                                  source(tiny_inputs)["sequence_output"])


def test_works_for_a_model_that_contains_a_bert_model(tmp_path, tiny_config, tiny_inputs):
    class Wrapper(keras.Model):
        def __init__(self):
            super().__init__(name="wrapper")
            self.encoder = BertModel(tiny_config)

        def call(self, inputs):
            return self.encoder(inputs)["pooled_output"]

    source, target = Wrapper(), Wrapper()
    name_based.save_original(source, str(tmp_path / "w.ckpt"), global_step=12)
    result = name_based.load_original(target, str(tmp_path / "w.ckpt"))
    assert result.skipped == ["global_step"]
    assert tf.train.load_checkpoint(str(tmp_path / "w.ckpt")).get_tensor("global_step") == 12
    np.testing.assert_array_equal(target(tiny_inputs), source(tiny_inputs))


def test_an_interrupted_overwrite_leaves_no_index_beside_other_data(tmp_path, tiny_config,
                                                                   monkeypatch):
    """The index goes before the data is replaced and comes back last: a run killed between
    leaves a checkpoint that is not found, never an old index that misreads new data."""
    import os
    from modeling.runtime import files
    path = str(tmp_path / "model.ckpt")
    name_based.save_original(BertModel(tiny_config), path, global_step=1)
    replace = files.replace

    def killed_at_the_index(source, target):
        if target.endswith(".index"):
            raise KeyboardInterrupt
        replace(source, target)
    monkeypatch.setattr(files, "replace", killed_at_the_index)
    with pytest.raises(KeyboardInterrupt):
        name_based.save_original(BertModel(tiny_config), path, global_step=2)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model.ckpt.data-00000-of-00001"]
    with pytest.raises(ValueError, match="No single checkpoint"):
        name_based.resolve_checkpoint(str(tmp_path))
    monkeypatch.setattr(files, "replace", replace)
    name_based.save_original(BertModel(tiny_config), path, global_step=3)
    assert tf.train.load_checkpoint(name_based.resolve_checkpoint(str(tmp_path))).get_tensor(
        "global_step") == 3
