"""Tests for modeling/text/tokenization.py.

The golden tests compare every line of ../shared/refs/tokenization/ (outputs of the
original release's `FullTokenizer`, see refs/README.md) with ours, exactly. The unit
tests use tiny vocabularies written to tmp_path.
"""
import json
import pathlib
import subprocess
import sys

import pytest

from modeling.text import tokenization

REFS = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "refs"
MODULE_PATH = pathlib.Path(tokenization.__file__).resolve()

GOLDEN_CASES = [
    ("uncased_lowerTrue.jsonl", "uncased_vocab.txt", True),
    ("cased_lowerFalse.jsonl", "cased_vocab.txt", False),
    ("chinese_lowerTrue.jsonl", "chinese_vocab.txt", True),
]

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##want", "##ed", "want",
              "wa", "runn", "##ing", ",", "low", "##er", "##est"]


def _write(tmp_path, text, name="vocab.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def tiny_vocab_file(tmp_path):
    return _write(tmp_path, "".join(token + "\n" for token in TINY_VOCAB))


# ---------------------------------------------------------------- golden: original release


@pytest.fixture(scope="module")
def refs():
    if not REFS.is_dir():
        pytest.skip(f"{REFS} is absent: the reference outputs live in ../shared beside the repo")
    return REFS


@pytest.fixture(scope="module")
def meta(refs):
    return json.loads((refs / "tokenization" / "meta.json").read_text(encoding="utf-8"))


def _read_rows(path):
    # One JSON object per "\n"-terminated line; the JSON escapes U+0085, U+2028 and U+2029,
    # so a line-based reader sees one row per line.
    with open(path, encoding="utf-8", newline="") as reader:
        return [json.loads(line) for line in reader.read().split("\n") if line]


def _describe(row, ours):
    return (f"line {row['line']}: text {row['text']!r}\n" +
            "".join(f"  {key}: original {row[key]!r}\n"
                    f"  {key}: ours     {ours[key]!r}\n"
                    for key in ("basic_tokens", "tokens", "ids") if row[key] != ours[key]))


@pytest.mark.parametrize("jsonl, vocab_name, do_lower_case", GOLDEN_CASES)
def test_every_line_matches_the_original(refs, meta, jsonl, vocab_name, do_lower_case):
    tokenizer = tokenization.FullTokenizer(refs / "vocab" / vocab_name, do_lower_case)
    rows = _read_rows(refs / "tokenization" / jsonl)
    assert [row["line"] for row in rows] == list(range(meta["num_lines"]))

    mismatches = []
    for row in rows:
        tokens = tokenizer.tokenize(row["text"])
        ours = {"basic_tokens": tokenizer.basic_tokenizer.tokenize(row["text"]),
                "tokens": tokens,
                "ids": tokenizer.convert_tokens_to_ids(tokens)}
        if any(row[key] != ours[key] for key in ours):
            mismatches.append(_describe(row, ours))
    assert not mismatches, (f"{len(mismatches)} of {len(rows)} lines of {jsonl} differ; "
                            "the first ones:\n" + "\n".join(mismatches[:5]))


@pytest.mark.parametrize("jsonl, vocab_name, do_lower_case", GOLDEN_CASES)
def test_totals_match_meta(refs, meta, jsonl, vocab_name, do_lower_case):
    (expected,) = [output for output in meta["outputs"] if output["file"] == jsonl]
    assert (expected["vocab"], expected["do_lower_case"]) == (vocab_name, do_lower_case)
    tokenizer = tokenization.FullTokenizer(refs / "vocab" / vocab_name, do_lower_case)
    assert len(tokenizer.vocab) == expected["vocab_size"]

    tokens = [token for row in _read_rows(refs / "tokenization" / jsonl)
              for token in tokenizer.tokenize(row["text"])]
    assert (len(tokens), tokens.count("[UNK]")) == (expected["tokens"], expected["unk_tokens"])


def test_corpus_txt_gives_the_jsonl_texts(refs, meta):
    # Pitfall 2: the corpus has \r, \x0b, \x0c, \x1c-\x1e, U+0085, U+2028 and U+2029 inside
    # lines, so only a split on "\n" gives the original's lines.
    with open(refs / "tokenization" / "corpus.txt", encoding="utf-8", newline="") as reader:
        contents = reader.read()
    assert contents.endswith("\n")
    lines = contents[:-1].split("\n")
    assert len(lines) == meta["num_lines"]
    assert len(contents.splitlines()) > len(lines), "the corpus no longer tests pitfall 2"
    for jsonl, _, _ in GOLDEN_CASES:
        texts = [row["text"] for row in _read_rows(refs / "tokenization" / jsonl)]
        differing = [i for i, (line, text) in enumerate(zip(lines, texts)) if line != text]
        assert not differing, (f"{jsonl}: corpus.txt line {differing[0]} is "
                               f"{lines[differing[0]]!r}, the JSONL text {texts[differing[0]]!r}")


def test_vocab_files_load_with_the_ids_of_their_provenance(refs):
    uncased = tokenization.load_vocab(refs / "vocab" / "uncased_vocab.txt")
    cased = tokenization.load_vocab(refs / "vocab" / "cased_vocab.txt")
    chinese = tokenization.load_vocab(refs / "vocab" / "chinese_vocab.txt")
    assert [uncased[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "!", "the")] == [
        0, 100, 101, 102, 103, 999, 1996]
    assert [cased[t] for t in ("[UNK]", "!", "the", "The", "Hello")] == [100, 106, 1103, 1109, 8667]
    # Line 344 of the Chinese vocab is U+2028 alone: strip() makes it "", still id 343.
    assert (chinese[""], chinese["<S>"], chinese["!"], len(chinese)) == (343, 104, 106, 21128)


# ---------------------------------------------------------------- WordPiece


def test_wordpiece_splits_greedily_longest_match_first():
    vocab = {"[UNK]": 0, "un": 1, "una": 2, "##aff": 3, "##able": 4, "##ffable": 5}
    tokenizer = tokenization.WordpieceTokenizer(vocab)
    # "una" is the longest prefix, so "un" + "##aff" + "##able" is never tried.
    assert tokenizer.tokenize("unaffable") == ["una", "##ffable"]
    assert tokenizer.tokenize("unaaff unable") == ["una", "##aff", "[UNK]"]


def test_wordpiece_does_not_backtrack():
    # "a" + "##bc" would cover "abc", but the greedy "ab" leaves "##c", which is absent.
    vocab = {"[UNK]": 0, "a": 1, "ab": 2, "##bc": 3}
    assert tokenization.WordpieceTokenizer(vocab).tokenize("abc ab") == ["[UNK]", "ab"]


def test_wordpiece_unknown_word_is_one_unk():
    vocab = {"[UNK]": 0, "want": 1, "##ed": 2}
    tokenizer = tokenization.WordpieceTokenizer(vocab, unk_token="<unk>")
    assert tokenizer.tokenize("wanted xyz wantedx") == ["want", "##ed", "<unk>", "<unk>"]


def test_wordpiece_words_longer_than_the_limit_are_unk():
    vocab = {"[UNK]": 0, "a": 1, "##a": 2}
    tokenizer = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=3)
    assert tokenizer.tokenize("aaa aaaa") == ["a", "##a", "##a", "[UNK]"]
    default = tokenization.WordpieceTokenizer(vocab)
    assert default.tokenize("a" * 200) == ["a"] + ["##a"] * 199
    assert default.tokenize("a" * 201) == ["[UNK]"]


