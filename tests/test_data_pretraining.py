import json
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from modeling.data import pretraining
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


def test_single_sentence_documents_get_a_random_next(refs, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the only sentence here\n\nanother lonely line\n")
    create(refs, tmp_path / "o.tfrecord", "--dupe_factor=3", corpus=corpus)
    records = parse(tmp_path / "o.tfrecord")
    assert len(records) == 6
    assert all(record["next_sentence_labels"] == [1] for record in records)
    assert np.all([sum(r["input_mask"]) == sum(1 for x in r["input_ids"] if x) for r in records])
