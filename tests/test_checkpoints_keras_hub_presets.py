"""keras-hub presets both ways, through convert_checkpoint.py as a user runs it, read back with
keras-hub's own `from_preset`: on the original release's tiny reference checkpoint (its outputs
are the specification) and on the real all-MiniLM-L6-v2."""
import json

import keras_hub  # the keras-hub extra, which the test command installs
import numpy as np
import pytest
import tensorflow as tf

from conftest import HF_GOLDEN, REFS
from modeling import BertConfig, BertModel
from modeling.checkpoints import huggingface, name_based
from modeling.encoder.layers import gelu
from modeling.text.tokenization import FullTokenizer
from scripts import run_script

NEXT_SENTENCE = ["cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The reference checkpoint to a preset and back, by the script; (refs, preset, back, logs)."""
    if not REFS.exists():
        pytest.skip(f"{REFS} is absent: the reference data lives in ../shared beside the project")
    root = tmp_path_factory.mktemp("reference")
    model = root / "model"
    model.mkdir()
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001",
                 "bert_config.json"):
        (model / name).write_bytes((REFS / "model" / name).read_bytes())
    (model / "vocab.txt").write_bytes((REFS / "vocab/uncased_vocab.txt").read_bytes())
    to_preset = run_script("convert_checkpoint.py", f"--input={model / 'bert_model.ckpt'}",
                           "--to_keras_hub", "--max_seq_length=16", f"--output={root / 'preset'}")
    back = root / "back" / "bert_model.ckpt"
    from_preset = run_script("convert_checkpoint.py", f"--input={root / 'preset'}",
                             f"--output={back}")
    return REFS, root / "preset", back, to_preset.stderr + from_preset.stderr


def _reference_inputs(refs):
    outputs = dict(np.load(refs / "model/outputs.npz"))
    inputs = {"token_ids": outputs["input_input_ids"], "segment_ids": outputs["input_segment_ids"],
              "padding_mask": outputs["input_input_mask"]}
    return inputs, outputs


def test_reference_checkpoint_to_a_preset_and_back_is_bit_identical(reference, tmp_path):
    refs, preset, back, logs = reference
    assert sorted(path.name for path in preset.iterdir()) == [
        "assets", "config.json", "metadata.json", "model.weights.h5", "preprocessor.json",
        "task.json", "task.weights.h5", "tokenizer.json"]
    assert "BertMaskedLM preset" in logs and "skipped: " + ", ".join(NEXT_SENTENCE) in logs
    # keras-hub's BERT has no next-sentence head: everything else comes back, byte for byte,
    # as the original Saver writes it.
    original = tf.train.load_checkpoint(str(refs / "model/bert_model.ckpt"))
    kept = sorted(set(original.get_variable_to_shape_map()) - set(NEXT_SENTENCE))
    expected = tmp_path / "expected.ckpt"
    name_based.write_tensors({name: original.get_tensor(name) for name in kept}, str(expected))
    for suffix in (".index", ".data-00000-of-00001"):
        assert back.with_name(back.name + suffix).read_bytes() == \
            expected.with_name(expected.name + suffix).read_bytes()
    assert BertConfig.from_json_file(back.parent / "bert_config.json") == \
        BertConfig.from_json_file(refs / "model/bert_config.json")
    assert (back.parent / "vocab.txt").read_bytes() == \
        (refs / "vocab/uncased_vocab.txt").read_bytes()
    assert "--do_lower_case=True" in logs


def test_backbone_from_preset_gives_the_originals_outputs(reference):
    refs, preset, _, _ = reference
    inputs, outputs = _reference_inputs(refs)
    result = keras_hub.models.BertBackbone.from_preset(str(preset))(inputs)
    # Every position, padded ones included.
    np.testing.assert_allclose(result["sequence_output"], outputs["sequence_output"], atol=1e-5,
                               rtol=0)
    np.testing.assert_allclose(result["pooled_output"], outputs["pooled_output"], atol=1e-5,
                               rtol=0)


def test_masked_lm_logits_are_the_originals_but_for_keras_hubs_fixed_head(reference):
    refs, preset, _, logs = reference
    inputs, outputs = _reference_inputs(refs)
    masked_lm = keras_hub.models.MaskedLM.from_preset(str(preset))
    assert masked_lm.preprocessor.sequence_length == 16
    inputs["mask_positions"] = outputs["input_masked_lm_positions"]
    expected = outputs["masked_lm_log_probs"].reshape(3, 4, -1)

    def log_probs():
        return tf.nn.log_softmax(masked_lm(inputs)).numpy()

    # keras-hub's head computes the exact GELU and LayerNorm epsilon 1e-5; the converter says so.
    difference = np.max(np.abs(log_probs() - expected))
    assert 1e-5 < difference < 1e-3
    assert "its log-probabilities differ from this model's by up to" in logs
    # Given the original's activation and epsilon, the copied weights give its numbers.
    head = masked_lm.masked_lm_head
    head._intermediate_dense.activation = gelu
    head._intermediate_layer_norm.epsilon = 1e-12
    np.testing.assert_allclose(log_probs(), expected, rtol=1e-5, atol=0)


