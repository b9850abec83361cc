import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from safetensors import safe_open
from safetensors.numpy import save_file

from conftest import HF_GOLDEN
from modeling import BertConfig, BertModel, BertPretrainer
from modeling.checkpoints import name_based
from modeling.checkpoints import huggingface
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
    name_based.save_original(BertModel(tiny_config), str(tmp_path / "enc.ckpt"))
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


# ----------------------------------------------------------------------------------------------
# Hugging Face folders, on the real pre-trained MiniLM (sentence-transformers/all-MiniLM-L6-v2)
# against transformers' activations (tests/golden/hf_bert, made by tools/make_hf_golden.py).

def _golden_minilm():
    golden = dict(np.load(HF_GOLDEN / "minilm.npz"))
    real = golden["input_mask"].astype(bool)
    # Row offsets of each sentence's tokens in the golden's [tokens, H] arrays.
    golden["starts"] = np.concatenate([[0], np.cumsum(real.sum(1))])
    return golden, real


def _safetensors(path):
    with safe_open(str(path), "np") as reader:
        return {name: reader.get_tensor(name) for name in reader.keys()}


@pytest.fixture(scope="module")
def converted_minilm(minilm, tmp_path_factory):
    """MiniLM converted by the script, as a user converts it: the checkpoint prefix."""
    ckpt = tmp_path_factory.mktemp("minilm") / "bert_model.ckpt"
    run_script("convert_checkpoint.py", f"--input={minilm}", f"--output={ckpt}")
    return ckpt


def _minilm_outputs(ckpt):
    golden, _ = _golden_minilm()
    config = BertConfig.from_json_file(ckpt.parent / "bert_config.json")
    model = BertModel(config)
    assert name_based.load_original(model, str(ckpt)).unused == []
    outputs = model({name: golden[name] for name in ("input_ids", "input_mask",
                                                     "token_type_ids")})
    return config, [outputs["embedding_output"]] + outputs["encoder_outputs"], outputs


def test_converted_minilm_gives_transformers_activations_at_every_layer(converted_minilm):
    config, layers, outputs = _minilm_outputs(converted_minilm)
    assert config.hidden_act == "gelu_exact" and config.extra["architectures"] == ["BertModel"]
    golden, real = _golden_minilm()
    assert len(layers) == len(golden["hidden_states"]) == 7
    for index, (ours, theirs) in enumerate(zip(layers, golden["hidden_states"])):
        np.testing.assert_allclose(ours.numpy()[real], theirs, atol=1e-5, rtol=0,
                                   err_msg=f"layer {index}")
    np.testing.assert_allclose(outputs["pooled_output"], golden["pooled_output"], atol=1e-5,
                               rtol=0)


def test_approximate_gelu_writes_the_originals_and_costs_accuracy(minilm, converted_minilm,
                                                                  tmp_path):
    # In-process: the flag passes its value straight to this call.
    ckpt = tmp_path / "bert_model.ckpt"
    huggingface.hf_to_original(minilm, str(ckpt), gelu="approximate")
    # The same weights, byte for byte; only the config's activation differs.
    assert (tmp_path / "bert_model.ckpt.data-00000-of-00001").read_bytes() == \
        converted_minilm.with_name("bert_model.ckpt.data-00000-of-00001").read_bytes()
    config, layers, _ = _minilm_outputs(ckpt)
    assert config.hidden_act == "gelu"
    golden, real = _golden_minilm()
    last = np.max(np.abs(layers[-1].numpy()[real] - golden["hidden_states"][-1]))
    assert 1e-3 < last < 1e-2  # 3.1e-3 measured (docs/checkpoints.md)


def test_minilm_round_trips_bit_identical(minilm, converted_minilm, tmp_path):
    run_script("convert_checkpoint.py", f"--input={converted_minilm}",
               f"--output={tmp_path / 'hf'}")
    source, back = _safetensors(minilm / "model.safetensors"), \
        _safetensors(tmp_path / "hf/model.safetensors")
    # position_ids is a buffer transformers rebuilds, not a weight.
    assert back.keys() == source.keys() - {"embeddings.position_ids"}
    for name, value in back.items():
        assert value.dtype == source[name].dtype and value.tobytes() == source[name].tobytes()
    written = json.loads((tmp_path / "hf/config.json").read_text())
    original = json.loads((minilm / "config.json").read_text())
    assert written["hidden_act"] == "gelu" and written["architectures"] == ["BertModel"]
    assert written == {key: original[key] for key in written}
    assert (tmp_path / "hf/vocab.txt").read_bytes() == (minilm / "vocab.txt").read_bytes()
    assert json.loads((tmp_path / "hf/tokenizer_config.json").read_text())["do_lower_case"]

    run_script("convert_checkpoint.py", f"--input={tmp_path / 'hf'}",
               f"--output={tmp_path / 'again/bert_model.ckpt'}")
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / f"again/bert_model.ckpt{suffix}").read_bytes() == \
            converted_minilm.with_name(f"bert_model.ckpt{suffix}").read_bytes()
    assert (tmp_path / "again/bert_config.json").read_bytes() == \
        converted_minilm.with_name("bert_config.json").read_bytes()