def test_wordpiece_word_results_are_shared_but_immutable():
    tokenizer = tokenization.WordpieceTokenizer({"[UNK]": 0, "un": 1, "##want": 2, "##ed": 3})
    pieces = tokenizer.tokenize_word("unwanted")
    assert pieces == ("un", "##want", "##ed")
    with pytest.raises(AttributeError):
        pieces.append("changed")  # a cached list could be corrupted for every later caller
    assert tokenizer.tokenize("unwanted unwanted") == ["un", "##want", "##ed"] * 2


# ---------------------------------------------------------------- BasicTokenizer


def test_basic_lower_cases_and_strips_accents():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "hello", "!", "how", "are", "you", "?"]
    # NFC and NFD spellings both lose the accent; dotted capital I loses its dot.
    assert tokenizer.tokenize("Héllò He\u0301llo\u0300 İstanbul ÅNGSTRÖM") == [
        "hello", "hello", "istanbul", "angstrom"]
    # Capital sigma lowers by its neighbours within the word: final "ς" (U+03C2) at a word's
    # end, even before punctuation, "σ" (U+03C3) elsewhere and when alone.
    assert tokenizer.tokenize("ΟΔΟΣ ΣΑΣ. Σ ΣΑ") == [
        "οδο\u03c2", "\u03c3α\u03c2", ".", "\u03c3", "\u03c3α"]


