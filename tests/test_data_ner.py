import pytest
import tensorflow as tf

from modeling.data import ner
from modeling.text import tokenization

# The original CoNLL-2003 layout: 4 space-separated columns, IOB1 tags (entities begin with
# I-; B- only between two adjacent entities of one type).
IOB1_FILE = """\
-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
Paul NNP I-NP B-PER
U.S. NNP I-NP I-LOC


"""
# Two tab-separated columns, IOB2 tags.
IOB2_FILE = ("Jürgen\tB-PER\nKlinsmann\tI-PER\nflew\tO\nto\tO\nthe\tO\nU.S.\tB-LOC\non\tO\n"
             "1996-08-22\tO\nwith\tO\n☃\tO\nLufthansa\tB-ORG\n(\tO\nReuters\tB-ORG\n)\tO\n"
             ".\tO\n")
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "Black", "##burn", "visited",
              "un", "##aff", "##able", "Peter", "EU", "U", "S", ".", "1996", "-", "08", "22"]


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def tiny_tokenizer(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n")
    return tokenization.FullTokenizer(str(vocab), do_lower_case=False)


def _check_alignment(features, sentence, label_list, expected_pieces):
    """Word by word: the word's pieces follow each other from the position `word_ids` gives
    it, the first carries the word's label with weight 1 and the rest have weight 0."""
    (feature,) = features
    assert len(sentence.words) == len(expected_pieces)
    assert feature.tokens == ["[CLS]"] + sum(expected_pieces, []) + ["[SEP]"]
    position = 1
    for word, (tag, pieces) in enumerate(zip(sentence.tags, expected_pieces)):
        assert feature.word_ids[position] == word
        assert feature.tokens[position:position + len(pieces)] == pieces, sentence.words[word]
        assert feature.label_ids[position] == label_list.index(tag)
        assert feature.label_weights[position] == 1.0
        rest = slice(position + 1, position + len(pieces))
        assert feature.word_ids[rest] == [-1] * (len(pieces) - 1)
        assert feature.label_weights[rest] == [0.0] * (len(pieces) - 1)
        assert feature.label_ids[rest] == [0] * (len(pieces) - 1)
        position += len(pieces)
    length = len(feature.tokens)
    for name, outside in (("label_weights", 0.0), ("label_ids", 0), ("word_ids", -1)):
        values = getattr(feature, name)
        assert [values[0]] + values[position:] == [outside] * (len(values) - position + 1), name
    assert feature.input_mask == [1] * length + [0] * (len(feature.input_mask) - length)
    assert set(feature.segment_ids) == {0}


def test_read_conll_keeps_the_lines(tmp_path):
    path = _write(tmp_path, "train.txt", IOB1_FILE)
    first, second = ner.read_conll(path)
    assert first.words == ["EU", "rejects", "German", "call", "."]
    assert first.tags == ["I-ORG", "O", "I-MISC", "O", "O"]
    assert first.lines[0] == "EU NNP I-NP I-ORG"
    assert first.line_numbers == [3, 4, 5, 6, 7]
    assert second.tags == ["I-PER", "I-PER", "B-PER", "I-LOC"]
    assert second.line_numbers == [9, 10, 11, 12] and second.where(2) == f"{path}:11"
    (sentence,) = ner.read_conll(_write(tmp_path, "test.txt", IOB2_FILE))
    assert sentence.words[7] == "1996-08-22" and sentence.lines[7] == "1996-08-22\tO"


def test_read_conll_errors_name_the_line(tmp_path):
    path = _write(tmp_path, "a.txt", "EU NNP B-ORG\nrejects\n")
    with pytest.raises(ValueError, match=f"{path}:2: expected at least 2 .* found 1"):
        ner.read_conll(path)
    path = _write(tmp_path, "b.txt", "EU NNP B-ORG\n\nrejects VBZ I-VP O\n")
    with pytest.raises(ValueError, match=f"{path}:3: expected 3 .* found 4"):
        ner.read_conll(path)
    path = tmp_path / "c.txt"
    path.write_bytes("EU B-ORG\nM\u00fcnchen B-LOC\n".encode("latin-1"))
    with pytest.raises(ValueError, match=f"{path}:2: not valid UTF-8"):
        ner.read_conll(path)


def test_read_split_finds_valid_or_dev(tmp_path):
    _write(tmp_path, "dev.txt", "a O\n")
    assert ner.read_split(str(tmp_path), "dev")[0].words == ["a"]
    _write(tmp_path, "valid.txt", "b O\n")
    assert ner.read_split(str(tmp_path), "dev")[0].words == ["b"]
    with pytest.raises(ValueError, match="holds none of test.txt"):
        ner.read_split(str(tmp_path), "test")
    with pytest.raises(ValueError, match="Unknown split 'eval'"):
        ner.read_split(str(tmp_path), "eval")


def test_iob1_to_iob2_and_back():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "I-ORG", "O", "I-MISC"]
    iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "I-ORG", "O", "B-MISC"]
    assert ner.to_iob2(iob1) == iob2
    assert ner.to_iob2(iob2) == iob2
    assert ner.to_iob1(iob2) == iob1
    assert ner.detect_scheme([["O"], iob1]) == "iob1"
    assert ner.detect_scheme([["O"], iob2]) == "iob2"
    assert ner.detect_scheme([["O", "O"]]) == "iob2"


