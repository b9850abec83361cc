"""modeling/tasks/ner.py: NER's input pipeline, loss and predictions."""
import collections
import random
import types

import numpy as np
import pytest
import tensorflow as tf

from modeling.data import ner as ner_data
from modeling.models.ner import BertTokenClassifier
from modeling.tasks import ner
from modeling.text import tokenization
from modeling.training.trainer import Trainer


def test_dataset_reads_what_the_data_module_writes(word_tokenizer, tmp_path):
    sentences = [ner_data.Sentence(["the", "keeper", "walks"], ["O", "B-PER", "O"],
                                   ["the", "keeper", "walks"]),
                 ner_data.Sentence(["a", "ship", "passed", "safely", "."] * 2, ["O"] * 10,
                                   ["x"] * 10)]
    labels = ner_data.get_labels(sentences)
    features = ner_data.convert_sentences(sentences, labels, 7, word_tokenizer)
    assert len(features) > 2  # the long sentence is cut into windows, word ids -1 between
    path = str(tmp_path / "eval.tf_record")
    assert ner_data.write_features(features, path) == len(features)
    batches = list(ner.ner_dataset(path, 2, 7, is_training=False))
    batch = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    for name in ("input_ids", "input_mask", "label_ids", "label_weights", "word_ids"):
        np.testing.assert_array_equal(batch[name], [getattr(f, name) for f in features], name)
    np.testing.assert_array_equal(batch["token_type_ids"], [f.segment_ids for f in features])
    np.testing.assert_array_equal(batch["sentence_index"],
                                  [[f.sentence_index] for f in features])
    assert batch["label_weights"].dtype == np.float32


def test_the_loss_is_divided_by_the_labelled_tokens_of_the_global_batch(tiny_config,
                                                                        tiny_inputs):
    task = ner.NerTask("unused")
    task.labels = ["B-PER", "I-PER", "O", "X"]  # as `read` sets them from the training file
    trainer = Trainer(task, tf.distribute.get_strategy(), tiny_config, 1e-3, 10, 1)
    labels = np.array([[0, 1, 2, 3, 0, 1, 2]] * 3)
    weights = np.array([[0, 1, 1, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0], [0] * 7], "float32")
    batch = dict(tiny_inputs, label_ids=labels, label_weights=weights)
    outputs = trainer.model(batch)
    loss, metrics = task.replica_loss(outputs, batch, tf.constant(6.0))
    # The model's loss is over this batch's 3 labelled tokens; the global batch has 6.
    np.testing.assert_allclose(loss, float(outputs["loss"]) * 3 / 6, rtol=1e-6)
    correct = (outputs["predictions"].numpy() == labels) * weights
    assert float(metrics["correct"]) == correct.sum() and float(metrics["weight"]) == 3.0
    assert task.loop_scalars({"loss": 1.0, "correct": 3.0, "weight": 4.0}, 2) == {
        "loss": 0.5, "token_accuracy": 0.75}


def test_eval_is_logged_beside_tagging_every_word_o():
    gold = [["B-PER", "I-PER", "O", "O"], ["O", "B-LOC"]]
    results = {"eval_f1": 66.6667, "eval_accuracy": 83.3333, "eval_loss": 0.2}
    assert ner.against_majority_tag(results, gold) == (
        "eval_f1 66.6667 (always guessing the majority tag, O: 0.0000); eval_accuracy 83.3333 "
        "(always guessing the majority tag, O: 50.0000)")  # conlleval's percentages


def test_predicted_windows_and_the_weighted_loss():
    class Predicted:
        def predict(self, dataset, names, lengths, **progress):
            # Every per-position array comes back at max_seq_length (dynamic padding).
            assert lengths == {name: 2 for name in names}
            return {"predictions": np.array([[0, 2], [1, 1]]),
                    "per_token_loss": np.array([[0.5, 0.0], [1.0, 2.0]]),
                    "label_weights": np.array([[1.0, 0.0], [1.0, 1.0]])}
    predictions, loss_sum, weight_sum = ner.predict_windows(Predicted(), None, 2)
    np.testing.assert_array_equal(predictions, [[0, 2], [1, 1]])
    assert (loss_sum, weight_sum) == (3.5, 3.0)


