"""run_ner.py end to end on invented CoNLL-format files (IOB1, as the original CoNLL-2003
release), and its SavedModel tagging words in a process with only TensorFlow."""
import json
import re

import pytest

from conftest import DATA
from modeling.data import ner
from modeling.text import tokenization
from scripts import run_on_logical_cpus, run_script
from serving import assert_same_outputs, serve

SENTENCES = [  # invented, IOB1: an entity starts with I-, B- only between two of one type
    [("Mara", "I-PER"), ("Quill", "I-PER"), ("sailed", "O"), ("to", "O"),
     ("Port", "I-LOC"), ("Elwin", "I-LOC"), (".", "O")],
    [("The", "O"), ("Harbour", "I-ORG"), ("Guild", "I-ORG"), ("met", "O"), ("Tobias", "I-PER"),
     ("in", "O"), ("Zürich", "I-LOC"), ("Vienna", "B-LOC"), ("yesterday", "O"), (".", "O")],
    [("Jürgen", "I-PER"), ("visited", "O"), ("the", "O"), ("U.S.", "I-LOC"), ("on", "O"),
     ("1996-08-22", "O"), ("with", "O"), ("☃", "O"), ("Nordwind", "I-ORG"), ("GmbH", "I-ORG"),
     ("and", "O"), ("many", "O"), ("other", "O"), ("travellers", "O"), ("from", "O"),
     ("Lisbon", "I-LOC"), ("and", "O"), ("Oslo", "I-LOC"), (".", "O")],
]


CONFIG = {"vocab_size": 28996, "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": 64,
          "type_vocab_size": 2}
DOC_STRIDE = 5


def write_conll(directory, copies=4):
    directory.mkdir(parents=True, exist_ok=True)

    def text(count):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for sentence in SENTENCES * count:
            lines += [f"{word} NNP B-NP {tag}" for word, tag in sentence] + [""]
        return "\n".join(lines)
    (directory / "train.txt").write_text(text(copies), "utf-8")
    (directory / "valid.txt").write_text(text(1), "utf-8")
    (directory / "test.txt").write_text(text(1), "utf-8")
    return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    vocab = DATA / "vocab/bert-base-cased/vocab.txt"
    if not vocab.exists():
        pytest.skip(f"{vocab} is absent: the data lives in ../shared beside the project")
    root = tmp_path_factory.mktemp("ner")
    (root / "config.json").write_text(json.dumps(CONFIG))
    data = write_conll(root / "data")
    # 16 tokens per window: the third sentence (about 30 tokens) needs several, DOC_STRIDE
    # pieces apart (half a window would be 7).
    process = run_script(
        "run_ner.py", f"--data_dir={data}", f"--bert_config_file={root / 'config.json'}",
        f"--vocab_file={vocab}", f"--output_dir={root / 'out'}", "--max_seq_length=16",
        f"--doc_stride={DOC_STRIDE}",
        "--train_batch_size=4", "--eval_batch_size=3", "--predict_batch_size=3",
        "--learning_rate=1e-3", "--num_train_epochs=3", "--save_checkpoints_steps=5",
        "--iterations_per_loop=4", "--do_train", "--do_eval", "--do_predict",
        f"--export_dir={root / 'serving'}")
    return root, process


def _columns(path):
    sentences, current = [], []
    for line in path.read_text("utf-8").split("\n"):
        if line:
            current.append(line.split(" "))
        elif current:
            sentences.append(current)
            current = []
    return sentences + ([current] if current else [])


def test_outputs_keep_every_word_with_a_predicted_tag(trained):
    root, process = trained
    results = dict(line.split(" = ") for line in
                   (root / "out/eval_results.txt").read_text().splitlines())
    for key in ("eval_precision", "eval_recall", "eval_f1", "eval_accuracy", "eval_loss",
                "global_step", "eval_f1_PER", "eval_f1_LOC", "eval_f1_ORG"):
        assert key in results, key
    assert 0 <= float(results["eval_f1"]) <= 100
    tags = [tag for sentence in SENTENCES for _, tag in sentence]
    assert (f"Eval: eval_f1 {float(results['eval_f1']):.4f} (always guessing the majority tag, "
            f"O: 0.0000); eval_accuracy {float(results['eval_accuracy']):.4f} (always guessing "
            f"the majority tag, O: {100 * tags.count('O') / len(tags):.4f})") in process.stderr
    assert "Tags (iob1 in the files, IOB2 inside)" in process.stderr
    assert re.search(r"step \d+/\d+: loss .*, examples_per_second [0-9.]+, elapsed",
                     process.stderr)  # windows/s, as every task's progress shows
    for name in ("eval_predictions.txt", "test_predictions.txt"):
        written = _columns(root / "out" / name)
        assert [[row[0] for row in s] for s in written] == [[w for w, _ in s]
                                                           for s in SENTENCES], name
        assert all(len(row) == 5 for s in written for row in s)  # input columns + prediction
        tags = [[row[-1] for row in s] for s in written]
        labels = {"O", "I-PER", "I-LOC", "I-ORG", "B-LOC"}  # written back in IOB1
        assert {t for s in tags for t in s} <= labels, name


