"""Tests for modeling/evaluation/glue.py.

Every expected value is derived by hand in a comment. On random data the correlations are
compared with scipy's (skipped without scipy, a test extra) and the classification metrics with
their textbook forms, computed here another way than the module counts them. (Not with sklearn:
installed, it is imported by every `import keras`, a second more for each of the suite's
TensorFlow processes; the hand-derived cases above pin its conventions.)
"""
import math

import numpy as np
import pytest

from modeling.data import classifier
from modeling.evaluation import glue

# A binary case; position by position: tp, fn, tn, fp, tp, tn, fn.
# So tp = 2, fp = 1, fn = 2, tn = 2.
LABELS = [1, 1, 0, 0, 1, 0, 1]
PREDICTIONS = [1, 0, 0, 1, 1, 0, 0]


def test_accuracy_counts_equal_positions():
    # Correct at positions 0, 2, 4, 5: 4 of 7.
    assert glue.accuracy(LABELS, PREDICTIONS) == pytest.approx(4 / 7)
    assert glue.accuracy([2, 0, 1], [2, 0, 1]) == 1.0


def test_f1_of_the_positive_class():
    # P = 2/3, R = 2/4; F1 = 2PR / (P + R) = (2/3) / (7/6) = 4/7.
    assert glue.f1(LABELS, PREDICTIONS) == pytest.approx(4 / 7)
    # LABELS happens to give class 0 the same F1 (tn = tp); here they differ.
    # tp = 1, fp = 1, fn = 0: F1 of class 1 = 2/3 (of class 0: tn = 2, fn = 1, so 4/5).
    assert glue.f1([1, 0, 0, 0], [1, 1, 0, 0]) == pytest.approx(2 / 3)
    assert glue.f1([0, 1, 1], [1, 0, 0]) == 0.0


def test_f1_without_positives_is_zero():
    # No true and no predicted positive: sklearn's zero_division gives 0.0, not nan.
    assert glue.f1([0, 0, 0], [0, 0, 0]) == 0.0
    # True positives but none predicted: precision is 0/0, recall 0, F1 0.
    assert glue.f1([1, 0, 1], [0, 0, 0]) == 0.0


def test_matthews_corrcoef_binary():
    # (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (4 - 2) / sqrt(3*4*3*4) = 1/6.
    assert glue.matthews_corrcoef(LABELS, PREDICTIONS) == pytest.approx(1 / 6)
    assert glue.matthews_corrcoef([0, 1, 0, 1], [0, 1, 0, 1]) == pytest.approx(1.0)
    assert glue.matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)


def test_matthews_corrcoef_three_classes():
    # Confusion matrix, rows true 0..2, columns predicted 0..2:
    #   [[1, 1, 0],
    #    [0, 2, 0],
    #    [1, 0, 1]]
    # n = 6, correct = 4, true counts t = [2, 2, 2], predicted counts p = [2, 3, 1].
    # cov(true, pred) = 4*6 - t.p = 24 - 12 = 12; cov(pred) = 36 - p.p = 22; cov(true) = 36 - 12.
    # MCC = 12 / sqrt(24 * 22) = 3 / sqrt(33).
    labels = [0, 0, 1, 1, 2, 2]
    predictions = [0, 1, 1, 1, 2, 0]
    assert glue.matthews_corrcoef(labels, predictions) == pytest.approx(3 / math.sqrt(33))


def test_matthews_corrcoef_counts_a_class_seen_only_in_predictions():
    # Classes are the union {0, 1, 7}; 7 is predicted once and never true.
    # n = 4, correct = 3, t = [2, 2, 0], p = [1, 2, 1].
    # cov(true, pred) = 12 - (2 + 4) = 6; cov(pred) = 16 - 6 = 10; cov(true) = 16 - 8 = 8.
    # MCC = 6 / sqrt(80) = 3 / (2 sqrt(5)).
    assert glue.matthews_corrcoef([0, 0, 1, 1], [0, 7, 1, 1]) == (
        pytest.approx(3 / (2 * math.sqrt(5))))


