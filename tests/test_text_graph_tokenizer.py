"""Tests for modeling/text/graph_tokenizer.py: the in-graph tokenizer gives FullTokenizer's ids.

The golden tests run every line of ../shared/refs/tokenization/ (the original release's
`FullTokenizer` output) through `GraphTokenizer` and expect zero mismatching lines; the
classifier golden checks `BertInputPacker` against the original `convert_single_example`.
The other tests compare with our pure-Python `tokenization.FullTokenizer` (which matches the
original on every refs line) on the cases the graph pipeline treats specially.
"""
import functools
import json
import pathlib
import random

import numpy as np
import pytest
import tensorflow as tf

from modeling.text import tokenization
from modeling.text.graph_tokenizer import BertInputPacker, GraphTokenizer

REFS = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "refs"

GOLDEN_CASES = [
    ("uncased_lowerTrue.jsonl", "uncased_vocab.txt", True),
    ("cased_lowerFalse.jsonl", "cased_vocab.txt", False),
    ("chinese_lowerTrue.jsonl", "chinese_vocab.txt", True),
]

# Strings on which the graph takes each of its special paths; see the module docstring.
SPECIAL_TEXTS = [
    # Final sigma: by the letters around it, skipping case-ignorable ones ("'", ".", marks).
    "ΟΔΟΣ ΟΔΟΣ. ΣΑ Σ ΑΣ'Α ΑΣ\u0301 Α\u200bΣ ΑΣ\u0301Β (ΑΣ) 中Σ ΑΣ中",
    # ... and beyond the 8 characters looked at first.
    "Α" + "\u0301" * 9 + "Σ Α" + "'" * 12 + "Σ" + "\u0301" * 10 + "Β ΑΣ" + "\u0301" * 20,
    # Lower-cases to two code points; ß, ﬁ and final ς stay (no case folding).
    "İstanbul STRASSE straße ﬁne ς Ω K Å",
    # Hangul syllables decompose into jamo under NFD.
    "한국어 텍스트 KOREAN",
    # Canonical reordering moves U+1D165 (class 216) before U+1D16D (class 226); a dropped mark
    # of class 230 in between does not end the run, a dropped control character is gone first.
    "a\U0001D16D\U0001D165b a\U0001D16D\u0301\U0001D165 x\U0001D16D\x07\U0001D165 "
    "\U0001D15F\U0001D16D",
    # Accents in NFC and NFD, marks on their own, U+1FEF (a symbol whose NFD is "`").
    "Café cafe\u0301 \u0301\u0301 e\u0316\u0301 \u1FEFx ΐ ǅ",
    # Cleaning: NUL, U+FFFD, C0/C1 controls, format characters, Unicode spaces and breaks.
    "a\x00b\ufffdc\x07d\x85e\u200bf\u00adg\ufeffh\u00a0i\u3000j\u2028k\u2029l\x1cm\x0bn\x0co\tp",
    # Words of 199, 200 and 201 characters, counted after accent stripping and cleaning.
    "x" * 199 + "é " + "x" * 200 + "é " + "É" * 201 + " " + "x" * 199 + "\u00ad\u200bé",
    # Punctuation or an ideograph splits an over-long run into words that fit.
    "a" * 150 + "." + "b" * 150 + " " + "a" * 150 + "中" + "b" * 150,
    # Code points Python 3.11 does not know but newer Unicode calls punctuation.
    "q\U0001E5FFq. w\U00011F43 \U0001E5FF" + "z" * 300,
    # Private use, noncharacters, emoji sequences, CJK compatibility and extension B.
    "\ue000x \ufdd0 \U0010ffff 👩‍👩‍👧 🇯🇵 豈 𠀀 [CLS] [UNK]",
    "",
    "   \t ",
]


def _read_rows(path):
    with open(path, encoding="utf-8", newline="") as reader:
        return [json.loads(line) for line in reader.read().split("\n") if line]


def _refs():
    if not REFS.is_dir():
        pytest.skip(f"{REFS} is absent: the reference outputs live in ../shared beside the repo")
    return REFS


