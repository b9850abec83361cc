"""modeling/data/text.py: text files and pair packing as the original reads them."""
import pytest

from modeling.data import text


def test_read_examples_splits_like_the_original(tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes(b"first line\nleft ||| right\n\nwith\rcarriage\r\n  padded  \nlast")
    examples = text.read_examples(str(path))
    assert [(e.unique_id, e.text_a, e.text_b) for e in examples] == [
        (0, "first line", None), (1, "left", "right"), (2, "", None),
        (3, "withcarriage", None), (4, "padded", None), (5, "last", None)]


def test_non_utf8_input_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: not valid UTF-8"):
        text.read_examples(str(path))


def test_truncate_seq_pair_pops_from_the_longer():
    a, b = list("abcdefg"), list("xyz")
    text.truncate_seq_pair(a, b, 6)
    assert (a, b) == (list("abc"), list("xyz"))
    a, b = list("abcd"), list("wxyz")
    text.truncate_seq_pair(a, b, 5)
    assert (a, b) == (list("abc"), list("wx"))


def test_pairs_are_packed_truncated_and_padded(word_tokenizer):
    examples = [text.InputExample(0, "the keeper lit the lamp", "a ship passed safely"),
                text.InputExample(1, "she walks away")]
    pair, single = text.convert_examples_to_features(examples, 9, word_tokenizer)
    # 9 - 3 = 6 pieces: popped from the longer side first (a: 5, b: 4 -> 3 and 3).
    assert pair.tokens == ["[CLS]", "the", "keeper", "lit", "[SEP]", "a", "ship", "passed",
                           "[SEP]"]
    assert pair.input_type_ids == [0] * 5 + [1] * 4 and pair.input_mask == [1] * 9
    assert single.tokens == ["[CLS]", "she", "walks", "away", "[SEP]"]
    assert single.input_ids == [2, 13, 14, 15, 3, 0, 0, 0, 0]
    assert single.input_mask == [1] * 5 + [0] * 4 and single.input_type_ids == [0] * 9


def test_pack_is_the_originals_cls_a_sep_b_sep():
    assert text.pack(["a", "b"]) == (["[CLS]", "a", "b", "[SEP]"], [0, 0, 0, 0])
    assert text.pack(["a"], ["c", "d"]) == (["[CLS]", "a", "[SEP]", "c", "d", "[SEP]"],
                                            [0, 0, 0, 1, 1, 1])
    # An empty second segment is still a segment (multiple choice's empty ending).
    assert text.pack(["a"], []) == (["[CLS]", "a", "[SEP]", "[SEP]"], [0, 0, 0, 1])


def test_padded_pads_with_zeros_and_masks_the_values():
    assert text.padded([7, 8], 4) == ([7, 8, 0, 0], [1, 1, 0, 0])
    assert text.padded([7, 8], 2) == ([7, 8], [1, 1])