def test_basic_keeps_case_and_accents_when_not_lower_casing():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "HeLLo", "!", "how", "Are", "yoU", "?"]
    assert tokenizer.tokenize("Héllò He\u0301llo") == ["Héllò", "He\u0301llo"]


def test_basic_puts_cjk_ideographs_in_words_of_their_own():
    tokenizer = tokenization.BasicTokenizer()
    # Unified (U+4E2D), extension A (U+3400), extension B (U+20000), compatibility (U+F900).
    assert tokenizer.tokenize("ab中文cd 㐀𠀀豈x") == ["ab", "中", "文", "cd", "㐀", "𠀀", "豈", "x"]
    # Kana and Hangul are outside BERT's CJK ranges and stay whole. (Lower-casing would also
    # strip the voicing mark of "が", a nonspacing mark after NFD.)
    cased = tokenization.BasicTokenizer(do_lower_case=False)
    assert cased.tokenize("ひらがなカタカナ 한국어") == ["ひらがなカタカナ", "한국어"]
    assert tokenizer.tokenize("ひらがな") == ["ひらかな"]


def test_basic_removes_control_characters_and_maps_whitespace():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    # NUL, U+FFFD, BEL, ESC, DEL, C1 (U+0085), zero-width space and BOM (Cf) are dropped.
    assert tokenizer.tokenize("a\x00b\ufffdc\x07d\x1be\x7ff\x85g\u200bh\ufeffi") == ["abcdefghi"]
    # Tab, CR, NBSP, ideographic space and U+2028 all separate words.
    assert tokenizer.tokenize("a\tb\rc\u00a0d\u3000e\u2028f") == ["a", "b", "c", "d", "e", "f"]
    # Private use (Co) and unassigned (Cn) code points are not control characters.
    assert tokenizer.tokenize("a\ue000b\uffffc") == ["a\ue000b\uffffc"]


def test_basic_splits_on_punctuation():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    # Non-alphanumeric ASCII counts even where Unicode calls it a symbol ($ + ^ `).
    assert tokenizer.tokenize("a$b+c^d`e") == ["a", "$", "b", "+", "c", "^", "d", "`", "e"]
    # Unicode categories P* split; other symbols (Sc, Sm) do not.
    assert tokenizer.tokenize("x«y»z—w €5 ±2") == ["x", "«", "y", "»", "z", "—", "w", "€5", "±2"]
    assert tokenizer.tokenize("...!?") == [".", ".", ".", "!", "?"]


def test_basic_accepts_utf8_bytes():
    tokenizer = tokenization.BasicTokenizer()
    assert tokenizer.tokenize("Café, s'il".encode("utf-8")) == ["cafe", ",", "s", "'", "il"]


# ---------------------------------------------------------------- FullTokenizer and ids


def test_full_tokenizer_end_to_end(tiny_vocab_file):
    tokenizer = tokenization.FullTokenizer(tiny_vocab_file, do_lower_case=True)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [5, 6, 7, 12, 10, 11]


def test_ids_round_trip(tiny_vocab_file):
    tokenizer = tokenization.FullTokenizer(tiny_vocab_file)
    assert tokenizer.inv_vocab == dict(enumerate(TINY_VOCAB))
    ids = list(range(len(TINY_VOCAB)))[::-1]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens == TINY_VOCAB[::-1]
    assert tokenizer.convert_tokens_to_ids(tokens) == ids
    assert tokenization.convert_tokens_to_ids(tokenizer.vocab, ["low", "##est"]) == [13, 15]
    assert tokenization.convert_ids_to_tokens(tokenizer.inv_vocab, [13, 14]) == ["low", "##er"]
    with pytest.raises(KeyError):
        tokenizer.convert_tokens_to_ids(["lowest"])


def test_whitespace_tokenize():
    assert tokenization.whitespace_tokenize("  a\tb\u2028c \n") == ["a", "b", "c"]
    assert tokenization.whitespace_tokenize(" \t ") == []


def test_convert_to_unicode():
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9\xff!") == "café!"  # bad byte dropped
    text = "already str"
    assert tokenization.convert_to_unicode(text) is text
    with pytest.raises(ValueError, match="int"):
        tokenization.convert_to_unicode(3)
    with pytest.raises(ValueError, match="list"):
        tokenization.convert_to_unicode(["a"])