@functools.lru_cache(maxsize=None)
def _tokenizers(vocab_name, do_lower_case):
    """(GraphTokenizer, FullTokenizer) for a refs vocab, built once per test session."""
    vocab_file = _refs() / "vocab" / vocab_name
    return (GraphTokenizer(vocab_file, do_lower_case),
            tokenization.FullTokenizer(vocab_file, do_lower_case))


def _python_ids(full_tokenizer, texts):
    return [full_tokenizer.convert_tokens_to_ids(full_tokenizer.tokenize(t)) for t in texts]


# ---------------------------------------------------------------- golden: original release


@pytest.mark.parametrize("jsonl, vocab_name, do_lower_case", GOLDEN_CASES)
def test_every_refs_line_gives_the_original_ids(jsonl, vocab_name, do_lower_case):
    rows = _read_rows(_refs() / "tokenization" / jsonl)
    graph, _ = _tokenizers(vocab_name, do_lower_case)
    texts = [row["text"] for row in rows]

    ids = graph.tokenize(texts).to_list()
    words = graph.basic_tokenize(texts).to_list()

    assert len(rows) == 456
    mismatches = [row["line"] for row, got in zip(rows, ids) if got != row["ids"]]
    assert mismatches == []
    word_mismatches = [row["line"] for row, got in zip(rows, words)
                       if [w.decode("utf-8") for w in got] != row["basic_tokens"]]
    assert word_mismatches == []


def test_tokens_are_the_original_tokens():
    rows = _read_rows(_refs() / "tokenization" / "uncased_lowerTrue.jsonl")[:56]
    graph, _ = _tokenizers("uncased_vocab.txt", True)
    tokens = graph.tokenize_to_tokens([row["text"] for row in rows]).to_list()
    assert [[t.decode("utf-8") for t in row] for row in tokens] == [r["tokens"] for r in rows]


def test_packing_matches_the_original_classifier_features():
    rows = [row for row in _read_rows(_refs() / "classifier" / "features_len32.jsonl")
            if not row["padding_example"]]
    graph, _ = _tokenizers("uncased_vocab.txt", True)
    packer = BertInputPacker(32, graph.cls_id, graph.sep_id)

    features = packer(graph.tokenize([row["text_a"] for row in rows]),
                      graph.tokenize([row["text_b"] or "" for row in rows]))

    assert len(rows) == 20
    for key, original in (("input_ids", "input_ids"), ("input_mask", "input_mask"),
                          ("token_type_ids", "segment_ids")):
        np.testing.assert_array_equal(features[key].numpy(), [row[original] for row in rows],
                                      err_msg=key)


# ---------------------------------------------------------------- the special paths


@pytest.mark.parametrize("vocab_name, do_lower_case", [
    ("uncased_vocab.txt", True), ("cased_vocab.txt", False), ("chinese_vocab.txt", True)])
def test_special_texts_match_full_tokenizer(vocab_name, do_lower_case):
    graph, python = _tokenizers(vocab_name, do_lower_case)
    function = tf.function(graph.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])

    ids = graph.tokenize(SPECIAL_TEXTS).to_list()
    # One at a time too: which mapping a row takes depends on the other rows of its batch.
    ids_alone = [function([text]).to_list()[0] for text in SPECIAL_TEXTS]
    words = graph.basic_tokenize(SPECIAL_TEXTS).to_list()

    for text, got_ids, got_alone, got_words in zip(SPECIAL_TEXTS, ids, ids_alone, words):
        assert [w.decode("utf-8") for w in got_words] == python.basic_tokenizer.tokenize(text), text
        assert got_ids == _python_ids(python, [text])[0], text
        assert got_alone == got_ids, text


def test_final_sigma_and_canonical_order_are_pythons():
    graph, _ = _tokenizers("uncased_vocab.txt", True)
    words = graph.basic_tokenize(["ΟΔΟΣ ΑΣ'Α", "a\U0001D16D\u0301\U0001D165"]).to_list()
    assert [w.decode("utf-8") for w in words[0]] == ["οδος", "ασ", "'", "α"]
    assert words[1] == ["a\U0001D165\U0001D16D".encode("utf-8")]


