import collections
import dataclasses
import json
import os

import pytest
import tensorflow as tf

from modeling.data import squad
from modeling.text import tokenization

_FLAGS = ("max_seq_length", "doc_stride", "max_query_length")


def _rows(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _tokenizer(refs):
    return tokenization.FullTokenizer(str(refs / "vocab/uncased_vocab.txt"), do_lower_case=True)


def _golden_features(refs, is_training):
    meta = json.loads((refs / "squad/meta.json").read_text())
    examples = squad.read_squad_examples(str(refs / "squad/tiny_squad_v2.json"),
                                              is_training, version_2_with_negative=True)
    features = []
    count = squad.convert_examples_to_features(
        examples, _tokenizer(refs), *(meta[flag] for flag in _FLAGS), is_training,
        features.append)
    return count, features


def _split(is_training):
    return "train" if is_training else "predict"


@pytest.mark.parametrize("is_training", [True, False])
def test_examples_equal_the_originals(refs, is_training):
    examples = squad.read_squad_examples(str(refs / "squad/tiny_squad_v2.json"),
                                              is_training, version_2_with_negative=True)
    rows = _rows(refs / f"squad/examples_{_split(is_training)}.jsonl")
    assert len(rows) == 10
    assert [dataclasses.asdict(example) for example in examples] == rows


@pytest.mark.parametrize("is_training", [True, False])
def test_features_equal_the_originals(refs, is_training):
    count, features = _golden_features(refs, is_training)
    rows = _rows(refs / f"squad/features_{_split(is_training)}.jsonl")
    assert count == len(features) == len(rows) == 35
    for feature, row in zip(features, rows):
        for name in ("token_to_orig_map", "token_is_max_context"):
            row[name] = {int(key): value for key, value in row[name].items()}
        assert dataclasses.asdict(feature) == row, row["unique_id"]
        assert all(type(key) is int for key in feature.token_to_orig_map)


def _parse(path):
    return [{name: list(feature.int64_list.value)
             for name, feature in tf.train.Example.FromString(raw).features.feature.items()}
            for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]


@pytest.mark.parametrize("is_training", [True, False])
def test_tfrecords_equal_the_originals(refs, tmp_path, is_training):
    _, features = _golden_features(refs, is_training)
    output = tmp_path / "features.tf_record"
    writer = squad.FeatureWriter(str(output), is_training)
    for feature in features:
        writer.process_feature(feature)
    assert not output.exists()  # written atomically: nothing under the name before close()
    writer.close()
    assert writer.num_features == 35
    assert os.listdir(tmp_path) == ["features.tf_record"]
    records = _parse(output)
    assert records == _parse(refs / f"squad/features_{_split(is_training)}.tfrecord")
    names = {"unique_ids", "input_ids", "input_mask", "segment_ids"}
    if is_training:
        names |= {"start_positions", "end_positions", "is_impossible"}
        assert sum(record["is_impossible"] == [1] for record in records) == 6  # q3's windows
    assert set(records[0]) == names


def _squad_file(tmp_path, qas, context="The cat sat on the mat.", data=None):
    path = tmp_path / "squad.json"
    if data is None:
        data = [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]
    path.write_text(json.dumps({"version": "v2.0", "data": data}), encoding="utf-8")
    return str(path)


def _question(qas_id="q1", text="sat", start=8, **fields):
    return {"id": qas_id, "question": "What did the cat do?",
            "answers": [{"text": text, "answer_start": start}], "is_impossible": False,
            **fields}


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not a UTF-8 JSON file"),
    ('{"version": "v2.0"}', "has no 'data'"),
    ('{"data": {"paragraphs": []}}', "'data' is {'paragraphs': []}, expected type list"),
    ('{"data": [{"title": "t"}]}', "data[0] has no 'paragraphs'"),
    ('{"data": [{"paragraphs": [{"qas": []}]}]}', "data[0].paragraphs[0] has no 'context'"),
    ('{"data": [{"paragraphs": [{"context": "x"}]}]}', "data[0].paragraphs[0] has no 'qas'"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"question": "?"}]}]}]}',
     "data[0].paragraphs[0].qas[0] has no 'id'"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "q7"}]}]}]}',
     "question 'q7' has no 'question'"),
])
def test_files_that_are_not_squad(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    for is_training in (True, False):
        with pytest.raises(ValueError, match=str(path)) as error:
            squad.read_squad_examples(str(path), is_training, True)
        assert message in str(error.value)


@pytest.mark.parametrize("question, version_2, message", [
    (_question(answers=[]), True, "'q1' has 0 answers: for training, each question should "
                                  "have exactly 1 answer"),
    (_question(answers=[{"text": "sat", "answer_start": 8}] * 2), False, "'q1' has 2 answers"),
    ({"id": "q1", "question": "?"}, False, "'q1' has no 'answers'"),
    ({"id": "q1", "question": "?", "answers": []}, True, "'q1' has no 'is_impossible'"),
    (_question(answers=[{"answer_start": 8}]), True, "'q1', answer has no 'text'"),
    (_question(answers=[{"text": "sat"}]), True, "'q1', answer has no 'answer_start'"),
    (_question(start="8"), True, "'answer_start' is '8', expected type int"),
    (_question(text=""), True, "'q1': the answer text is empty"),
    (_question(start=22), True, "'q1': the answer 'sat' at answer_start 22 reaches outside "
                                "its context of 23 characters"),
    (_question(start=-1), True, "at answer_start -1 reaches outside"),
])
def test_bad_training_answers(tmp_path, question, version_2, message):
    path = _squad_file(tmp_path, [question])
    with pytest.raises(ValueError, match=path) as error:
        squad.read_squad_examples(path, True, version_2)
    assert message in str(error.value)
    # Prediction reads no answer, as in the original.
    assert len(squad.read_squad_examples(path, False, version_2)) == 1


def test_v1_training_ignores_is_impossible(tmp_path):
    path = _squad_file(tmp_path, [_question(is_impossible=True)])
    (example,) = squad.read_squad_examples(path, True, version_2_with_negative=False)
    assert (example.is_impossible, example.start_position, example.end_position) == (
        False, 2, 2)


def test_answer_that_does_not_match_its_offset_is_skipped(tmp_path, caplog):
    path = _squad_file(tmp_path, [_question("q1", "mat", start=8), _question("q2")])
    examples = squad.read_squad_examples(path, True, True)
    assert [example.qas_id for example in examples] == ["q2"]
    assert "'q1': skipped, could not find answer: 'sat' vs. 'mat'" in caplog.text


def test_whitespace_is_the_originals(tmp_path):
    # Tab, CR, LF and U+202F split words; the no-break space U+00A0 does not.
    context = "Sur\u202fle pont\u00a0d'Avignon\t\r\n on y  danse."
    questions = [_question("q1", text="y  danse", start=context.index("y")),
                 # The answer check splits on all of Python's whitespace, U+00A0 included, so
                 # an answer holding one is not found in its word and skipped, as the original.
                 _question("q2", text="pont\u00a0d'Avignon", start=context.index("pont"))]
    (example,) = squad.read_squad_examples(_squad_file(tmp_path, questions, context),
                                                True, True)
    assert example.doc_tokens == ["Sur", "le", "pont\u00a0d'Avignon", "on", "y", "danse."]
    assert (example.qas_id, example.start_position, example.end_position) == ("q1", 4, 5)


def test_empty_context(tmp_path, caplog, refs):
    qas = [_question(), _question("q2", is_impossible=True, answers=[])]
    path = _squad_file(tmp_path, qas, context=" \t ")
    assert squad.read_squad_examples(path, True, True) == []
    assert "'q1': skipped, its context is empty" in caplog.text
    assert "'q2': skipped, its context is empty" in caplog.text
    examples = squad.read_squad_examples(path, False, True)
    assert [(e.qas_id, e.doc_tokens) for e in examples] == [("q1", []), ("q2", [])]
    features = []
    assert squad.convert_examples_to_features(examples, _tokenizer(refs), 64, 16, 16,
                                                   False, features.append) == 0
    assert features == []


@pytest.fixture
def letters_tokenizer(tmp_path):
    """A tokenizer whose words "q" and "a" are one piece each."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nq\na\n", encoding="utf-8")
    return tokenization.FullTokenizer(str(vocab), do_lower_case=True)


def test_stride_longer_than_the_window_skips_nothing(letters_tokenizer):
    # Windows of 8 - len([CLS] q [SEP] [SEP]) = 4 pieces advance by min(4, doc_stride).
    example = squad.SquadExample("q1", "q", ["a"] * 10)
    features = []
    assert squad.convert_examples_to_features([example], letters_tokenizer, 8, 100, 4,
                                                   False, features.append) == 3
    assert [sorted(f.token_to_orig_map.values()) for f in features] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert features[2].input_ids == [2, 4, 3, 5, 5, 3, 0, 0]
    assert features[2].input_mask == [1, 1, 1, 1, 1, 1, 0, 0]
    assert features[2].segment_ids == [0, 0, 0, 1, 1, 1, 0, 0]


def test_longer_window_wins_a_near_tie(letters_tokenizer):
    # At the golden's 64-piece windows the 0.01 * length term never decides; at 500 pieces it
    # outweighs one piece of context. 510 pieces, windows of 500 and stride 400 give spans
    # [0, 500) and [400, 510). Piece 450 has context 49 in the first (+ 5.0 for its length)
    # and 50 in the second (+ 1.1): the first, longer window is its max context.
    example = squad.SquadExample("q1", "q", ["a"] * 510)
    features = []
    assert squad.convert_examples_to_features([example], letters_tokenizer, 504, 400, 64, False,
                                                   features.append) == 2
    first, second = features
    assert [len(first.token_to_orig_map), len(second.token_to_orig_map)] == [500, 110]
    offset = 3  # [CLS] q [SEP]
    assert first.token_is_max_context[offset + 450] is True
    assert second.token_is_max_context[offset + 450 - 400] is False
    assert first.token_is_max_context[offset + 452] is False  # 47 + 5.0 < 52 + 1.1
    assert sum(first.token_is_max_context.values()) + sum(
        second.token_is_max_context.values()) == 510


@pytest.mark.parametrize("max_seq_length, doc_stride, max_query_length, message", [
    (19, 16, 16, r"The max_seq_length \(19\) must be greater than max_query_length \(16\) \+ 3"),
    (64, 0, 16, r"doc_stride \(0\) must be at least 1"),
])
def test_flags_that_would_loop_forever(refs, max_seq_length, doc_stride, max_query_length,
                                       message):
    examples = squad.read_squad_examples(str(refs / "squad/tiny_squad_v2.json"), False,
                                              True)
    with pytest.raises(ValueError, match=message):
        squad.convert_examples_to_features(examples, _tokenizer(refs), max_seq_length,
                                                doc_stride, max_query_length, False, print)


def test_real_squad_v1_dev(data):
    path = str(data / "squad/dev-v1.1.json")
    examples = squad.read_squad_examples(path, is_training=False,
                                              version_2_with_negative=False)
    assert len(examples) == 10570
    assert len({example.qas_id for example in examples}) == 10570
    assert (examples[0].qas_id, examples[0].question_text, examples[0].doc_tokens[:3]) == (
        "56be4db0acb8001400a502ec", "Which NFL team represented the AFC at Super Bowl 50?",
        ["Super", "Bowl", "50"])
    assert all(example.start_position is None and example.orig_answer_text is None
               for example in examples)
    # The dev sets give several answers per question: not a training file.
    with pytest.raises(ValueError, match="'56be4db0acb8001400a502ec' has 3 answers"):
        squad.read_squad_examples(path, is_training=True, version_2_with_negative=False)


def test_real_squad_v2_dev(data, refs):
    path = data / "squad/dev-v2.0.json"
    examples = squad.read_squad_examples(str(path), is_training=False,
                                              version_2_with_negative=True)
    impossible = {qa["id"] for article in json.loads(path.read_text())["data"]
                  for paragraph in article["paragraphs"] for qa in paragraph["qas"]
                  if qa["is_impossible"]}
    assert len(examples) == 11873 and len(impossible) == 5945
    # Prediction keeps the impossible questions and, as the original, never reads the flag.
    assert impossible <= {example.qas_id for example in examples}
    assert not any(example.is_impossible for example in examples)

    # The windows of real paragraphs: each context piece is "max context" in exactly one.
    tokenizer = _tokenizer(refs)
    features = []
    squad.convert_examples_to_features(examples[:200], tokenizer, 384, 128, 64, False,
                                            features.append)
    assert len(features) > 200
    max_context = collections.Counter()
    for feature in features:
        assert len(feature.input_ids) == len(feature.input_mask) == 384
        max_context[feature.example_index] += sum(feature.token_is_max_context.values())
    assert max_context == {
        index: sum(len(tokenizer.tokenize(token)) for token in example.doc_tokens)
        for index, example in enumerate(examples[:200])}


def test_the_packing_rule_is_plain_arithmetic_the_export_shares():
    """`[CLS] query [SEP] window [SEP]`: for ints here, for tensors of query lengths there."""
    import numpy as np
    assert squad.max_tokens_for_doc(384, 64) == 317 and squad.doc_offset(64) == 66
    lengths = np.array([0, 5, 20])
    np.testing.assert_array_equal(squad.max_tokens_for_doc(24, lengths), [21, 16, 1])
    np.testing.assert_array_equal(squad.doc_offset(lengths), [2, 7, 22])
