"""GLUE metrics of run_classifier.py, computed as the GLUE leaderboard computes them.

The references are sklearn's `f1_score` and `matthews_corrcoef` and scipy's `pearsonr` and
`spearmanr` (also what the HuggingFace `glue` metric calls); this module needs numpy only.
Every function takes two 1-D array-likes of equal length and returns a Python float.
"""
import warnings

import numpy as np

from modeling.evaluation import baseline


def _pair(a, b, dtype=None):
    a, b = np.asarray(a, dtype).ravel(), np.asarray(b, dtype).ravel()
    if a.size != b.size or a.size == 0:
        raise ValueError(f"Need two non-empty inputs of one length, got {a.size} and {b.size}")
    return a, b


def accuracy(labels, predictions):
    """Fraction of `predictions` equal to `labels` (int class indices, [N])."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions):
    """Binary F1 of class 1 (int class indices, [N]); 0.0 without any positive, as sklearn."""
    labels, predictions = _pair(labels, predictions)
    tp = np.sum((predictions == 1) & (labels == 1))
    fp = np.sum((predictions == 1) & (labels != 1))
    fn = np.sum((predictions != 1) & (labels == 1))
    # 2tp / (2tp + fp + fn) equals 2PR / (P + R), and is defined whenever one positive exists.
    return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0


def matthews_corrcoef(labels, predictions):
    """K-class Matthews correlation (int class indices, [N]); 0.0 where undefined, as sklearn."""
    labels, predictions = _pair(labels, predictions)
    # Gorodkin's K-class form, from the confusion matrix margins as sklearn computes it.
    _, index = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    true_counts, pred_counts = (np.bincount(half, minlength=index.max() + 1).astype(np.float64)
                                for half in np.split(index, 2))
    n, correct = float(labels.size), float(np.sum(labels == predictions))
    cov_true_pred = correct * n - true_counts @ pred_counts
    cov_pred_pred = n * n - pred_counts @ pred_counts
    cov_true_true = n * n - true_counts @ true_counts
    if cov_pred_pred * cov_true_true == 0:
        return 0.0
    return float(cov_true_pred / np.sqrt(cov_true_true * cov_pred_pred))


def pearson(x, y):
    """Pearson correlation in float64; nan (with a RuntimeWarning) for constant input, as scipy."""
    x, y = _pair(x, y, np.float64)
    if np.all(x == x[0]) or np.all(y == y[0]):
        warnings.warn("Constant input: the correlation coefficient is not defined", RuntimeWarning)
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    # Normalise before the dot product, and clip the rounding error, as scipy does.
    r = (x / np.linalg.norm(x)) @ (y / np.linalg.norm(y))
    return float(np.clip(r, -1.0, 1.0))


def _average_ranks(x):
    # Ties share the mean of the 1-based ranks they span: scipy.stats.rankdata(method="average").
    _, index, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[index]


def spearman(x, y):
    """Spearman correlation: Pearson of average ranks; nan for constant input, as scipy."""
    x, y = _pair(x, y, np.float64)
    return pearson(_average_ranks(x), _average_ranks(y))


# The `eval_results` keys of each task beyond `eval_accuracy`, which the caller writes for all.
TASK_METRICS = {
    "cola": {"eval_mcc": matthews_corrcoef},
    "mrpc": {"eval_f1": f1},
    "qqp": {"eval_f1": f1},
    "sts-b": {"eval_pearson": pearson, "eval_spearman": spearman},
    # SemEval-2019 Task 4 ranks by accuracy and reports F1 of the hyperpartisan class.
    "hyperpartisan": {"eval_f1": f1},
    **{name: {} for name in ("mnli", "mnli-mm", "qnli", "rte", "sst-2", "wnli", "xnli")},
}


def task_metrics(task_name, labels, predictions):
    """The task's `TASK_METRICS`, by case-insensitive name, as Python floats.

    `labels` and `predictions` are [N] int class indices, or [N] float scores for sts-b.
    Raises ValueError for an unknown task.
    """
    metrics = TASK_METRICS.get(task_name.lower())
    if metrics is None:
        raise ValueError(f"Task not found: {task_name!r}; known tasks: {sorted(TASK_METRICS)}")
    return {key: metric(labels, predictions) for key, metric in metrics.items()}


def majority_metrics(task_name, labels):
    """The eval metrics of always answering the most frequent of `labels`, a classification
    task's [N] int class indices (`baseline.majority`).

    Returns:
      (the class index answered, {"eval_accuracy": float, and the task's `TASK_METRICS`}).
    """
    guess, share = baseline.majority(np.asarray(labels).tolist())
    guesses = np.full(len(labels), guess)
    return guess, {"eval_accuracy": share, **task_metrics(task_name, labels, guesses)}
