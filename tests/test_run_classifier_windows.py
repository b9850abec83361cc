"""run_classifier.py on documents longer than a window (--doc_stride): Hyperpartisan's XML
files, one prediction per document from the script and from its export, and the one-line
refusals of what windows cannot read."""
import re

import numpy as np
import pytest

from modeling.data import classifier as classifier_data, windows
from modeling.evaluation import baseline
from modeling.text import tokenization
from scripts import run_script
from serving import read_features, serve, serve_once
from test_run_classifier import (SEQ, classifier_flags, read_results, read_test_results,
                                 require_shared, write_config)
from conftest import REFS

STRIDE = 9  # windows of SEQ - 2 = 22 pieces, 9 apart
WORDS = ("the senator said that voters in the city would decide on the new tax plan before the "
         "storm reached the coast while critics called it a disgrace").split()


def write_articles(directory, count=29):
    """Articles 0000000 to 0000028 in the task's XML (23 train, 2 dev, 4 test by
    `hyperpartisan.split_of`), of 1 to 60 words, with markup; label: "disgrace" is in it."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    articles, truth = [], []
    for index in range(count):
        words = list(rng.choice(WORDS[:-1], size=int(rng.integers(1, 61))))
        hyper = index % 3 == 0
        if hyper:
            words.insert(int(rng.integers(0, len(words) + 1)), "disgrace")
        half = len(words) // 2
        body = (f"<p>{' '.join(words[:half])} <a href=\"https://x.org/?a=1&amp;b=2\">link</a>"
                f"</p><p>{' '.join(words[half:])} &amp; more</p>")
        article_id = f"{index:07d}"
        articles.append(f'\t<article id="{article_id}" title="Title {index}">\n{body}\n'
                        f'</article>\n')
        truth.append(f'\t<article hyperpartisan="{str(hyper).lower()}" id="{article_id}" '
                     f'labeled-by="article"/>\n')
    (directory / "articles-byarticle-29.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><articles>\n' + "".join(articles)
        + "</articles>\n", "utf-8")
    (directory / "ground-truth-byarticle-29.xml").write_text(
        '<?xml version="1.0" ?>\n<articles>\n' + "".join(truth) + "</articles>\n", "utf-8")
    return directory


def window_counts(examples):
    tokenizer = tokenization.FullTokenizer(str(REFS / "vocab/uncased_vocab.txt"), True)
    return [len(windows.spans(len(tokenizer.tokenize(example.text_a)), SEQ - 2, STRIDE))
            for example in examples]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One windowed run: train, eval, predict and export on the articles."""
    require_shared()
    root = tmp_path_factory.mktemp("windows")
    data, config = write_articles(root / "data"), write_config(root / "config.json")
    process = run_script("run_classifier.py", *classifier_flags(
        data, config, root / "out", "--do_train", "--do_eval", "--do_predict",
        f"--doc_stride={STRIDE}", f"--export_dir={root / 'serving'}", "--train_batch_size=8",
        "--num_train_epochs=1", task="hyperpartisan"))
    splits = classifier_data.get_processor("hyperpartisan").articles(str(data))
    return root, splits, process


@pytest.fixture(scope="module")
def served(trained):
    """The export's answers, in one TensorFlow-only process: {name: {loader: outputs}}."""
    root, splits, _ = trained
    version = next(p for p in (root / "serving").iterdir() if p.name.isdigit())
    requests = {
        "windows": ("ids", read_features(root / "out/predict.tf_record", SEQ)),
        "test": ("serving_default", {"text_a": [e.text_a for e in splits["test"]]}),
        "dev": ("serving_default", {"text_a": [e.text_a for e in splits["dev"]]}),
    }
    refused = ("serving_default", {"text_a": ["the senator", " \t"]})  # the session's error
    answers = serve(version, list(requests.values()), [refused])
    return version, dict(zip([*requests, "empty"], answers))


def test_the_split_and_the_windows_are_the_documented_ones(trained):
    _, splits, process = trained
    assert {split: len(examples) for split, examples in splits.items()} == {
        "train": 23, "dev": 2, "test": 4}
    counts = {split: window_counts(examples) for split, examples in splits.items()}
    assert max(counts["test"]) > 3 and min(counts["test"]) >= 1
    assert (f"Training on 23 documents ({sum(counts['train'])} windows)" in process.stderr)
    assert f"predict: 4 documents in {sum(counts['test'])} windows" in process.stderr
    majority, share = baseline.majority(
        ["false", "true"].index(example.label) for example in splits["dev"])
    assert re.search(rf"Eval: eval_accuracy [0-9.]+ \(always guessing the majority label, "
                     rf"{['false', 'true'][majority]}: {share:.4f}\); eval_f1 [0-9.]+ \(always "
                     rf"guessing the majority label, ", process.stderr)


