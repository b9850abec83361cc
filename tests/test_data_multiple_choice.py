"""SWAG reading, packing and writing, on hand-written CSVs (invented sentences) and a tiny vocab."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling.data import multiple_choice as mcd
from modeling.text import tokenization

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "man", "opens", "a", "door", ",", "she",
         "walks", "away", ".", "##s", "run"]
# The released layout: an unnamed index column first, commas, quotes and a newline in fields.
FULL = (',video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,'
        'ending3,label\n'
        '17,clip-a_1,4031,"The man opens a door, slowly. She","The man opens a door, slowly.",'
        'She,gold,"walks in, smiling.",runs.,"says ""hello"".",sits,2\n'
        '42,clip-b_2,77,A cat sleeps. It,A cat sleeps.,It,gen,wakes.,"eats, then\nsleeps.",'
        'purrs.,jumps.,0\n'
        '\n'
        '43,clip-b_2,78,It naps. The dog,It naps.,The dog,gen,barks.,runs.,sits.,eats.,3\n')
# Another layout: no index column, columns in another order (ids become line numbers).
REGULAR = ('label,ending3,ending2,ending1,ending0,sent2,sent1,video-id\n'
           '1,d,c,b,a,She,The man opens a door,v1\n'
           '3,"h, i",g,f,e,He,A man walks,v2\n')


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def _write(tmp_path, text, name="train.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_reads_the_released_layout(tmp_path):
    examples = mcd.read_swag(_write(tmp_path, FULL), has_labels=True)
    assert [(e.example_id, e.label) for e in examples] == [("17", 2), ("42", 0), ("43", 3)]
    assert examples[0].context == "The man opens a door, slowly."
    assert examples[0].endings == ["She walks in, smiling.", "She runs.", 'She says "hello".',
                                   "She sits"]
    assert examples[1].endings[1] == "It eats, then\nsleeps."


def test_reads_a_test_file_without_labels(tmp_path):
    header = FULL.split("\n", 1)[0]
    text = header.rsplit(",", 1)[0] + "\n" + "17,v,1,s,Ctx.,Sub,gold,a,b,c,d\n"
    examples = mcd.read_swag(_write(tmp_path, text, "test.csv"), has_labels=False)
    assert examples == [mcd.SwagExample("17", "Ctx.", ["Sub a", "Sub b", "Sub c", "Sub d"])]
    # A label column, when present, is ignored without has_labels.
    assert [e.label for e in mcd.read_swag(_write(tmp_path, FULL), has_labels=False)] == [None] * 3


def test_reads_other_column_orders_and_a_bom(tmp_path):
    examples = mcd.read_swag(_write(tmp_path, REGULAR, encoding="utf-8-sig"), has_labels=True)
    assert examples == [
        mcd.SwagExample("2", "The man opens a door", ["She a", "She b", "She c", "She d"], 1),
        mcd.SwagExample("3", "A man walks", ["He e", "He f", "He g", "He h, i"], 3)]


@pytest.mark.parametrize("text, has_labels, message", [
    ("", True, r"train\.csv:1: empty file"),
    ("sent1,sent2,ending0,ending1,ending2,label\nx,y,a,b,c,0\n", True,
     r"train\.csv:1: missing column\(s\) \['ending3'\]"),
    ("sent1,sent2,ending0,ending1,ending2,ending3\nx,y,a,b,c,d\n", True,
     r"train\.csv:1: missing column\(s\) \['label'\]"),
    # The bad row starts on line 5: the row before it spans lines 3-4.
    (REGULAR.replace('"h, i"', '"h\ni"') + "4,d,c,b,a,S,C,v3\n", True,
     r"train\.csv:5: label '4' is not one of \['0', '1', '2', '3'\]"),
    (REGULAR + ",d,c,b,a,S,C,v3\n", True, r"train\.csv:4: label '' is not one of"),
    (REGULAR + "0,d,c,b,a,S,C\n", True,
     r"train\.csv:4: expected 8 comma-separated fields as in the header, found 7"),
    (REGULAR + "0,d,c,b,a,S,C,v3,extra\n", False,
     r"train\.csv:4: expected 8 comma-separated fields as in the header, found 9"),
])
def test_errors_name_file_and_line(tmp_path, text, has_labels, message):
    with pytest.raises(ValueError, match=message):
        mcd.read_swag(_write(tmp_path, text), has_labels)


# max_seq_length 10 leaves 7 tokens for context + ending. The context "the man opens a door"
# is 5 tokens: ids 4 5 6 7 8.
EXAMPLE = mcd.SwagExample("9", "The man opens a door", [
    "She",                         # 5 + 1: fits, one pad
    "She walks away. She walks",   # 5 + 6: pop b (6>5), b on the tie, a (5>4), b on the tie
    "She walks",                   # 5 + 2: fits; the context is whole again
    "She runs zebra",              # 5 + 4 (run ##s [UNK]): pop a (5>4), then b on the tie
], label=3)
EXPECTED_IDS = [
    [2, 4, 5, 6, 7, 8, 3, 10, 3, 0],
    [2, 4, 5, 6, 7, 3, 10, 11, 12, 3],
    [2, 4, 5, 6, 7, 8, 3, 10, 11, 3],
    [2, 4, 5, 6, 7, 3, 10, 15, 14, 3],
]
EXPECTED_MASK = [[1] * 9 + [0], [1] * 10, [1] * 10, [1] * 10]
EXPECTED_SEGMENTS = [
    [0] * 7 + [1, 1, 0],
    [0] * 6 + [1] * 4,
    [0] * 7 + [1] * 3,
    [0] * 6 + [1] * 4,
]


def test_convert_example_packs_and_truncates_each_choice(tokenizer):
    features = mcd.convert_example(EXAMPLE, 10, tokenizer)
    assert features == mcd.MultipleChoiceFeatures(EXPECTED_IDS, EXPECTED_MASK,
                                                  EXPECTED_SEGMENTS, 3, True)
    assert EXAMPLE.endings[1] == "She walks away. She walks"  # nothing mutated


def test_convert_example_test_and_padding_examples(tokenizer):
    unlabeled = mcd.SwagExample("t", "a door", ["she", "she", "she", "she"])
    features = mcd.convert_example(unlabeled, 6, tokenizer)
    assert features.label == 0 and features.is_real_example
    assert features.input_ids == [[2, 7, 8, 3, 10, 3]] * 4  # 2 + 1 tokens fit exactly
    # One token shorter: a (2 tokens) is longer than b (1), so the context pops "door".
    assert mcd.convert_example(unlabeled, 5, tokenizer).input_ids == [[2, 7, 3, 10, 3]] * 4
    padding = mcd.convert_example(mcd.PaddingInputExample(), 6, tokenizer)
    assert padding == mcd.MultipleChoiceFeatures([[0] * 6] * 4, [[0] * 6] * 4, [[0] * 6] * 4,
                                                 0, False)


def test_convert_example_rejects_bad_input(tokenizer):
    with pytest.raises(ValueError, match="max_seq_length 2 leaves no room"):
        mcd.convert_example(EXAMPLE, 2, tokenizer)
    with pytest.raises(ValueError, match="example x: 3 endings, expected 4"):
        mcd.convert_example(mcd.SwagExample("x", "a", ["b", "c", "d"], 0), 8, tokenizer)


def test_read_then_convert(tmp_path, tokenizer):
    example = mcd.read_swag(_write(tmp_path, REGULAR), has_labels=True)[0]
    features = mcd.convert_example(example, 12, tokenizer)
    # "She a": she -> 10, a -> 7; "She b": b is unknown -> [UNK] 1.
    assert features.input_ids[0] == [2, 4, 5, 6, 7, 8, 3, 10, 7, 3, 0, 0]
    assert features.input_ids[1] == [2, 4, 5, 6, 7, 8, 3, 10, 1, 3, 0, 0]
    assert features.label == 1


def test_tfrecords_parse_to_the_same_arrays(tmp_path, tokenizer):
    path = tmp_path / "eval.tf_record"
    unlabeled = mcd.SwagExample("t", "a door", ["she", "walks", "away", "run"])
    examples = [EXAMPLE, unlabeled, mcd.PaddingInputExample()]
    assert mcd.write_features(examples, 10, tokenizer, str(path)) == 3
    assert sorted(os.listdir(tmp_path)) == ["eval.tf_record", "vocab.txt"]  # no temp left
    spec = {name: tf.io.FixedLenFeature([4 * 10], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}
    spec.update(label_ids=tf.io.FixedLenFeature([1], tf.int64),
                is_real_example=tf.io.FixedLenFeature([1], tf.int64))
    records = list(tf.data.TFRecordDataset(str(path)).map(
        lambda raw: tf.io.parse_single_example(raw, spec)).as_numpy_iterator())
    assert len(records) == 3
    for example, record in zip(examples, records):
        expected = mcd.convert_example(example, 10, tokenizer)
        for name in ("input_ids", "input_mask", "segment_ids"):
            assert record[name].dtype == np.int64
            np.testing.assert_array_equal(record[name].reshape(4, 10), getattr(expected, name))
        assert record["label_ids"].tolist() == [expected.label]
        assert record["is_real_example"].tolist() == [int(expected.is_real_example)]
    assert records[0]["input_ids"].reshape(4, 10).tolist() == EXPECTED_IDS
    assert [r["label_ids"][0] for r in records] == [3, 0, 0]
    assert [r["is_real_example"][0] for r in records] == [1, 1, 0]


def test_write_predictions(tmp_path):
    examples = [mcd.SwagExample("17", "c", ["a"] * 4), mcd.SwagExample("42", "c", ["a"] * 4)]
    probabilities = np.array([[0.25, 0.5, 0.125, 0.125], [0.1, 0.2, 0.3, 0.4]], np.float32)
    path = tmp_path / "test_results.tsv"
    mcd.write_predictions(examples, probabilities, str(path))
    assert path.read_text() == "17\t0.25\t0.5\t0.125\t0.125\n42\t0.1\t0.2\t0.3\t0.4\n"
    assert os.listdir(tmp_path) == ["test_results.tsv"]
    with pytest.raises(ValueError, match="2 examples but 1 rows"):
        mcd.write_predictions(examples, probabilities[:1], str(path))
    with pytest.raises(ValueError, match="example 17: 3 probabilities, expected 4"):
        mcd.write_predictions(examples, probabilities[:, :3], str(path))
    assert os.listdir(tmp_path) == ["test_results.tsv"]


def test_no_tensorflow_import():
    code = ("import sys; import modeling.data.multiple_choice; "
            "sys.exit('tensorflow' in sys.modules)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0