def test_matthews_corrcoef_zero_denominator_is_zero():
    # One predicted class: cov(pred) = 16 - 4*4 = 0, so sklearn returns 0.0.
    assert glue.matthews_corrcoef([0, 1, 1, 0], [1, 1, 1, 1]) == 0.0
    # One true class: cov(true) = 0.
    assert glue.matthews_corrcoef([1, 1, 1], [0, 1, 0]) == 0.0


def test_pearson_hand_computed():
    # x - mean = [-1, 0, 1]; y - mean = [-7/3, -1/3, 8/3]; dot = 5; |x|^2 = 2; |y|^2 = 114/9.
    # r = 5 / sqrt(2 * 114/9) = 15 / sqrt(228).
    assert glue.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(15 / math.sqrt(228))


def test_pearson_perfect_and_anti_correlated():
    x = np.array([0.5, -1.0, 3.0, 2.0, 7.5])
    assert glue.pearson(x, 2 * x + 1) == pytest.approx(1.0)
    assert glue.pearson(x, -3 * x) == pytest.approx(-1.0)


def test_pearson_is_float64_for_float32_input():
    # A float32 sum of these would lose the small differences on top of 1e4.
    x = np.array([1e4, 1e4 + 1, 1e4 + 2], np.float32)
    y = np.array([0.0, 1.0, 3.0], np.float32)
    # Centred x = [-1, 0, 1], y = [-4/3, -1/3, 5/3]: r = 3 / sqrt(2 * 14/3) = 3 / sqrt(28/3).
    assert glue.pearson(x, y) == pytest.approx(3 / math.sqrt(28 / 3), rel=1e-12)


def test_spearman_with_ties():
    # Average ranks: x [1, 2, 2, 3] -> [1, 2.5, 2.5, 4]; y [10, 30, 20, 40] -> [1, 3, 2, 4].
    # Centred ranks: [-1.5, 0, 0, 1.5] and [-1.5, 0.5, -0.5, 1.5]: dot 4.5, norms^2 4.5 and 5.
    # rho = 4.5 / sqrt(4.5 * 5) = sqrt(0.9).
    assert glue.spearman([1, 2, 2, 3], [10, 30, 20, 40]) == pytest.approx(math.sqrt(0.9))


def test_spearman_ranks_ties_by_their_mean_rank():
    # Sorted: 5 -> rank 1, 10 -> rank 2, the three 20s span ranks 3..5 and share their mean 4.
    ranks = glue._average_ranks(np.array([10.0, 20.0, 20.0, 20.0, 5.0]))
    np.testing.assert_array_equal(ranks, [2.0, 4.0, 4.0, 4.0, 1.0])


def test_spearman_of_a_monotone_map_is_one():
    x = np.array([0.1, 2.0, -1.0, 4.0, 3.5])
    # Pearson sees the curvature of exp; Spearman sees only the order.
    assert glue.pearson(x, np.exp(x)) < 0.99
    assert glue.spearman(x, np.exp(x)) == pytest.approx(1.0)
    assert glue.spearman(x, -np.exp(x)) == pytest.approx(-1.0)


@pytest.mark.parametrize("metric", [glue.pearson, glue.spearman])
def test_constant_input_gives_nan_with_a_warning(metric):
    with pytest.warns(RuntimeWarning, match="Constant input"):
        assert math.isnan(metric([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]))
    with pytest.warns(RuntimeWarning, match="Constant input"):
        assert math.isnan(metric([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]))


@pytest.mark.parametrize("metric", [glue.accuracy, glue.f1,
                                    glue.matthews_corrcoef, glue.pearson,
                                    glue.spearman])