def test_normalize_tags(tmp_path):
    path = _write(tmp_path, "train.txt", IOB1_FILE)
    sentences = ner.read_conll(path)
    for scheme in ("auto", "iob1"):
        first, second = ner.normalize_tags(sentences, scheme)
        assert first.tags == ["B-ORG", "O", "B-MISC", "O", "O"]
        assert second.tags == ["B-PER", "I-PER", "B-PER", "B-LOC"]
        assert first.lines == sentences[0].lines  # the file's own tags stay in the lines
    assert ner.resolve_scheme("auto", sentences) == "iob1"
    with pytest.raises(ValueError, match=f"{path}:3: I-ORG begins an entity"):
        ner.normalize_tags(sentences, "iob2")
    with pytest.raises(ValueError, match="Unknown tag scheme 'bio'"):
        ner.normalize_tags(sentences, "bio")
    bad = _write(tmp_path, "bad.txt", "a B-PER\nb E-PER\n")
    with pytest.raises(ValueError, match=f"{bad}:2: tag 'E-PER' is neither O nor"):
        ner.normalize_tags(ner.read_conll(bad), "auto")


def test_labels_come_from_training_and_others_are_errors(tmp_path, tiny_tokenizer):
    train = ner.normalize_tags(ner.read_conll(_write(tmp_path, "t.txt", IOB1_FILE)),
                                    "auto")
    label_list = ner.get_labels(train)
    assert label_list == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    dev_path = _write(tmp_path, "dev.txt", "EU B-ORG\nCommission I-ORG\n")
    (dev,) = ner.normalize_tags(ner.read_conll(dev_path), "auto")
    with pytest.raises(ValueError, match=f"{dev_path}:2: tag 'I-ORG' is not one of the"):
        ner.convert_sentence(dev, label_list, 16, tiny_tokenizer)


def test_alignment_word_by_word(data, tmp_path):
    tokenizer = tokenization.FullTokenizer(
        str(data / "vocab/bert-base-cased/vocab.txt"), do_lower_case=False)
    (sentence,) = ner.read_conll(_write(tmp_path, "test.txt", IOB2_FILE))
    label_list = ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"]
    features = ner.convert_sentence(sentence, label_list, 37, tokenizer)
    _check_alignment(features, sentence, label_list, [
        ["J", "##ü", "##rgen"], ["K", "##lins", "##mann"], ["flew"], ["to"], ["the"],
        ["U", ".", "S", "."],  # basic-tokenized into four words: one label, on "U"
        ["on"], ["1996", "-", "08", "-", "22"], ["with"],
        ["[UNK]"],  # the snowman is in no vocab entry; it keeps its O
        ["Lu", "##ft", "##han", "##sa"], ["("], ["Re", "##uters"], [")"], ["."]])
    assert features[0].input_ids[:5] == [101, 147, 17176, 16648, 148]
    assert features[0].input_ids[30:34] == [119, 102, 0, 0]


