"""modeling/checkpoints/keras_files.py: original checkpoints to Keras files and back."""
import os

import numpy as np
import pytest
import tensorflow as tf

from modeling import BertModel, BertPretrainer
from modeling.checkpoints import keras_files, name_based


def _tensors(ckpt_path):
    reader = tf.train.load_checkpoint(str(ckpt_path))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.parametrize("model_class, suffix", [(BertPretrainer, ".weights.h5"),
                                                 (BertModel, ".keras")])
def test_the_checkpoints_model_round_trips(tmp_path, tiny_config, model_class, suffix):
    source = str(tmp_path / "in/model.ckpt")
    name_based.save_original(model_class(tiny_config), source)
    assert isinstance(keras_files.model_for_checkpoint(tiny_config, source), model_class)
    output = str(tmp_path / "out" / f"model{suffix}")
    result = keras_files.to_keras_file(tiny_config, source, output)
    assert result.unused == [] and os.listdir(tmp_path / "out") == [f"model{suffix}"]
    back = str(tmp_path / "back/model.ckpt")
    assert isinstance(keras_files.from_keras_file(output, back, tiny_config), model_class)
    expected, written = _tensors(source), _tensors(back)
    assert expected.keys() == written.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)


def test_bad_file_names_are_refused(tmp_path, tiny_config):
    source = str(tmp_path / "model.ckpt")
    name_based.save_original(BertModel(tiny_config), source)
    with pytest.raises(ValueError, match="must end in .keras or .weights.h5"):
        keras_files.to_keras_file(tiny_config, source, str(tmp_path / "model.h5"))
    with pytest.raises(ValueError, match="expected a .keras or .weights.h5 file"):
        keras_files.from_keras_file(str(tmp_path / "model.h5"), source)
    with pytest.raises(ValueError, match="needs --bert_config_file"):
        keras_files.from_keras_file(str(tmp_path / "model.weights.h5"), source)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model.ckpt.data-00000-of-00001",
                                            "model.ckpt.index"]