def test_inputs_of_different_lengths_or_empty_are_rejected(metric):
    with pytest.raises(ValueError, match="3 and 2"):
        metric([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="0 and 0"):
        metric([], [])


def test_task_metrics_keys_per_task():
    assert glue.task_metrics("mrpc", LABELS, PREDICTIONS) == {
        "eval_f1": pytest.approx(4 / 7)}
    assert glue.task_metrics("qqp", LABELS, PREDICTIONS) == {
        "eval_f1": pytest.approx(4 / 7)}
    assert glue.task_metrics("cola", LABELS, PREDICTIONS) == {
        "eval_mcc": pytest.approx(1 / 6)}
    assert glue.task_metrics("sts-b", [1.0, 2.0, 2.0, 3.0], [10.0, 30.0, 20.0, 40.0]) == {
        "eval_pearson": pytest.approx(glue.pearson([1, 2, 2, 3], [10, 30, 20, 40])),
        "eval_spearman": pytest.approx(math.sqrt(0.9))}
    for task in ("mnli", "mnli-mm", "qnli", "rte", "sst-2", "wnli", "xnli"):
        assert glue.task_metrics(task, LABELS, PREDICTIONS) == {}


def test_task_metrics_ignores_case_and_returns_python_floats():
    results = glue.task_metrics("STS-B", np.array([0.0, 1.5, 4.0], np.float32),
                                        np.array([0.2, 1.0, 5.0], np.float32))
    assert sorted(results) == ["eval_pearson", "eval_spearman"]
    assert all(type(value) is float for value in results.values())
    assert type(glue.task_metrics("MRPC", np.array(LABELS), np.array(PREDICTIONS))[
        "eval_f1"]) is float


def test_task_metrics_rejects_an_unknown_task():
    with pytest.raises(ValueError, match="'squad'.*known tasks"):
        glue.task_metrics("squad", [1], [1])


def test_correlations_match_scipy_on_random_data():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    labels = rng.uniform(0.0, 5.0, size=301)
    predictions = labels + rng.normal(0.0, 1.0, size=301)
    # Rounding makes many ties, the case where rank conventions differ.
    for x, y in [(labels, predictions), (np.round(labels), np.round(predictions * 2) / 2)]:
        assert glue.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert glue.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)


def test_classification_metrics_match_their_textbook_forms_on_random_data():
    """MCC as Gorodkin's R_K, the correlation of the one-hot label and prediction matrices
    (the module forms it from the confusion matrix's margins); F1 as the harmonic mean of
    precision and recall (the module: 2tp / (2tp + fp + fn))."""
    rng = np.random.default_rng(1)
    for num_classes in (2, 3, 5):
        labels = rng.integers(0, num_classes, size=257)
        predictions = np.where(rng.uniform(size=257) < 0.6, labels,
                               rng.integers(0, num_classes, size=257))
        true_hot, pred_hot = (np.eye(num_classes)[x] for x in (labels, predictions))
        true_hot, pred_hot = true_hot - true_hot.mean(0), pred_hot - pred_hot.mean(0)
        r_k = np.sum(true_hot * pred_hot) / np.sqrt(np.sum(true_hot ** 2) * np.sum(pred_hot ** 2))
        assert glue.matthews_corrcoef(labels, predictions) == pytest.approx(r_k, abs=1e-12)
        correct = sum(int(label == prediction) for label, prediction in zip(labels, predictions))
        assert glue.accuracy(labels, predictions) == pytest.approx(correct / len(labels),
                                                                    abs=1e-12)
        if num_classes == 2:
            tp = sum(int(label == 1 and prediction == 1)
                     for label, prediction in zip(labels, predictions))
            precision, recall = tp / np.sum(predictions == 1), tp / np.sum(labels == 1)
            assert glue.f1(labels, predictions) == pytest.approx(
                2 * precision * recall / (precision + recall), abs=1e-12)


def test_the_majority_guess_scores_what_the_real_mrpc_dev_set_gives_it(data):
    examples = classifier.get_processor("mrpc").get_dev_examples(str(data / "glue/MRPC"))
    labels = [int(example.label) for example in examples]
    # 279 of 408 pairs are paraphrases (1): F1 = 2 * 279 / (2 * 279 + 129 false positives).
    assert glue.majority_metrics("MRPC", labels) == (1, {
        "eval_accuracy": pytest.approx(279 / 408), "eval_f1": pytest.approx(558 / 687)})


def test_the_majority_guess_of_cola_and_hyperpartisan_scores_zero():
    # A constant answer has no correlation; answering the negative class finds no positive.
    assert glue.majority_metrics("cola", [1, 0, 1]) == (1, {
        "eval_accuracy": pytest.approx(2 / 3), "eval_mcc": 0.0})
    assert glue.majority_metrics("hyperpartisan", [0, 1, 0, 1]) == (0, {
        "eval_accuracy": 0.5, "eval_f1": 0.0})