def test_alignment_with_unknown_and_empty_words(tiny_tokenizer):
    words = ["Peter", "Blackburn", "visited", "the", "U.S.", "on", "1996-08-22", "\u200b", "."]
    tags = ["B-PER", "I-PER", "O", "O", "B-LOC", "O", "O", "O", "O"]
    sentence = ner.Sentence(words, tags, words)
    label_list = ["O", "B-LOC", "B-PER", "I-PER"]
    features = ner.convert_sentence(sentence, label_list, 23, tiny_tokenizer)
    _check_alignment(features, sentence, label_list, [
        ["Peter"], ["Black", "##burn"], ["visited"], ["the"], ["U", ".", "S", "."],
        ["[UNK]"],  # "on" is not in the tiny vocab
        ["1996", "-", "08", "-", "22"],
        ["[UNK]"],  # a zero-width space has no pieces at all, yet is a word to tag
        ["."]])
    assert len(features[0].input_ids) == 23 and features[0].input_ids[-4:] == [0] * 4


# Nine words of 1, 2, 1, 3, 1, 1, 2, 1, 1 pieces (13 in all), each with a tag of its own.
LONG_WORDS = ["the", "Blackburn", "visited", "unaffable", "Peter", "EU", "Blackburn", "the", "."]
LONG_TAGS = [f"B-T{i}" for i in range(9)]


def test_an_over_long_sentence_is_split_into_windows(tiny_tokenizer):
    sentence = ner.Sentence(LONG_WORDS, LONG_TAGS, LONG_WORDS)
    label_list = ner.get_labels([sentence])
    # max_seq_length 8: 6 pieces a window, stride 3. Piece offsets of the words: 0 1 3 4 7 8 9
    # 11 12 (13 the end). Window 0 takes words 0-2 (4 pieces; word 3 would make 7). Window 1
    # starts at the first word >= 3 pieces later, word 2 (offset 3), and takes words 2-5
    # (offsets 3-9, 6 pieces). Window 2 starts at word 4 (offset 7 >= 3 + 3), takes words 4-8
    # (offsets 7-13, 6 pieces) and reaches the end.
    features = ner.convert_sentence(sentence, label_list, 8, tiny_tokenizer)
    assert [f.tokens[1:-1] for f in features] == [
        ["the", "Black", "##burn", "visited"],
        ["visited", "un", "##aff", "##able", "Peter", "EU"],
        ["Peter", "EU", "Black", "##burn", "the", "."]]
    # Who predicts a word seen twice: the larger of min(left, right) context, in pieces.
    # Word 2: window 0 left 3, right 0 -> 0; window 1 left 0, right 5 -> 0: a tie, and the
    # longer window 1 (6 pieces against 4) wins. Word 4: window 1 min(4, 1) = 1, window 2
    # min(0, 5) = 0 -> window 1. Word 5: window 1 min(5, 0) = 0, window 2 min(1, 4) = 1 ->
    # window 2.
    predicted = [[w for w, weight in zip(f.word_ids, f.label_weights) if weight] for f in features]
    assert predicted == [[0, 1], [2, 3, 4], [5, 6, 7, 8]]
    assert [[w for w in f.word_ids if w >= 0] for f in features] == [
        [0, 1, 2], [2, 3, 4, 5], [4, 5, 6, 7, 8]]
    assert [f.window_index for f in features] == [0, 1, 2]
    # Each word's label sits on its first piece in every window, predicted there or not.
    assert all(f.label_ids[p] == label_list.index(LONG_TAGS[w])
               for f in features for p, w in enumerate(f.word_ids) if w >= 0)
    # Put back in order, each word from its own window only: elsewhere the "predictions" are O.
    predicted_ids = [[label if weight else 0 for label, weight in zip(f.label_ids,
                                                                      f.label_weights)]
                     for f in features]
    assert ner.assemble_predictions([sentence], features, predicted_ids,
                                         label_list) == [LONG_TAGS]


