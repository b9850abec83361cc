"""modeling/tasks/classifier.py: the classifier's input pipeline, loss, metrics and outputs."""
import re

import numpy as np
import pytest
import tensorflow as tf

from modeling.data import classifier as classifier_data
from modeling.tasks import classifier
from modeling.training.trainer import Trainer

EXAMPLES = [classifier_data.InputExample("0", "the keeper lit the lamp", "a ship passed", "b"),
            classifier_data.InputExample("1", "she walks away", None, "a"),
            classifier_data.PaddingInputExample()]


@pytest.mark.parametrize("label_list, labels", [(["a", "b"], [1, 0, 0]), ([], [2.5, 0.25, 0.0])])
def test_dataset_reads_what_the_data_module_writes(word_tokenizer, tmp_path, label_list,
                                                   labels):
    examples = EXAMPLES if label_list else [
        classifier_data.InputExample(e.guid, e.text_a, e.text_b, str(label))
        for e, label in zip(EXAMPLES[:2], labels)] + EXAMPLES[2:]
    path = str(tmp_path / "eval.tf_record")
    assert classifier_data.write_features(examples, label_list, 11, word_tokenizer, path) == 3
    batches = list(classifier.classifier_dataset(path, 2, 11, regression=not label_list,
                                                 is_training=False))
    batch = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    expected = [classifier_data.convert_single_example(e, label_list, 11, word_tokenizer)
                for e in examples]
    np.testing.assert_array_equal(batch["input_ids"], [f.input_ids for f in expected])
    np.testing.assert_array_equal(batch["input_mask"], [f.input_mask for f in expected])
    np.testing.assert_array_equal(batch["token_type_ids"], [f.segment_ids for f in expected])
    np.testing.assert_array_equal(batch["label_ids"], labels)
    assert batch["label_ids"].dtype == (np.float32 if not label_list else np.int32)
    np.testing.assert_array_equal(batch["is_real_example"], [1, 1, 0])
    np.testing.assert_array_equal(batch["example_index"], [0, 1, 2])


class _Predicted:
    """A trainer whose `predict` returns fixed arrays (the evaluation's input)."""

    def __init__(self, **outputs):
        self.outputs, self.global_step = outputs, 7

    def predict(self, dataset, names, **progress):
        return {name: np.asarray(self.outputs[name]) for name in names}


def test_the_loss_is_the_replicas_share_of_the_global_batch(tiny_config, tiny_inputs):
    task = classifier.ClassifierTask("unused", "mnli")  # 3 labels
    trainer = Trainer(task, tf.distribute.get_strategy(), tiny_config, 1e-3, 10, 1)
    batch = dict(tiny_inputs, label_ids=np.array([0, 2, 1]))
    outputs = trainer.model(batch)
    loss, metrics = task.replica_loss(outputs, batch, tf.constant(6.0))
    np.testing.assert_allclose(loss, float(outputs["loss"]) / 2, rtol=1e-6)  # 3 of 6 examples
    predictions = np.argmax(outputs["logits"], -1)
    assert float(metrics["correct"]) == np.sum(predictions == [0, 2, 1])
    assert float(metrics["examples"]) == 3
    assert task.loop_scalars({"loss": 3.0, "correct": 3.0, "examples": 4.0}, 2) == {
        "loss": 1.5, "accuracy": 0.75}


def test_a_regression_loss_is_the_squared_error(tiny_config, tiny_inputs):
    task = classifier.ClassifierTask("unused", "sts-b")  # a regression
    trainer = Trainer(task, tf.distribute.get_strategy(), tiny_config, 1e-3, 10, 1)
    batch = dict(tiny_inputs, label_ids=np.array([1.0, 0.0, 2.5], "float32"))
    outputs = trainer.model(batch)
    loss, metrics = task.replica_loss(outputs, batch, tf.constant(3.0))
    expected = np.mean((outputs["predictions"].numpy() - [1.0, 0.0, 2.5]) ** 2)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    assert float(metrics["correct"]) == 0.0
    assert task.loop_scalars({"loss": 3.0, "correct": 0.0, "examples": 4.0}, 2) == {
        "loss": 1.5}