def test_preset_tokenizer_gives_the_original_ids_but_where_keras_hub_splits_otherwise(reference):
    """keras-hub's BertTokenizer case-folds with NFKC (ß -> ss, ² -> 2), knows other whitespace
    and control characters than the original's, and makes [UNK] of a word over 100 bytes (the
    original: over 200 characters): on a line with such a character or word the ids may differ.
    Every other line of the reference corpus must give the original's ids."""
    refs, preset, _, _ = reference
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(preset))
    rows = [json.loads(line) for line in
            (refs / "tokenization/uncased_lowerTrue.jsonl").read_text("utf-8").splitlines()]
    original = FullTokenizer(str(refs / "vocab/uncased_vocab.txt"), do_lower_case=True)
    chars = sorted({char for row in rows for char in row["text"]})
    probes = [f"a{char}b {char}" for char in chars]
    ids = tokenizer(probes)
    differing = {char for char, probe, got in zip(chars, probes, ids)
                 if list(got) != original.convert_tokens_to_ids(original.tokenize(probe))}
    plain = [row for row in rows if not differing & set(row["text"])
             and max(map(len, row["text"].encode("utf-8").split()), default=0) <= 100]
    assert len(plain) > 300 and not differing & set("abcdefghijklmnopqrstuvwxyz0123456789 .,;'")
    got = tokenizer([row["text"] for row in plain])
    assert [list(row) for row in got] == [row["ids"] for row in plain]


# ----------------------------------------------------------------------------------------------
# The real all-MiniLM-L6-v2, trained with the exact GELU that keras-hub does not compute.

def test_minilm_is_refused_without_the_flag_in_one_line(minilm, tmp_path):
    process = run_script("convert_checkpoint.py", f"--input={minilm}", "--to_keras_hub",
                         f"--output={tmp_path / 'preset'}", check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "convert_checkpoint.py: error: keras-hub's BertBackbone cannot represent hidden_act "
        "'gelu_exact' (it computes the tanh 'gelu'); pass --keras_hub_approximate to convert "
        "it anyway, with a warning of the measured difference"]
    assert not (tmp_path / "preset").exists()


@pytest.fixture(scope="module")
def minilm_preset(minilm, tmp_path_factory):
    root = tmp_path_factory.mktemp("minilm")
    process = run_script("convert_checkpoint.py", f"--input={minilm}", "--to_keras_hub",
                         "--keras_hub_approximate", "--max_seq_length=64",
                         f"--output={root / 'preset'}")
    return root / "preset", process.stderr


def test_minilm_preset_computes_the_tanh_gelu_model_and_says_how_far_that_is(minilm,
                                                                             minilm_preset,
                                                                             tmp_path):
    preset, logs = minilm_preset
    golden = dict(np.load(HF_GOLDEN / "minilm.npz"))
    real = golden["input_mask"].astype(bool)
    backbone = keras_hub.models.BertBackbone.from_preset(str(preset))
    outputs = backbone({"token_ids": golden["input_ids"], "segment_ids": golden["token_type_ids"],
                        "padding_mask": golden["input_mask"]})
    # Our BertModel on the same weights with the tanh GELU: what keras-hub computes.
    huggingface.hf_to_original(minilm, str(tmp_path / "bert_model.ckpt"), gelu="approximate")
    ours = BertModel(BertConfig.from_json_file(tmp_path / "bert_config.json"))
    name_based.load_original(ours, str(tmp_path / "bert_model.ckpt"))
    expected = ours({"input_ids": golden["input_ids"], "input_mask": golden["input_mask"],
                     "token_type_ids": golden["token_type_ids"]})
    # At the real tokens: a padded position's output is no model's answer, and keras-hub masks
    # there otherwise (measured: 1.8e-5 apart there, 2e-6 at the real tokens).
    np.testing.assert_allclose(outputs["sequence_output"].numpy()[real],
                               expected["sequence_output"].numpy()[real], atol=1e-5, rtol=0)
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=1e-5,
                               rtol=0)
    # The model's own numbers (transformers', exact GELU) are as far as the warning says.
    stated = float(logs.split("differ from this model's by up to ")[1].split(" ")[0])
    actual = np.max(np.abs(outputs["sequence_output"].numpy()[real] - golden["hidden_states"][-1]))
    assert 1e-3 < actual < 3 * stated and 1e-3 < stated


def test_text_classifier_from_the_minilm_preset_predicts_at_its_sequence_length(minilm_preset):
    preset, _ = minilm_preset
    classifier = keras_hub.models.TextClassifier.from_preset(str(preset), num_classes=3)
    assert classifier.preprocessor.sequence_length == 64
    long_text = " ".join(["the keeper climbed the winding stairs once more"] * 20)
    logits = classifier.predict(["the lamp was lit at dusk", long_text], verbose=0)
    assert logits.shape == (2, 3) and np.all(np.isfinite(logits))