def test_stride_and_lengths(tiny_tokenizer):
    sentence = ner.Sentence(LONG_WORDS, LONG_TAGS, LONG_WORDS)
    label_list = ner.get_labels([sentence])
    # Stride 6, a whole window: the windows only touch (words 0-2, 3-5, 6-8).
    features = ner.convert_sentence(sentence, label_list, 8, tiny_tokenizer, stride=6)
    assert [[w for w in f.word_ids if w >= 0] for f in features] == [
        [0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(ner.convert_sentence(sentence, label_list, 15, tiny_tokenizer)) == 1
    with pytest.raises(ValueError, match="max_seq_length >= 3 and stride >= 1, got 2"):
        ner.convert_sentence(sentence, label_list, 2, tiny_tokenizer)


def test_a_word_longer_than_a_window_keeps_its_first_pieces(tiny_tokenizer):
    words = ["EU", "unaffable", "the"]  # the middle word is 3 pieces, a window holds 2
    sentence = ner.Sentence(words, ["B-ORG", "O", "O"], words)
    features = ner.convert_sentence(sentence, ["O", "B-ORG"], 4, tiny_tokenizer)
    assert [f.tokens for f in features] == [
        ["[CLS]", "EU", "[SEP]"], ["[CLS]", "un", "##aff", "[SEP]"], ["[CLS]", "the", "[SEP]"]]
    assert [f.label_weights[1] for f in features] == [1.0, 1.0, 1.0]


def test_assemble_needs_each_word_exactly_once(tiny_tokenizer):
    sentence = ner.Sentence(LONG_WORDS, LONG_TAGS, LONG_WORDS)
    label_list = ner.get_labels([sentence])
    features = ner.convert_sentence(sentence, label_list, 8, tiny_tokenizer)
    predicted_ids = [f.label_ids for f in features]
    with pytest.raises(ValueError, match="Word 5 of sentence 0 .* is predicted by no window"):
        ner.assemble_predictions([sentence], features[:2], predicted_ids[:2], label_list)
    with pytest.raises(ValueError, match="Word 0 of sentence 0 is predicted by more than one"):
        ner.assemble_predictions([sentence], features + features[:1],
                                      predicted_ids + predicted_ids[:1], label_list)
    with pytest.raises(ValueError, match="3 windows but 2 predictions"):
        ner.assemble_predictions([sentence], features, predicted_ids[:2], label_list)


def test_tfrecords(tiny_tokenizer, tmp_path):
    sentences = [ner.Sentence(["EU", "visited"], ["B-T1", "O"], ["EU", "visited"]),
                 ner.Sentence(LONG_WORDS, LONG_TAGS, LONG_WORDS)]
    label_list = ner.get_labels(sentences)
    features = ner.convert_sentences(sentences, label_list, 8, tiny_tokenizer)
    assert [(f.sentence_index, f.window_index) for f in features] == [(0, 0), (1, 0), (1, 1),
                                                                     (1, 2)]
    (tmp_path / "out").mkdir()
    path = tmp_path / "out/train.tf_record"
    assert ner.write_features(features, str(path)) == 4
    assert [p.name for p in path.parent.iterdir()] == ["train.tf_record"]
    records = [tf.train.Example.FromString(raw).features.feature
               for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]
    assert len(records) == 4
    for record, feature in zip(records, features):
        assert sorted(record) == sorted(["input_ids", "input_mask", "segment_ids", "label_ids",
                                         "label_weights", "word_ids", "sentence_index"])
        for name in ("input_ids", "input_mask", "segment_ids", "label_ids", "word_ids"):
            assert list(record[name].int64_list.value) == getattr(feature, name), name
        assert list(record["label_weights"].float_list.value) == feature.label_weights
        assert list(record["sentence_index"].int64_list.value) == [feature.sentence_index]
    assert list(records[0]["word_ids"].int64_list.value) == [-1, 0, 1, -1, -1, -1, -1, -1]
    # What an input pipeline parses: fixed-length int64 and float32 features.
    spec = {name: tf.io.FixedLenFeature([8], tf.int64) for name in (
        "input_ids", "input_mask", "segment_ids", "label_ids", "word_ids")}
    spec.update(label_weights=tf.io.FixedLenFeature([8], tf.float32),
                sentence_index=tf.io.FixedLenFeature([1], tf.int64))
    batch = next(iter(tf.data.TFRecordDataset(str(path)).batch(4).map(
        lambda records: tf.io.parse_example(records, spec))))
    assert batch["label_weights"].numpy().tolist() == [f.label_weights for f in features]
    assert batch["sentence_index"].numpy().ravel().tolist() == [0, 1, 1, 1]


def test_write_predictions(tmp_path):
    sentences = ner.read_conll(_write(tmp_path, "valid.txt", IOB1_FILE))
    sentences.append(ner.read_conll(_write(tmp_path, "t.txt", "a\tB-X\nb\tO\n"))[0])
    (tmp_path / "out").mkdir()
    path = tmp_path / "out/predictions.txt"
    ner.write_predictions(sentences, [["I-ORG", "O", "O", "O", "O"],
                                           ["I-PER", "I-PER", "I-PER", "O"], ["O", "O"]],
                               str(path))
    assert path.read_text() == (
        "EU NNP I-NP I-ORG I-ORG\nrejects VBZ I-VP O O\nGerman JJ I-NP I-MISC O\n"
        "call NN I-NP O O\n. . O O O\n\n"
        "Peter NNP I-NP I-PER I-PER\nBlackburn NNP I-NP I-PER I-PER\n"
        "Paul NNP I-NP B-PER I-PER\nU.S. NNP I-NP I-LOC O\n\n"
        "a\tB-X\tO\nb\tO\tO\n\n")
    with pytest.raises(ValueError, match="Sentence 1 .* has 4 words but 3 predicted tags"):
        ner.write_predictions(sentences, [["O"] * 5, ["O"] * 3, ["O"] * 2], str(path))
    assert [p.name for p in path.parent.iterdir()] == ["predictions.txt"]


def test_real_conll2003(data):
    counts = {}
    for split in ("train", "dev", "test"):
        sentences = ner.read_split(str(data / "conll2003"), split)
        counts[split] = (len(sentences), sum(len(s.words) for s in sentences))
        assert ner.detect_scheme(s.tags for s in sentences) == "iob2"
        if split == "train":
            train = sentences
    assert counts == {"train": (14041, 203621), "dev": (3250, 51362), "test": (3453, 46435)}
    assert train[0].words == ["EU", "rejects", "German", "call", "to", "boycott", "British",
                              "lamb", "."]
    assert train[0].lines[0] == "EU NNP B-NP B-ORG"
    assert ner.get_labels(ner.normalize_tags(train, "auto")) == [
        "O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]
    # As the original distribution: IOB1, which converts back to exactly these tags.
    iob1 = [ner.to_iob1(s.tags) for s in train]
    assert ner.detect_scheme(iob1) == "iob1"
    assert [ner.to_iob2(tags) for tags in iob1] == [s.tags for s in train]


# At 128, four dev sentences have more than 126 pieces and take two windows each; at 24 most
# sentences take several.
@pytest.mark.parametrize("max_seq_length, windows", [(128, 3254), (24, 5418)])
def test_every_real_word_is_predicted_once(data, max_seq_length, windows):
    tokenizer = tokenization.FullTokenizer(
        str(data / "vocab/bert-base-cased/vocab.txt"), do_lower_case=False)
    dev = ner.read_split(str(data / "conll2003"), "dev")
    label_list = ner.get_labels(dev)
    features = ner.convert_sentences(dev, label_list, max_seq_length, tokenizer)
    assert len(features) == windows
    assert all(len(f.input_ids) == max_seq_length and len(f.tokens) <= max_seq_length
               for f in features)
    predicted = ner.assemble_predictions(dev, features, [f.label_ids for f in features],
                                              label_list)
    assert predicted == [s.tags for s in dev]
