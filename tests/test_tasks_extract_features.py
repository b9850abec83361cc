"""modeling/tasks/extract_features.py: the encoder's layers as features, as the original's
extract_features.py writes them (the script end to end, and its pieces)."""
import json
import re

import numpy as np
import pytest

from modeling import BertConfig, BertModel
from modeling.checkpoints import name_based
from modeling.data import text
from modeling.tasks import extract_features
from modeling.text import tokenization
from scripts import run_script


def test_script_writes_the_original_schema_and_the_models_numbers(refs, tmp_path):
    model_dir, vocab = refs / "model", refs / "vocab/uncased_vocab.txt"
    input_file = tmp_path / "input.txt"
    input_file.write_text("The keeper lit the lamp. ||| Ships passed safely.\n"
                          "Überraschung! Ça va?\n"
                          + "a very long line " * 10 + "\n")
    output_file = tmp_path / "out.jsonl"
    process = run_script("extract_features.py", f"--input_file={input_file}",
               f"--output_file={output_file}", f"--vocab_file={vocab}",
               f"--bert_config_file={model_dir / 'bert_config.json'}",
               f"--init_checkpoint={model_dir / 'bert_model.ckpt'}",
               "--layers=-1,-2", "--max_seq_length=16", "--batch_size=2",
               "--progress_seconds=1e-9")
    assert re.findall(r"\] extract_features: (\d+)/3 examples", process.stderr) == ["1", "2", "3"]
    assert re.search(r"\] extract_features: 3 examples in \d+:\d\d", process.stderr)
    records = [json.loads(line) for line in output_file.read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2]
    assert list(records[0]) == ["linex_index", "features"]
    assert list(records[0]["features"][0]) == ["token", "layers"]

    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    examples = text.read_examples(str(input_file))
    features = text.convert_examples_to_features(examples, 16, tokenizer)
    model = BertModel(BertConfig.from_json_file(model_dir / "bert_config.json"))
    name_based.load_original(model, str(model_dir / "bert_model.ckpt"))
    outputs = model({"input_ids": np.array([f.input_ids for f in features]),
                     "input_mask": np.array([f.input_mask for f in features]),
                     "token_type_ids": np.array([f.input_type_ids for f in features])})
    for record, feature, row in zip(records, features, range(3)):
        assert [t["token"] for t in record["features"]] == feature.tokens
        assert len(feature.tokens) <= 16
        for position, token in enumerate(record["features"]):
            assert [layer["index"] for layer in token["layers"]] == [-1, -2]
            for layer, encoder_index in zip(token["layers"], (1, 0)):
                expected = outputs["encoder_outputs"][encoder_index][row, position].numpy()
                assert len(layer["values"]) == 128
                np.testing.assert_allclose(layer["values"], expected, atol=1e-5)
    assert records[0]["features"][0]["token"] == "[CLS]"
    assert records[2]["features"][-1]["token"] == "[SEP]" and len(records[2]["features"]) == 16


def test_script_errors_are_one_line(refs, tmp_path):
    model_dir = refs / "model"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xfe\n")
    common = [f"--output_file={tmp_path / 'o.jsonl'}",
              f"--bert_config_file={model_dir / 'bert_config.json'}",
              f"--init_checkpoint={model_dir / 'bert_model.ckpt'}"]
    process = run_script("extract_features.py", f"--input_file={bad}",
                         f"--vocab_file={refs / 'vocab/uncased_vocab.txt'}", *common, check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines()[-1] == \
        f"extract_features.py: error: {bad}:1: not valid UTF-8 (invalid start byte at byte 0)"
    process = run_script("extract_features.py", f"--input_file={bad}",
                         f"--vocab_file={refs / 'vocab/cased_vocab.txt'}", *common, check=False)
    assert process.returncode == 2
    assert "has 28996 tokens but" in process.stderr and "vocab_size=30522" in process.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_read_token_vectors_concatenates_the_top_four_layers():
    feature = text.InputFeatures(
        unique_id=3, tokens=["[CLS]", "hi", "[SEP]"], input_ids=[1, 2, 3],
        input_mask=[1, 1, 1], input_type_ids=[0, 0, 0])
    layers = {index: np.arange(6, dtype=np.float32).reshape(3, 2) * 10 ** -index
              for index in (-1, -2, -3, -4)}
    line = extract_features.to_json_line(feature, layers)
    tokens, vectors = extract_features.read_token_vectors(line)
    assert tokens == ["[CLS]", "hi", "[SEP]"] and vectors.shape == (3, 8)
    # Token 1, in the order -1, -2, -3, -4: [2, 3] x 10, x 100, x 1000, x 10000.
    np.testing.assert_allclose(vectors[1], [20, 30, 200, 300, 2000, 3000, 20000, 30000])
    with pytest.raises(ValueError, match=r"line 3: layers \[-5\] are not in the record"):
        extract_features.read_token_vectors(line, (-1, -5))


def test_read_token_vectors_reads_the_layers_a_record_has_by_default():
    feature = text.InputFeatures(
        unique_id=0, tokens=["[CLS]", "[SEP]"], input_ids=[1, 2], input_mask=[1, 1],
        input_type_ids=[0, 0])
    # A two-layer model's record, written with --layers=-2,-1: that order is kept.
    layers = {-2: np.full((2, 3), -2.0, np.float32), -1: np.full((2, 3), -1.0, np.float32)}
    line = extract_features.to_json_line(feature, layers)

    tokens, vectors = extract_features.read_token_vectors(line)

    assert tokens == ["[CLS]", "[SEP]"]
    np.testing.assert_array_equal(vectors, [[-2, -2, -2, -1, -1, -1]] * 2)
    _, top = extract_features.read_token_vectors(line, [-1])
    np.testing.assert_array_equal(top, [[-1, -1, -1]] * 2)


def _features(rows, length):
    return [text.InputFeatures(unique_id=i, tokens=["t"] * length, input_ids=list(row),
                               input_mask=[1] * length, input_type_ids=[0] * length)
            for i, row in enumerate(rows)]


def test_layer_outputs_are_the_encoders_in_input_order(tiny_config):
    model = BertModel(tiny_config)
    rows = np.random.default_rng(2).integers(1, 99, (5, 6))
    features = _features(rows, 6)
    outputs = list(extract_features.layer_outputs(model, features, [-1, 0], batch_size=2))
    assert [feature.unique_id for feature, _ in outputs] == [0, 1, 2, 3, 4]
    expected = model({"input_ids": rows.astype("int32")})["encoder_outputs"]
    for row, (_, layers) in enumerate(outputs):
        assert list(layers) == [-1, 0]
        np.testing.assert_allclose(layers[-1], expected[1][row], atol=1e-5)
        np.testing.assert_allclose(layers[0], expected[0][row], atol=1e-5)
    with pytest.raises(ValueError, match="Layer index -3 is outside the model's 2 layers"):
        list(extract_features.layer_outputs(model, features, [-3], batch_size=2))


def test_a_json_line_is_the_originals_record():
    (feature,) = _features([[5, 6]], 2)
    layers = {-1: np.array([[0.1234567, 1.0], [2.0, -0.5]], np.float32)}
    record = json.loads(extract_features.to_json_line(feature, layers))
    assert list(record) == ["linex_index", "features"] and record["linex_index"] == 0
    assert record["features"][0] == {"token": "t", "layers": [
        {"index": -1, "values": [0.123457, 1.0]}]}
    assert list(record["features"][0]["layers"][0]) == ["index", "values"]
