import pytest

from conftest import ROOT
from modeling.text import tokenization
from modeling.text import vocab_learning
from scripts import run_script


def test_layout_is_googles():
    vocab = vocab_learning.layout(["[UNK]", "a", "b", "a", "##c"], vocab_size=113,
                                  num_unused=105)
    assert vocab[:2] == ["[PAD]", "[unused0]"]
    assert vocab[99:106] == ["[unused98]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused99]",
                             "[unused100]"]
    assert vocab[-3:] == ["a", "b", "##c"] and len(vocab) == 113
    assert vocab_learning.layout(["a", "b", "c"], vocab_size=112, num_unused=105)[-2:] == \
        ["a", "b"]


def test_words_are_split_by_the_original_tokenizer():
    counts = vocab_learning.count_words(["Héllo, WORLD!", "hello"], do_lower_case=True)
    assert counts == {"hello": 2, ",": 1, "world": 1, "!": 1}


def test_learned_vocabulary_tokenizes_its_corpus(tmp_path):
    corpus = ROOT / "sample_data/sample_text.txt"
    output = tmp_path / "vocab.txt"
    run_script("build_vocab.py", f"--input_file={corpus}", f"--output_file={output}",
               "--vocab_size=150", "--num_unused=5", "--min_count=1")
    tokens = output.read_text(encoding="utf-8").splitlines()
    assert 100 < len(tokens) <= 150 and len(set(tokens)) == len(tokens)
    assert tokens[:10] == ["[PAD]"] + [f"[unused{i}]" for i in range(5)] + \
        ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert any(token.startswith("##") for token in tokens)
    tokenizer = tokenization.FullTokenizer(str(output), do_lower_case=True)
    pieces = tokenizer.tokenize(corpus.read_text(encoding="utf-8"))
    assert len(pieces) > 300 and "[UNK]" not in pieces


@pytest.mark.parametrize("flags, message", [
    (["--vocab_size=10"], "leaves no room for learned tokens"),
    (["--input_file=/nonexistent.txt"], "matches no file"),
])
def test_bad_flags_are_one_line_errors(tmp_path, flags, message):
    process = run_script("build_vocab.py", f"--input_file={ROOT / 'sample_data/sample_text.txt'}",
                         f"--output_file={tmp_path / 'v.txt'}", *flags, check=False)
    assert process.returncode == 2 and message in process.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "v.txt").exists()