def test_savedmodel_tags_each_word_as_run_ner(trained):
    """Through tf.saved_model.load and a session fed and fetched by tensor name (TF Serving's
    way), in a process that imports only tensorflow and tensorflow_text; the third sentence
    is read in several windows, DOC_STRIDE pieces apart, as run_ner.py reads it."""
    root, _ = trained
    tokenizer = tokenization.FullTokenizer(str(DATA / "vocab/bert-base-cased/vocab.txt"), False)
    sentence = ner.Sentence([w for w, _ in SENTENCES[2]], ["O"] * len(SENTENCES[2]), [])
    assert len(ner.convert_sentence(sentence, ["O"], 16, tokenizer, DOC_STRIDE)) >= 3
    version = next(p for p in (root / "serving").iterdir() if p.name.isdigit())
    texts = [" ".join(w for w, _ in s) for s in SENTENCES]
    (served,) = serve(version, [("serving_default", {"text": texts})])
    assert_same_outputs(served["session"], served["object_loader"])
    assert served["session"]["num_words"] == [7, 10, 19]
    predicted = [[row[-1] for row in s] for s in _columns(root / "out/test_predictions.txt")]
    for row, tags, count in zip(served["session"]["tags"], predicted,
                                served["session"]["num_words"]):
        # The export speaks IOB2, the file the data's IOB1. Compared in IOB1: a predicted I-
        # that begins an entity (a model may predict one) reads back from IOB1 as B-.
        assert ner.to_iob1(row[:count]) == tags


def test_a_doc_stride_not_below_the_window_is_one_line_and_exit_2(tmp_path):
    """Refused before any data is read (--doc_stride=0 too: test_tasks_ner)."""
    vocab = DATA / "vocab/bert-base-cased/vocab.txt"
    if not vocab.exists():
        pytest.skip(f"{vocab} is absent: the data lives in ../shared beside the project")
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    process = run_script(
        "run_ner.py", f"--data_dir={tmp_path / 'absent'}", f"--vocab_file={vocab}",
        f"--bert_config_file={tmp_path / 'config.json'}", f"--output_dir={tmp_path / 'out'}",
        "--max_seq_length=16", "--doc_stride=14", "--do_eval", check=False)
    assert process.returncode == 2
    assert process.stderr.strip() == (
        "run_ner.py: error: --doc_stride=14 must be at least 1 and below the 14 pieces of a "
        "window (--max_seq_length=16 less [CLS] and [SEP])")


def test_mirrored_on_two_logical_cpus_equals_one_device(trained, tmp_path):
    """The loss is divided by the labelled tokens of the global batch, so two replicas make
    one device's update; without dropout the tags and scores must agree."""
    root, _ = trained
    config = json.loads((root / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (tmp_path / "config.json").write_text(json.dumps(config))
    flags = [f"--data_dir={root / 'data'}", f"--bert_config_file={tmp_path / 'config.json'}",
             f"--vocab_file={DATA / 'vocab/bert-base-cased/vocab.txt'}", "--max_seq_length=16",
             "--train_batch_size=4", "--eval_batch_size=3", "--learning_rate=1e-3",
             "--num_train_epochs=2", "--do_train", "--do_eval"]
    for devices, directory, strategy in ((1, "one", "one_device"), (2, "two", "mirrored")):
        run_on_logical_cpus("run_ner.py", devices, *flags, f"--output_dir={tmp_path / directory}",
                            f"--distribution_strategy={strategy}")
    one, two = (dict(line.split(" = ") for line in
                     (tmp_path / d / "eval_results.txt").read_text().splitlines())
                for d in ("one", "two"))
    assert one.keys() == two.keys()
    for key in one:
        assert float(two[key]) == pytest.approx(float(one[key]), abs=1e-4), key
    assert (tmp_path / "one/eval_predictions.txt").read_text() == (
        tmp_path / "two/eval_predictions.txt").read_text()