def test_predict_writes_one_row_per_document_the_mean_of_its_windows(trained, served):
    root, splits, _ = trained
    rows = read_test_results(root / "out/test_results.tsv")
    assert rows.shape == (len(splits["test"]), 2)
    np.testing.assert_allclose(rows.sum(axis=1), 1, atol=1e-6)
    # The windows themselves, through the export's `ids` signature: the rows are their means.
    probabilities = np.asarray(served[1]["windows"]["session"]["probabilities"])
    counts = window_counts(splits["test"])
    assert len(probabilities) == sum(counts) > len(rows)
    means = [part.mean(axis=0) for part in np.split(probabilities, np.cumsum(counts)[:-1])]
    np.testing.assert_allclose(rows, means, atol=1e-5)


def test_export_answers_each_document_as_do_predict_and_eval_counts_documents(trained,
                                                                               served):
    """One row per document in and out, by tf.saved_model.load, the session loader and TF
    Serving's C++ loader; the dev documents' answers give eval_results.txt."""
    root, splits, _ = trained
    version, answers = served
    test, dev = answers["test"], answers["dev"]
    test_texts = [example.text_a for example in splits["test"]]
    expected = read_test_results(root / "out/test_results.tsv")
    for loader in ("session", "object_loader"):
        np.testing.assert_allclose(test[loader]["probabilities"], expected, atol=1e-5, rtol=0)
        assert test[loader]["label_ids"] == np.argmax(expected, axis=1).tolist()
        assert test[loader]["labels"] == [("false", "true")[i] for i in test[loader]["label_ids"]]
    status, outputs, stderr = serve_once(version, "serving_default", {"text_a": test_texts})
    assert status == 0, stderr[-3000:]
    np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5, rtol=0)

    labels = np.array([("false", "true").index(example.label) for example in splits["dev"]])
    probabilities = np.asarray(dev["session"]["probabilities"])
    results = read_results(root / "out/eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"}
    assert float(results["eval_accuracy"]) == pytest.approx(
        np.mean(np.argmax(probabilities, axis=1) == labels), abs=1e-9)
    assert float(results["eval_loss"]) == pytest.approx(
        -np.log(probabilities[np.arange(len(labels)), labels]).mean(), abs=1e-5)


def test_the_export_refuses_a_document_without_word_pieces(served):
    error = served[1]["empty"]["session"].get("error", "").replace("\\'", "'")
    assert "input 'text_a' has a document without word pieces (no window to read) at row] [1]" \
        in error


def write_sst2(directory, empty_line=None):
    """SST-2's layout: sentence, label; the dev file's line `empty_line` an empty sentence."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [f"{' '.join(WORDS[:n])}\t{n % 2}\n" for n in range(3, 9)]
    (directory / "train.tsv").write_text("sentence\tlabel\n" + "".join(rows), "utf-8")
    if empty_line:
        rows[empty_line - 2] = "\t1\n"
    (directory / "dev.tsv").write_text("sentence\tlabel\n" + "".join(rows), "utf-8")
    return directory


@pytest.mark.parametrize("stride, empty_line, message", [
    (22, None, "--doc_stride=22 must be at least 1 and below the 22 pieces of a window "
               "(--max_seq_length=24 less [CLS] and [SEP])"),
    (STRIDE, 4, "dev.tsv:4: the document has no word pieces, so no window to classify"),
])  # the other refusals are DocumentClassifierTask.check's, tested in test_tasks_classifier
def test_what_windows_cannot_read_is_a_one_line_error(stride, empty_line, message, tmp_path):
    require_shared()
    config = write_config(tmp_path / "config.json")
    data = write_sst2(tmp_path / "data", empty_line)
    process = run_script("run_classifier.py", *classifier_flags(
        data, config, tmp_path / "out", "--do_train", "--do_eval", f"--doc_stride={stride}",
        task="SST-2"), check=False)
    assert process.returncode == 2
    assert message in process.stderr
    lines = [line for line in process.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and "Traceback" not in process.stderr
    assert not (tmp_path / "out/train.tf_record").exists()  # refused before any work