# ---------------------------------------------------------------- vocabulary files


def test_load_vocab_ids_follow_file_order_and_endings_do_not_matter(tmp_path):
    expected = {"[UNK]": 0, "b": 1, "a": 2}
    lf = tokenization.load_vocab(_write(tmp_path, "[UNK]\nb\na\n", "lf.txt"))
    assert list(lf.items()) == list(expected.items())
    assert tokenization.load_vocab(_write(tmp_path, "[UNK]\nb\na", "no_final.txt")) == expected
    assert tokenization.load_vocab(_write(tmp_path, "[UNK]\r\nb \r\n a\r\n", "crlf.txt")) == expected


def test_load_vocab_does_not_require_special_tokens(tmp_path):
    assert tokenization.load_vocab(_write(tmp_path, "x\n##y\n")) == {"x": 0, "##y": 1}


def test_duplicate_token_names_file_line_and_token(tmp_path):
    path = _write(tmp_path, "[UNK]\nabc\nxyz\nabc\n")
    with pytest.raises(ValueError) as error:
        tokenization.load_vocab(path)
    message = str(error.value)
    assert str(path) in message and "line 4" in message and "'abc'" in message
    assert "line 2" in message  # where it was first seen
    assert "\n" not in message


@pytest.mark.parametrize("contents, line", [
    ("[UNK]\n\nabc\n", 2),
    ("[UNK]\nabc\n  \t\nxyz\n", 3),
    ("[UNK]\nabc\n\n", 3),  # an extra newline at the end is a blank last line
])
def test_blank_line_names_file_and_line(tmp_path, contents, line):
    path = _write(tmp_path, contents)
    with pytest.raises(ValueError, match=f"line {line}: blank") as error:
        tokenization.load_vocab(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("present, missing", [
    (["[CLS]", "[SEP]"], ["[UNK]"]),
    (["[UNK]"], ["[CLS]", "[SEP]"]),
    ([], ["[UNK]", "[CLS]", "[SEP]"]),
])
def test_full_tokenizer_requires_special_tokens(tmp_path, present, missing):
    path = _write(tmp_path, "".join(t + "\n" for t in present + ["hello", "##s"]))
    with pytest.raises(ValueError) as error:
        tokenization.FullTokenizer(path)
    message = str(error.value)
    assert str(path) in message
    assert all(token in message for token in missing)
    assert not any(token in message for token in present)


def test_missing_vocab_file_names_the_path(tmp_path):
    path = tmp_path / "no_such_vocab.txt"
    with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
        tokenization.load_vocab(path)
    with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
        tokenization.FullTokenizer(path)


# ---------------------------------------------------------------- checkpoint casing


@pytest.mark.parametrize("checkpoint, do_lower_case", [
    ("gs://bucket/uncased_L-12_H-768_A-12/bert_model.ckpt", False),
    ("/models/chinese_L-12_H-768_A-12/bert_model.ckpt", False),
    ("/models/cased_L-12_H-768_A-12/bert_model.ckpt", True),
    ("multi_cased_L-12_H-768_A-12/bert_model.ckpt-1000", True),
])
def test_case_mismatch_raises(checkpoint, do_lower_case):
    with pytest.raises(ValueError) as error:
        tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
    message = str(error.value)
    assert checkpoint in message
    assert f"--do_lower_case={do_lower_case}" in message
    assert f"--do_lower_case={not do_lower_case}" in message


@pytest.mark.parametrize("checkpoint, do_lower_case", [
    ("uncased_L-12_H-768_A-12/bert_model.ckpt", True),
    ("/models/cased_L-24_H-1024_A-16/bert_model.ckpt", False),
    ("/models/my_own_model/bert_model.ckpt", False),  # unknown names are not checked
    ("/models/uncased_L-12_H-768_A-12/model.ckpt", False),  # nor other file names
    (None, False),
    ("", True),
])
def test_case_match_or_unknown_passes(checkpoint, do_lower_case):
    assert tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint) is None


# ---------------------------------------------------------------- purity


def test_module_imports_neither_tensorflow_nor_numpy():
    # Load the file alone, so that the package's __init__ (which imports the model) is not run.
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('tokenization', {str(MODULE_PATH)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(sorted(m for m in ('tensorflow', 'numpy', 'keras') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
