"""modeling/data/pretraining_pipeline.py: the corpus read in chunks, sharded over workers, and
written atomically; most through create_pretraining_data.py, as a user runs it."""
import io
import os
import subprocess
import time

import pytest
import tensorflow as tf

from modeling.data import pretraining
from modeling.data import pretraining_pipeline
from modeling.text import tokenization
from conftest import WORDS
from scripts import run_script, script_command, script_env
from test_data_pretraining import RUNS, create, parse


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
    # The file system's order, which the references were made with: TensorFlow 2.21's glob
    # gives it (tf-nightly 2.23's sorts its matches).
    listed = [str(tmp_path / name) for name in os.listdir(tmp_path) if name != "sub.txt"]
    assert ours == listed + [str(tmp_path / "mid.txt")]
    if tf.__version__.startswith("2.21."):
        assert [path for path in tf.io.gfile.glob(pattern) if not path.endswith("sub.txt")] == listed


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


@pytest.mark.parametrize("num_workers", [1, 2])
def test_outputs_appear_complete_and_leave_no_temporary_file(tmp_path, num_workers):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the keeper lit the lamp.\na ship passed safely.\nshe walks away.\n\n"
                      "a ship passed.\nthe keeper walks away.\n")
    out = tmp_path / "out"
    outputs = f"{out / 'a.tfrecord'},{out / 'b.tfrecord'}"
    options = pretraining.InstanceOptions(max_seq_length=16, max_predictions_per_seq=3)
    documents, instances = pretraining_pipeline.create_pretraining_data(
        str(corpus), outputs, str(vocab), True, options, 12345, 2, num_workers=num_workers,
        progress_stream=io.StringIO())
    assert documents == 2 and instances > 0
    assert sorted(os.listdir(out)) == ["a.tfrecord", "b.tfrecord"]
    assert len(parse(out / "a.tfrecord")) + len(parse(out / "b.tfrecord")) == instances

    corpus.write_text("\n\n")
    with pytest.raises(ValueError, match="no document with any token"):
        pretraining_pipeline.create_pretraining_data(
            str(corpus), str(out / "c.tfrecord"), str(vocab), True, options, 12345, 2,
            num_workers=num_workers, progress_stream=io.StringIO())
    assert sorted(os.listdir(out)) == ["a.tfrecord", "b.tfrecord"]


def test_a_run_with_workers_exits_right_after_its_last_line(refs, tmp_path):
    """The workers' resource tracker outlives the script's last line and holds its stderr; the
    script must not wait for it to end (it waited 5 s, more than a 2 MB corpus takes)."""
    process = subprocess.Popen(script_command(
        "create_pretraining_data.py", f"--input_file={refs / 'pretraining_data/corpus_dev.txt'}",
        f"--output_file={tmp_path / 'out.tfrecord'}", f"--vocab_file={refs / 'vocab/uncased_vocab.txt'}",
        "--num_workers=2"), stderr=subprocess.PIPE, text=True, env=script_env())
    last_line = None
    for line in process.stderr:  # to the end of the pipe: every process holding it has exited
        last_line, last_line_at = line, time.monotonic()
    gap = time.monotonic() - last_line_at
    assert process.wait(timeout=60) == 0
    assert "Wrote" in last_line and gap < 1.0, (gap, last_line)
