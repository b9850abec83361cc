"""The paper's pre-training ablations in create_pretraining_data.py (its Table 8 masking
procedures, Table 5's No NSP and LTR records), run as a user runs it, on real Wikipedia text
(../shared/data/enwiki_2015_extract) turned into its input by wikiextractor_to_text.py."""
import math

import pytest

from conftest import DATA, REFS
from scripts import run_script, wikipedia_text
from test_data_pretraining import parse

TABLE_8 = [(80, 10, 10), (100, 0, 0), (80, 0, 20), (80, 20, 0), (0, 20, 80), (0, 0, 100)]
SLICE_BYTES = 120_000


def create(refs, output, *flags, corpus=None, check=True):
    """create_pretraining_data.py on `corpus` (the original's dev corpus by default)."""
    return run_script("create_pretraining_data.py",
                      f"--input_file={corpus or refs / 'pretraining_data/corpus_dev.txt'}",
                      f"--output_file={output}",
                      f"--vocab_file={refs / 'vocab/uncased_vocab.txt'}", *flags, check=check)


@pytest.fixture(scope="module")
def wikipedia(tmp_path_factory):
    """The first articles of the real extract, about SLICE_BYTES of text, as the scripts'
    input: converted by wikiextractor_to_text.py, cut after a whole article."""
    root = tmp_path_factory.mktemp("wikipedia")
    text = wikipedia_text(root, "AA/wiki_01")
    cut = text.index("\n\n", SLICE_BYTES) + 2
    (root / "slice.txt").write_text(text[:cut], encoding="utf-8")
    return root / "slice.txt"


def test_converter_keeps_every_article_and_drops_the_markup(wikipedia):
    text = (wikipedia.parent / "wiki_01.txt").read_text(encoding="utf-8")
    source = (DATA / "enwiki_2015_extract/AA/wiki_01").read_text(encoding="utf-8")
    assert text.count("\n\n") == source.count("</doc>") == 53  # SOURCE.md's count
    assert "<doc" not in text and "</doc>" not in text
    sentences = [line for line in text.splitlines() if line]
    assert len(sentences) > 2 * source.count("\n")  # paragraphs were split
    assert not any(line.endswith((" Mr.", " Dr.", " St.")) for line in sentences)


def test_converter_refuses_text_that_is_not_wikiextractors(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("One sentence.\nAnother one.\n")
    process = run_script("wikiextractor_to_text.py", f"--input_file={plain}",
                         f"--output_file={tmp_path / 'out.txt'}", check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines()[-1].endswith(
        f"{plain}:1: text outside a <doc>...</doc>; is this WikiExtractor's output?")
    assert not (tmp_path / "out.txt").exists()


def outcome_counts(records, mask_id):
    """(MASK, SAME, RND) counts over the weighted masked positions of every record."""
    counts = [0, 0, 0]
    for record in records:
        for position, label, weight in zip(record["masked_lm_positions"],
                                           record["masked_lm_ids"],
                                           record["masked_lm_weights"]):
            if weight:
                token = record["input_ids"][position]
                counts[0 if token == mask_id else 1 if token == label else 2] += 1
    return counts


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("proportions", TABLE_8, ids=lambda row: "/".join(map(str, row)))
def test_mask_proportions_hold_on_real_text(wikipedia, tmp_path, proportions, workers):
    output = tmp_path / "out.tfrecord"
    create(REFS, output, f"--mask_proportions={','.join(map(str, proportions))}",
           f"--num_workers={workers}", "--dupe_factor=1", corpus=wikipedia)
    counts = outcome_counts(parse(output), mask_id=103)
    total = sum(counts)
    assert total > 3000
    vocab_size = 30522
    mask, same, random_token = (p / 100 for p in proportions)
    # A random token is [MASK] or the original one a time in vocab_size.
    expected = (mask + random_token / vocab_size, same + random_token / vocab_size,
                random_token * (1 - 2 / vocab_size))
    for name, count, p in zip(("MASK", "SAME", "RND"), counts, expected):
        bound = 5 * math.sqrt(p * (1 - p) / total) + 2 / total  # 5 standard errors, 2 counts
        assert abs(count / total - p) <= bound, (name, counts, proportions)


def test_the_default_proportions_are_the_originals(refs, tmp_path):
    create(refs, tmp_path / "default.tfrecord")
    create(refs, tmp_path / "explicit.tfrecord", "--mask_proportions=80,10,10")
    assert (tmp_path / "default.tfrecord").read_bytes() == \
        (tmp_path / "explicit.tfrecord").read_bytes()
    assert parse(tmp_path / "default.tfrecord") == \
        parse(refs / "pretraining_data/dev_wwmFalse.tfrecord")


@pytest.mark.parametrize("value, message", [
    ("50,10,10", "--mask_proportions are three percentages (MASK, SAME, RND) summing to 100, "
                 "got 50,10,10"),
    ("80,20", "--mask_proportions=80,20: expected three percentages MASK,SAME,RND summing to "
              "100, such as 80,10,10"),
    ("80,-10,30", "--mask_proportions are three percentages (MASK, SAME, RND) summing to 100, "
                  "got 80,-10,30"),
])
def test_bad_proportions_are_one_line(refs, tmp_path, value, message):
    process = create(refs, tmp_path / "out.tfrecord", f"--mask_proportions={value}", check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [f"create_pretraining_data.py: error: {message}"]
    assert not (tmp_path / "out.tfrecord").exists()