def test_extract_features_on_converted_minilm(converted_minilm, tmp_path):
    (tmp_path / "input.txt").write_text("The keeper lit the lamp at dusk.\n"
                                        "Zürich's café opened early.\n")
    directory = converted_minilm.parent
    run_script("extract_features.py", f"--input_file={tmp_path / 'input.txt'}",
               f"--output_file={tmp_path / 'features.jsonl'}",
               f"--vocab_file={directory / 'vocab.txt'}",
               f"--bert_config_file={directory / 'bert_config.json'}",
               f"--init_checkpoint={converted_minilm}", "--layers=-1,-6",
               "--max_seq_length=16", "--batch_size=2")
    golden, _ = _golden_minilm()
    lines = (tmp_path / "features.jsonl").read_text().splitlines()
    for line, sentence in zip(lines, (0, 2)):
        record = json.loads(line)
        start, end = golden["starts"][sentence], golden["starts"][sentence + 1]
        assert len(record["features"]) == end - start
        assert record["features"][0]["token"] == "[CLS]"
        for layer, golden_layer in ((0, 6), (1, 1)):  # --layers=-1,-6: layers 6 and 1
            values = np.array([feature["layers"][layer]["values"]
                               for feature in record["features"]])
            np.testing.assert_allclose(values, golden["hidden_states"][golden_layer][start:end],
                                       atol=1e-5, rtol=0)


def test_run_classifier_predicts_a_converted_classifier_as_transformers(minilm, tmp_path):
    """A BertForSequenceClassification folder (MiniLM and a classifier) predicted directly:
    the probabilities are softmax(classifier(transformers' pooled output))."""
    rng = np.random.default_rng(5)
    tensors = {f"bert.{name}": value
               for name, value in _safetensors(minilm / "model.safetensors").items()}
    weight = rng.standard_normal((2, 384)).astype(np.float32)
    bias = np.array([0.3, -0.2], np.float32)
    tensors.update({"classifier.weight": weight, "classifier.bias": bias})
    hf = tmp_path / "hf"
    hf.mkdir()
    save_file(tensors, hf / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((minilm / "config.json").read_text())
    config.update(architectures=["BertForSequenceClassification"],
                  id2label={"0": "unacceptable", "1": "acceptable"})
    (hf / "config.json").write_text(json.dumps(config))
    (hf / "vocab.txt").write_bytes((minilm / "vocab.txt").read_bytes())
    run_script("convert_checkpoint.py", f"--input={hf}",
               f"--output={tmp_path / 'model/bert_model.ckpt'}")
    (tmp_path / "data").mkdir()
    (tmp_path / "data/test.tsv").write_text("index\tsentence\n"
                                            "0\tThe keeper lit the lamp at dusk.\n"
                                            "1\tZürich's café opened early.\n")
    model = tmp_path / "model"
    run_script("run_classifier.py", "--task_name=cola", "--do_predict=true",
               f"--data_dir={tmp_path / 'data'}", f"--vocab_file={model / 'vocab.txt'}",
               f"--bert_config_file={model / 'bert_config.json'}",
               f"--init_checkpoint={model / 'bert_model.ckpt'}", "--max_seq_length=16",
               "--predict_batch_size=2", f"--output_dir={tmp_path / 'output'}")
    golden, _ = _golden_minilm()
    logits = golden["pooled_output"][[0, 2]] @ weight.T + bias
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    predicted = np.loadtxt(tmp_path / "output/test_results.tsv", delimiter="\t")
    np.testing.assert_allclose(predicted, expected, atol=1e-5, rtol=0)


def _bad_hf_folder(tmp_path, case):
    """A folder of each kind of bad input; returns (the --input, the words of the error). The
    other refusals are tested on the library (test_hf_config.py, test_hf_checkpoint.py)."""
    folder = tmp_path / case
    folder.mkdir()
    if case == "no_config":
        return folder, [f"{folder / 'config.json'}: not found"]
    config = {"model_type": "bert", "vocab_size": 99, "hidden_size": 32,
              "num_attention_heads": 4}
    if case == "roberta":
        config["model_type"] = "roberta"
        words = ["config.json: model_type 'roberta' is not BERT"]
    elif case == "bin_without_torch":
        (folder / "pytorch_model.bin").write_bytes(b"not read")
        words = [f"{folder / 'pytorch_model.bin'}: reading pytorch_model.bin needs PyTorch"]
    (folder / "config.json").write_text(json.dumps(config))
    return folder, words


@pytest.mark.parametrize("case", ["no_config", "roberta", "bin_without_torch"])
def test_bad_hugging_face_input_is_one_line_and_status_2(case, tmp_path):
    folder, words = _bad_hf_folder(tmp_path, case)
    # PyTorch made unimportable, as on a machine without it.
    no_torch = tmp_path / "no_torch" / "torch"
    no_torch.mkdir(parents=True)
    (no_torch / "__init__.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
    process = run_script("convert_checkpoint.py", f"--input={folder}",
                         f"--output={tmp_path / 'out/bert_model.ckpt'}", check=False,
                         PYTHONPATH=str(no_torch.parent))
    assert process.returncode == 2
    errors = [line for line in process.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in process.stderr, process.stderr
    for word in words:
        assert word in errors[0]
    assert not (tmp_path / "out").exists()