def test_a_preset_of_another_model_is_one_line(minilm_preset, tmp_path):
    preset, _ = minilm_preset
    other = tmp_path / "other"
    other.mkdir()
    config = json.loads((preset / "config.json").read_text())
    config["class_name"] = "RobertaBackbone"
    (other / "config.json").write_text(json.dumps(config))
    process = run_script("convert_checkpoint.py", f"--input={other}",
                         f"--output={tmp_path / 'out/bert_model.ckpt'}", check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        f"convert_checkpoint.py: error: {other / 'config.json'}: a RobertaBackbone preset; only "
        f"keras-hub's BertBackbone converts"]


def test_without_the_extra_a_conversion_is_one_line(tmp_path):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "keras_hub.py").write_text("raise ImportError('No module named keras_hub')\n")
    process = run_script("convert_checkpoint.py", f"--input={tmp_path / 'nothing.ckpt'}",
                         "--to_keras_hub", f"--output={tmp_path / 'preset'}", check=False,
                         PYTHONPATH=str(shadow))
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "convert_checkpoint.py: error: keras-hub presets need the keras-hub extra, which is not "
        "installed: pip install -e \".[keras-hub]\""]


# ----------------------------------------------------------------------------------------------
# Fine-tuned in keras-hub -> convert_checkpoint.py -> run_classifier.py and its export, served
# as TF Serving loads it.

PLAIN_ROWS = [  # invented; plain text, which both tokenizers split alike
    ("the keeper lit the lamp at dusk", "the lamp was lit by the keeper"),
    ("the boat left the harbour early", "the market closed before noon"),
    ("a storm broke the old mast", ""),
]


def test_a_classifier_fine_tuned_in_keras_hub_predicts_and_serves_through_our_scripts(tmp_path):
    from serving import serve
    from test_run_classifier import SEQ, read_test_results, write_mrpc
    vocab = REFS / "vocab/uncased_vocab.txt"
    if not vocab.exists():
        pytest.skip(f"{REFS} is absent: the reference data lives in ../shared beside the project")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=str(vocab), lowercase=True,
                                               strip_accents=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=24, max_sequence_length=64)
    classifier = keras_hub.models.BertTextClassifier(
        backbone, num_classes=2, preprocessor=keras_hub.models.BertTextClassifierPreprocessor(
            tokenizer, sequence_length=SEQ))
    first, second = ["the river rose", "a storm came"] * 2, ["the water was high", "fish"] * 2
    classifier.fit(x=(first, second), y=np.array([1, 0, 1, 0]), batch_size=4, epochs=1,
                   verbose=0)
    classifier.save_to_preset(str(tmp_path / "preset"))
    expected = tf.nn.softmax(classifier.predict(
        ([a for a, _ in PLAIN_ROWS], [b for _, b in PLAIN_ROWS]), verbose=0)).numpy()

    ckpt = tmp_path / "converted/bert_model.ckpt"
    process = run_script("convert_checkpoint.py", f"--input={tmp_path / 'preset'}",
                         f"--output={ckpt}")
    assert "BertTextClassifier" in process.stderr
    data = write_mrpc(tmp_path / "data")
    (data / "test.tsv").write_text("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
        f"{i}\t{i}\t{i + 1}\t{a}\t{b}\n" for i, (a, b) in enumerate(PLAIN_ROWS)), "utf-8")
    run_script("run_classifier.py", "--task_name=MRPC", f"--data_dir={data}",
               f"--bert_config_file={ckpt.parent / 'bert_config.json'}",
               f"--vocab_file={ckpt.parent / 'vocab.txt'}", f"--init_checkpoint={ckpt}",
               f"--output_dir={tmp_path / 'out'}", f"--max_seq_length={SEQ}", "--do_predict",
               f"--export_dir={tmp_path / 'serving'}")
    np.testing.assert_allclose(read_test_results(tmp_path / "out/test_results.tsv"), expected,
                               atol=1e-5, rtol=0)
    version = next(path for path in (tmp_path / "serving").iterdir() if path.name.isdigit())
    [served] = serve(version, [("serving_default", {"text_a": [a for a, _ in PLAIN_ROWS],
                                                    "text_b": [b for _, b in PLAIN_ROWS]})])
    for loader in ("session", "object_loader"):
        np.testing.assert_allclose(served[loader]["probabilities"], expected, atol=1e-5, rtol=0)


def test_a_left_to_right_model_is_refused_in_one_line(tmp_path):
    from modeling.checkpoints import keras_hub_presets
    config = BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, causal_attention=True)
    with pytest.raises(ValueError, match=r"^a left-to-right model \(causal_attention"):
        keras_hub_presets.original_to_preset(str(tmp_path / "bert_model.ckpt"),
                                             str(tmp_path / "preset"), config, "vocab.txt")
    assert not (tmp_path / "preset").exists()