@pytest.mark.parametrize("vocab_name, do_lower_case", [
    ("uncased_vocab.txt", True), ("cased_vocab.txt", False)])
def test_invalid_utf8_bytes_are_dropped_as_python_does(vocab_name, do_lower_case):
    graph, python = _tokenizers(vocab_name, do_lower_case)
    rng = random.Random(7)
    alphabet = [0x41, 0x20, 0x2E, 0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xA0, 0xEF, 0xF0, 0xF4,
                0x90, 0x8F, 0xFF, 0x9F, 0xCE, 0xA3]
    texts = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(2000)]
    texts += [b"caf\xc3", b"a\xed\xa0\x80b", b"\xf4\x90\x80\x80x", b"\xed\x8f\xa0\xff"]

    ids = graph.tokenize(texts).to_list()

    assert ids == _python_ids(python, texts)


@pytest.mark.parametrize("vocab_name, do_lower_case", [
    ("uncased_vocab.txt", True), ("cased_vocab.txt", False)])
def test_random_text_matches_full_tokenizer(vocab_name, do_lower_case):
    graph, python = _tokenizers(vocab_name, do_lower_case)
    rng = random.Random(11)
    pool = "".join(SPECIAL_TEXTS[:6]) + "ΣΣΣ'.·\u0345\u0307\u0316 abcXYZ,-"
    pieces = [t.lstrip("#") for t in graph.vocab[1000:6000]]

    def char():
        draw = rng.random()
        if draw < 0.5:
            return rng.choice(pool)
        if draw < 0.8:
            return rng.choice(pieces) + " "
        cp = rng.randrange(0x30000)
        return chr(cp) if not 0xD800 <= cp < 0xE000 else "?"

    texts = ["".join(char() for _ in range(rng.randint(0, 25))) for _ in range(1500)]

    assert graph.tokenize(texts).to_list() == _python_ids(python, texts)


# ---------------------------------------------------------------- graph, data, SavedModel


def test_inside_tf_function_dataset_and_saved_model(tmp_path):
    graph, python = _tokenizers("uncased_vocab.txt", True)
    texts = SPECIAL_TEXTS[:4] + ["Hello, world!"]
    expected = _python_ids(python, texts)

    function = tf.function(graph.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert function(tf.constant(texts)).to_list() == expected

    per_line = tf.data.Dataset.from_tensor_slices(texts).map(graph.tokenize)
    assert [list(ids) for ids in per_line.as_numpy_iterator()] == expected
    batched = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(graph.tokenize)
    assert [row for batch in batched for row in batch.to_list()] == expected

    module = tf.Module()
    module.tokenizer = graph
    module.tokenize = tf.function(
        lambda batch: graph.tokenize(batch), input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "tokenizer"))
    loaded = tf.saved_model.load(str(tmp_path / "tokenizer"))
    assert loaded.tokenize(tf.constant(texts)).to_list() == expected


def test_scalar_input_gives_one_dense_row():
    graph, python = _tokenizers("uncased_vocab.txt", True)
    ids = graph.tokenize("Héllo wörld!")
    assert isinstance(ids, tf.Tensor) and ids.dtype == tf.int32
    assert ids.numpy().tolist() == _python_ids(python, ["Héllo wörld!"])[0]


def test_vocab_holding_a_character_tensorflow_text_splits_at_is_refused(tmp_path):
    graph, _ = _tokenizers("uncased_vocab.txt", True)
    if not graph._foreign:
        pytest.skip("this tensorflow-text splits at no code point Python does not know")
    foreign = chr(min(graph._foreign))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n##" + foreign + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="tensorflow-text splits words at"):
        GraphTokenizer(vocab)


# ---------------------------------------------------------------- packing


