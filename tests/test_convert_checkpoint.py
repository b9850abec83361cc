import keras
import numpy as np
import tensorflow as tf

from modeling import BertModel, BertPretrainer, checkpoint
from scripts import run_script


def test_original_to_keras_and_back_is_byte_identical(refs, tmp_path):
    model_dir = refs / "model"
    config = f"--bert_config_file={model_dir / 'bert_config.json'}"
    for keras_file in ("bert.keras", "bert.weights.h5"):
        run_script("convert_checkpoint.py", config, f"--input={model_dir / 'bert_model.ckpt'}",
                   f"--output={tmp_path / keras_file}")
        back = tmp_path / keras_file.split(".")[1] / "bert_model.ckpt"
        run_script("convert_checkpoint.py", config, f"--input={tmp_path / keras_file}",
                   f"--output={back}")
        for suffix in (".index", ".data-00000-of-00001"):
            assert back.with_name(back.name + suffix).read_bytes() == \
                (model_dir / f"bert_model.ckpt{suffix}").read_bytes()
    loaded = keras.saving.load_model(tmp_path / "bert.keras")
    assert isinstance(loaded, BertPretrainer)
    reader = tf.train.load_checkpoint(str(model_dir / "bert_model.ckpt"))
    np.testing.assert_array_equal(loaded.next_sentence.output_weights.numpy(),
                                  reader.get_tensor("cls/seq_relationship/output_weights"))


def test_bare_encoder_checkpoint_becomes_a_bert_model(tmp_path, tiny_config):
    checkpoint.save_original(BertModel(tiny_config), str(tmp_path / "enc.ckpt"))
    (tmp_path / "config.json").write_text(tiny_config.to_json_string())
    run_script("convert_checkpoint.py", f"--bert_config_file={tmp_path / 'config.json'}",
               f"--input={tmp_path / 'enc.ckpt'}", f"--output={tmp_path / 'enc.weights.h5'}")
    model = BertModel(tiny_config)
    model.load_weights(tmp_path / "enc.weights.h5")
    reader = tf.train.load_checkpoint(str(tmp_path / "enc.ckpt"))
    np.testing.assert_array_equal(model.pooler.dense.kernel.numpy(),
                                  reader.get_tensor("bert/pooler/dense/kernel"))


def test_mismatched_config_is_a_one_line_error(refs, tmp_path, tiny_config):
    (tmp_path / "config.json").write_text(tiny_config.to_json_string())
    process = run_script("convert_checkpoint.py", f"--bert_config_file={tmp_path / 'config.json'}",
                         f"--input={refs / 'model/bert_model.ckpt'}",
                         f"--output={tmp_path / 'x.keras'}", check=False)
    assert process.returncode == 2
    assert "does not fit model" in process.stderr
    assert "bert/embeddings/word_embeddings: model (99, 32) vs checkpoint (30522, 128)" in \
        process.stderr
    assert not (tmp_path / "x.keras").exists()
