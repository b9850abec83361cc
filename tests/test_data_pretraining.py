import json
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from modeling.data import pretraining
from modeling.data import pretraining_pipeline
from modeling.text import tokenization
from scripts import run_script

RUNS = {  # the reference runs of ../shared/refs/pretraining_data/ and their flags
    "dev_wwmFalse": [],
    "dev_wwmTrue": ["--do_whole_word_mask=True"],
    "dev_nondefault": ["--max_seq_length=64", "--max_predictions_per_seq=10",
                       "--masked_lm_prob=0.2", "--dupe_factor=3", "--short_seq_prob=0.3",
                       "--random_seed=99"],
}


def parse(path):
    """Every Example of a TFRecord file as {feature: list}, read by TensorFlow (CRCs checked)."""
    records = []
    for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        features = tf.train.Example.FromString(raw).features.feature
        records.append({name: list(feature.int64_list.value or feature.float_list.value)
                        for name, feature in features.items()})
    return records


def create(refs, output, *flags, corpus=None):
    return run_script("create_pretraining_data.py",
                      f"--input_file={corpus or refs / 'pretraining_data/corpus_dev.txt'}",
                      f"--output_file={output}",
                      f"--vocab_file={refs / 'vocab/uncased_vocab.txt'}", *flags)


@pytest.mark.parametrize("run", sorted(RUNS))
def test_records_equal_the_originals(refs, tmp_path, run):
    create(refs, tmp_path / "out.tfrecord", *RUNS[run])
    ours, theirs = parse(tmp_path / "out.tfrecord"), parse(refs / f"pretraining_data/{run}.tfrecord")
    assert len(ours) == len(theirs)
    for index, (mine, reference) in enumerate(zip(ours, theirs)):
        assert mine == reference, f"record {index} differs"
    rows = [json.loads(line) for line in open(refs / f"pretraining_data/{run}.jsonl")]
    assert [r["features"]["next_sentence_labels"][0] for r in rows] == \
        [r["next_sentence_labels"][0] for r in ours]


def test_output_files_take_instances_round_robin(refs, tmp_path):
    outputs = [tmp_path / f"part{i}.tfrecord" for i in range(3)]
    create(refs, ",".join(map(str, outputs)), *RUNS["dev_nondefault"])
    reference = parse(refs / "pretraining_data/dev_nondefault.tfrecord")
    for i, path in enumerate(outputs):
        assert parse(path) == reference[i::3]


def test_workers_are_deterministic_for_each_n(refs, tmp_path):
    create(refs, tmp_path / "w2a.tfrecord", "--num_workers=2")
    create(refs, tmp_path / "w2b.tfrecord", "--num_workers=2")
    assert (tmp_path / "w2a.tfrecord").read_bytes() == (tmp_path / "w2b.tfrecord").read_bytes()
    records = parse(tmp_path / "w2a.tfrecord")
    assert records != parse(refs / "pretraining_data/dev_wwmFalse.tfrecord")
    assert 1400 < len(records) < 1800  # about as many as one worker makes
    for record in records:
        assert len(record["input_ids"]) == 128 and len(record["masked_lm_ids"]) == 20
        assert sum(record["masked_lm_weights"]) >= 1


def test_streaming_output_does_not_depend_on_workers(refs, tmp_path):
    chunk = "--streaming_chunk_mb=0.01"  # the 50 kB corpus in about five chunks
    create(refs, tmp_path / "s1.tfrecord", chunk)
    create(refs, tmp_path / "s2.tfrecord", chunk, "--num_workers=2")
    assert (tmp_path / "s1.tfrecord").read_bytes() == (tmp_path / "s2.tfrecord").read_bytes()
    assert len(parse(tmp_path / "s1.tfrecord")) > 1000


def test_globs_list_files_in_the_originals_order(tmp_path):
    for name in ("zeta", "b9", "B2", "mid", "alpha", "b10"):
        (tmp_path / f"{name}.txt").write_text("x\n")
    (tmp_path / "sub.txt").mkdir()
    pattern = str(tmp_path / "*.txt")
    ours = pretraining_pipeline.expand_input_patterns(f"{pattern},{tmp_path / 'mid.txt'}")
    files = [path for path in tf.io.gfile.glob(pattern) if not path.endswith("sub.txt")]
    assert ours == files + [str(tmp_path / "mid.txt")]