def test_training_batches_mix_the_whole_file_not_neighbouring_documents(data, tmp_path):
    """CoNLL-2003 is stored document by document; the pipeline's 100-record shuffle buffer
    alone would give batches of a few neighbouring documents, in file order. The task
    shuffles the sentences once by the run's seed before writing them: one order for a seed,
    another for another seed, and the default seed's is the original run_squad's."""
    data_dir = tmp_path / "conll"
    data_dir.mkdir()
    documents = (data / "conll2003" / "train.txt").read_text().split("-DOCSTART-")
    (data_dir / "train.txt").write_text("-DOCSTART-".join(documents[:200]))  # 200 documents
    tokenizer = tokenization.FullTokenizer(str(data / "vocab/bert-base-uncased/vocab.txt"))
    tasks = []
    for seed in (12345, 12345, 7):
        tasks.append(ner.NerTask(str(data_dir)))
        tasks[-1].read(types.SimpleNamespace(do_train=True, do_eval=False, do_predict=False,
                                             max_seq_length=128, seed=seed), tokenizer)
    in_file = ner_data.read_split(str(data_dir), "train")
    orders = [file_positions(in_file, task.train) for task in tasks]
    assert sorted(orders[0]) == list(range(len(in_file)))
    assert orders[0] == orders[1]  # the same for a seed
    assert orders[0] != orders[2]  # restarts with other seeds train in other orders
    original = list(in_file)
    random.Random(12345).shuffle(original)  # the original run_squad's shuffle
    assert [sentence.lines for sentence in tasks[0].train] == [
        sentence.lines for sentence in original]
    order = orders[0]

    path = str(tmp_path / "train.tf_record")
    ner_data.write_features(tasks[0].train_features, path)
    spans = []
    for batch in ner.ner_dataset(path, 32, 128, is_training=True, seed=1).take(20):
        lines = [order[i] for i in batch["sentence_index"].numpy()[:, 0]]
        spans.append(max(lines) - min(lines))
    assert np.median(spans) > 0.8 * len(in_file), spans


def file_positions(in_file, sentences):
    """Each of `sentences`' index in `in_file` (equal sentences, as CoNLL has, taken in turn)."""
    positions = collections.defaultdict(list)
    for i, sentence in enumerate(in_file):
        positions[tuple(sentence.lines)].append(i)
    return [positions[tuple(sentence.lines)].pop(0) for sentence in sentences]


def test_doc_stride_sets_the_windows_of_every_split_and_of_the_export(word_tokenizer,
                                                                      tiny_config, tmp_path):
    sentence = "".join(f"{word} O\n" for word in ("the keeper walks away safely . " * 3).split())
    for name in ("train.txt", "valid.txt", "test.txt"):
        (tmp_path / name).write_text(sentence)
    options = types.SimpleNamespace(do_train=True, do_eval=True, do_predict=True,
                                    max_seq_length=8, do_lower_case=True, seed=1,
                                    vocab_file=str(tmp_path / "words_vocab.txt"))  # the fixture's
    # 18 words of one piece, windows of 6 words starting 2 words apart, or half a window (3).
    for doc_stride, firsts in ((None, [0, 3, 6, 9, 12]), (2, [0, 2, 4, 6, 8, 10, 12])):
        task = ner.NerTask(str(tmp_path), doc_stride=doc_stride)
        task.read(options, word_tokenizer)
        for features in (task.train_features, task.dev[1], task.test[1]):
            assert [f.word_ids[1] for f in features] == firsts
    context = types.SimpleNamespace(options=options, trainer=types.SimpleNamespace(
        model=BertTokenClassifier(tiny_config, 1)))
    assert task.export_module(context).doc_stride == 2


@pytest.mark.parametrize("doc_stride", [0, 6])
def test_a_doc_stride_outside_the_window_is_refused(doc_stride):
    options = types.SimpleNamespace(max_seq_length=8)  # windows of 6 pieces
    with pytest.raises(ValueError, match=rf"^--doc_stride={doc_stride} must be at least 1 and "
                                         r"below the 6 pieces of a window \(--max_seq_length=8"):
        ner.NerTask("data", doc_stride=doc_stride).check(options, None)
    ner.NerTask("data", doc_stride=5).check(options, None)
    ner.NerTask("data").check(options, None)