def _python_pack(tokens_a, tokens_b, seq_length, cls_id, sep_id):
    """The original `convert_single_example` on id lists (tokens_b falsy: one segment)."""
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b else None
    if tokens_b:
        while len(tokens_a) + len(tokens_b) > seq_length - 3:  # _truncate_seq_pair
            (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    else:
        tokens_a = tokens_a[:seq_length - 2]
    ids = [cls_id] + tokens_a + [sep_id]
    segments = [0] * len(ids)
    if tokens_b:
        ids += tokens_b + [sep_id]
        segments += [1] * (len(tokens_b) + 1)
    padding = [0] * (seq_length - len(ids))
    return ids + padding, [1] * len(ids) + padding, segments + padding


def test_packing_truncation_cases_match_the_original_rule():
    graph, python = _tokenizers("uncased_vocab.txt", True)
    long_a = "the quick brown fox jumps over the lazy dog " * 3
    long_b = "a very long hypothesis that keeps going and going " * 3
    pairs = [
        ("short premise", long_b),                   # b longer: b is cut
        (long_a, long_b),                            # both long: alternating cuts
        (long_a, "short"),                           # a longer
        (long_a, None),                              # single over-long segment: seq - 2
        ("one two three four five six", "seven eight"),  # 6 + 2 + 3 = 11: exact fit
        ("one two three four five six seven", ""),  # empty text_b: a single segment
        ("one two three", " \t"),                    # text_b without tokens: a single segment
        ("", "only b here"),
    ]
    seq_length = 11
    packer = BertInputPacker(seq_length, graph.cls_id, graph.sep_id)

    features = packer(graph.tokenize([a for a, _ in pairs]),
                      graph.tokenize([b or "" for _, b in pairs]))

    for i, (a, b) in enumerate(pairs):
        ids_b = _python_ids(python, [b])[0] if b else None
        expected = _python_pack(_python_ids(python, [a])[0], ids_b, seq_length,
                                graph.cls_id, graph.sep_id)
        for key, want in zip(("input_ids", "input_mask", "token_type_ids"), expected):
            assert features[key][i].numpy().tolist() == want, (key, a, b)
    assert features["input_ids"].shape == (len(pairs), seq_length)


def test_packing_closed_form_equals_the_popping_loop_for_all_small_lengths():
    lengths = [(la, lb) for la in range(14) for lb in range(14)]
    ids_a = tf.ragged.constant([[5] * la for la, _ in lengths], dtype=tf.int32)
    ids_b = tf.ragged.constant([[7] * lb for _, lb in lengths], dtype=tf.int32)
    for seq_length in (3, 4, 9, 12):
        features = BertInputPacker(seq_length, 1, 2)(ids_a, ids_b)
        for i, (la, lb) in enumerate(lengths):
            want = _python_pack([5] * la, [7] * lb, seq_length, 1, 2)[0]
            assert features["input_ids"][i].numpy().tolist() == want, (seq_length, la, lb)


def test_packing_a_single_segment_and_bad_lengths():
    features = BertInputPacker(5, 101, 102)(tf.ragged.constant([[7, 8, 9, 10], [7]]))
    np.testing.assert_array_equal(features["input_ids"], [[101, 7, 8, 9, 102],
                                                          [101, 7, 102, 0, 0]])
    np.testing.assert_array_equal(features["token_type_ids"], np.zeros([2, 5]))
    np.testing.assert_array_equal(features["input_mask"], [[1] * 5, [1, 1, 1, 0, 0]])
    with pytest.raises(ValueError, match="at least 3, got 2"):
        BertInputPacker(2, 101, 102)


def test_packed_features_are_the_inputs_of_bert_model(tiny_config):
    from modeling.encoder.bert_model import BertModel
    features = BertInputPacker(7, 1, 2)(tf.ragged.constant([[5, 6], [7]]),
                                        tf.ragged.constant([[8], [9, 10]]))

    outputs = BertModel(tiny_config)(features)

    assert sorted(features) == ["input_ids", "input_mask", "token_type_ids"]
    np.testing.assert_array_equal(features["token_type_ids"], [[0, 0, 0, 0, 1, 1, 0],
                                                               [0, 0, 0, 1, 1, 1, 0]])
    assert outputs["sequence_output"].shape == (2, 7, tiny_config.hidden_size)