def test_chunks_cut_only_at_blank_lines(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("one\ntwo\n\nthree\nfour\n\nfive\n")
    second.write_text("six\n\nseven\n")
    chunks = pretraining_pipeline.plan_chunks([str(first), str(second)], 5)
    texts = [[text for text, _ in pretraining_pipeline.read_lines(chunk)] for chunk in chunks]
    assert texts == [["one", "two", ""], ["three", "four", ""], ["five", "six", ""], ["seven"]]
    assert chunks[2][1].first_line == 1 and chunks[1][0].first_line == 4


def test_lines_split_like_the_original_reader(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes("a\rb\nc\r\n\x0bd\u0085e\n\u00a0\nlast".encode("utf-8"))
    lines = [text for text, _ in pretraining_pipeline.read_lines(
        pretraining_pipeline.whole_files([str(path)]))]
    assert lines == ["ab", "c", "\x0bd\u0085e", "\u00a0", "last"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nab\nc\nde\nlast\n")
    tokenizer = tokenization.FullTokenizer(str(vocab))
    # VT and U+0085 are control characters, dropped inside the word ("de"); "\u00a0" alone
    # strips to nothing: a document break, as in the original.
    assert pretraining.read_documents(lines, tokenizer) == [[[5], [6], [7]], [[8]]]


def test_the_same_calls_as_python_random(refs):
    """Our shortcuts must draw exactly what random.Random.randint and shuffle draw."""
    tokenizer = tokenization.FullTokenizer(str(refs / "vocab/uncased_vocab.txt"))
    maker = pretraining.InstanceMaker(tokenizer.vocab, pretraining.InstanceOptions(),
                                           random.Random(7))
    reference = random.Random(7)
    for low, high in [(0, 0), (1, 5), (2, 125), (0, 30521)] * 50:
        assert maker._randint(low, high) == reference.randint(low, high)
    for size in (0, 1, 2, 7, 100, 1000):
        ours, theirs = list(range(size)), list(range(size))
        maker._shuffle(ours)
        reference.shuffle(theirs)
        assert ours == theirs
    assert maker.rng.random() == reference.random()


@pytest.mark.parametrize("flags, message", [
    (["--input_file=/nonexistent/*.txt"], "pattern '/nonexistent/\\*.txt' matches no file"),
    (["--max_seq_length=4"], "max_seq_length must be at least 5"),
    (["--masked_lm_prob=0"], "masked_lm_prob must be in"),
    (["--num_workers=0"], "num_workers must be at least 1"),
    (["--vocab_file=/nonexistent/vocab.txt"], "/nonexistent/vocab.txt"),
])
def test_bad_flags_are_one_line_errors(refs, tmp_path, flags, message):
    process = run_script(
        "create_pretraining_data.py",
        f"--input_file={refs / 'pretraining_data/corpus_dev.txt'}",
        f"--output_file={tmp_path / 'o.tfrecord'}",
        f"--vocab_file={refs / 'vocab/uncased_vocab.txt'}", *flags, check=False)
    assert process.returncode == 2
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith("create_pretraining_data.py: error:")
    assert re.search(message, last), last
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("content, message", [
    (b"fine line\n\nbad \xff line\n", "corpus.txt:3: not valid UTF-8"),
    (b"\n\n  \n", "no document with any token"),
])
def test_bad_corpora_are_one_line_errors_and_leave_no_file(refs, tmp_path, content, message):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    out = tmp_path / "out"
    process = run_script("create_pretraining_data.py", f"--input_file={corpus}",
                         f"--output_file={out / 'o.tfrecord'}",
                         f"--vocab_file={refs / 'vocab/uncased_vocab.txt'}", check=False)
    assert process.returncode == 2
    assert message in process.stderr.strip().splitlines()[-1]
    assert not out.exists() or not list(out.iterdir())


def test_single_sentence_documents_get_a_random_next(refs, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the only sentence here\n\nanother lonely line\n")
    create(refs, tmp_path / "o.tfrecord", "--dupe_factor=3", corpus=corpus)
    records = parse(tmp_path / "o.tfrecord")
    assert len(records) == 6
    assert all(record["next_sentence_labels"] == [1] for record in records)
    assert np.all([sum(r["input_mask"]) == sum(1 for x in r["input_ids"] if x) for r in records])