def test_evaluation_counts_only_real_examples():
    trainer = _Predicted(per_example_loss=[1.0, 3.0, 5.0, 100.0],
                         label_ids=[1, 0, 1, 0], is_real_example=[1, 1, 1, 0],
                         logits=[[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    results = classifier.evaluate(trainer, None, batch_size=2, task_name="mrpc")
    assert results["eval_loss"] == 3.0  # the padding example's 100 is not counted
    assert results["loss"] == 3.5  # the mean of each batch's mean: (1 + 3) / 2 and 5
    assert results["eval_accuracy"] == pytest.approx(2 / 3)
    assert results["global_step"] == 7 and results["eval_f1"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="no examples"):
        classifier.evaluate(_Predicted(per_example_loss=[1.0], label_ids=[0], logits=[[0, 1]],
                                       is_real_example=[0]), None, 2, "mrpc")


def test_eval_is_logged_beside_always_answering_the_majority_label():
    results = {"eval_accuracy": 0.7108, "eval_f1": 0.825, "eval_loss": 0.6, "global_step": 7}
    assert classifier.against_majority(results, [1] * 279 + [0] * 129, ["0", "1"], "MRPC") == (
        "eval_accuracy 0.7108 (always guessing the majority label, 1: 0.6838); eval_f1 0.8250 "
        "(always guessing the majority label, 1: 0.8122)")
    assert classifier.against_majority({"eval_accuracy": 0.6, "eval_f1": 0.0}, [0, 0, 1],
                                       ["false", "true"], "hyperpartisan") == (
        "eval_accuracy 0.6000 (always guessing the majority label, false: 0.6667); eval_f1 "
        "0.0000 (always guessing the majority label, false: 0.0000)")


def test_predictions_and_test_results_of_real_examples(tmp_path):
    trainer = _Predicted(probabilities=[[0.25, 0.75], [0.5, 0.5], [1.0, 0.0]],
                         is_real_example=[1, 1, 0])
    values = classifier.predict(trainer, None, 2)
    np.testing.assert_array_equal(values, [[0.25, 0.75], [0.5, 0.5]])
    regression = classifier.predict(_Predicted(predictions=[2.5, 0.0], is_real_example=[1, 0]),
                                    None, 1, regression=True)
    np.testing.assert_array_equal(regression, [[2.5]])
    path = tmp_path / "test_results.tsv"
    classifier.write_test_results(values, str(path))
    assert path.read_text() == "0.25\t0.75\n0.5\t0.5\n"
    assert [p.name for p in tmp_path.iterdir()] == ["test_results.tsv"]


def test_documents_are_their_windows_aggregated_and_scored_once_each():
    logits = [[0.0, 2.0], [2.0, 0.0], [0.0, 2.0], [9.0, 9.0], [1.0, 3.0]]  # the last: padding
    trainer = _Predicted(logits=logits, is_real_example=[1, 1, 1, 1, 0])
    probabilities = classifier.document_probabilities(trainer, None, [1, 2, 1], "mean")
    np.testing.assert_allclose(probabilities, [[0.1192029, 0.8807971], [0.5, 0.5], [0.5, 0.5]],
                               atol=1e-6)
    results = classifier.document_metrics(probabilities, [1, 0, 1], batch_size=2,
                                          task_name="hyperpartisan", global_step=7)
    losses = -np.log([0.8807971, 0.5, 0.5])
    assert results["eval_accuracy"] == pytest.approx(2 / 3)  # argmax of a tie: class 0
    assert results["eval_loss"] == pytest.approx(losses.mean(), abs=1e-6)
    assert results["loss"] == pytest.approx((losses[:2].mean() + losses[2]) / 2, abs=1e-6)
    assert results["eval_f1"] == pytest.approx(2 / 3) and results["global_step"] == 7


def test_the_original_task_unless_a_long_text_option_is_given(tmp_path):
    assert type(classifier.classifier_task(str(tmp_path), "sst-2")) is classifier.ClassifierTask
    for options in ({"doc_stride": 5}, {"truncation": "head_tail"},
                    {"window_aggregation": "max"}):
        task = classifier.classifier_task(str(tmp_path), "sst-2", **options)
        assert isinstance(task, classifier.DocumentClassifierTask), options


class _Options:
    max_seq_length = 24


@pytest.mark.parametrize("task, options, message", [
    ("mrpc", {"doc_stride": 5}, "--doc_stride=5 reads single texts, and mrpc pairs two"),
    ("rte", {"truncation": "head_tail"}, "--truncation=head_tail reads single texts"),
    ("sst-2", {"window_aggregation": "max"}, "--window_aggregation=max needs --doc_stride"),
    ("sst-2", {"doc_stride": 5, "truncation": "head_tail"},
     "--truncation=head_tail cuts each document to one window and --doc_stride=5 reads all"),
    ("sst-2", {"doc_stride": 0}, "--doc_stride=0 must be at least 1 and below the 22 pieces"),
    ("sst-2", {"doc_stride": 22}, "--doc_stride=22 must be at least 1 and below the 22 pieces"),
    ("sst-2", {"doc_stride": 5, "window_aggregation": "vote"},
     "--window_aggregation=vote is not one of mean, max"),
])
def test_long_text_options_that_do_not_fit_are_refused(tmp_path, task, options, message):
    document_task = classifier.classifier_task(str(tmp_path), task, **options)
    with pytest.raises(ValueError, match=re.escape(message)):
        document_task.check(_Options(), None)


def test_a_stride_just_below_the_window_is_accepted(tmp_path):
    classifier.classifier_task(str(tmp_path), "hyperpartisan", doc_stride=21).check(
        _Options(), None)
