"""What an eval result is worth: the same metric of a model that always gives one answer, or
guesses, printed beside the model's in the eval log. A classifier little above always
answering the majority label has learnt little; an F1 of 0 may be a model that never says the
positive class.

The guesses go to the log only: eval_results.txt keeps the original's keys.

No TensorFlow is imported here.
"""
import collections


def majority(values):
    """(the most frequent of `values`, its share of them); a tie goes to the least value.

    Raises:
      ValueError: `values` is empty.
    """
    counts = collections.Counter(values)
    if not counts:
        raise ValueError("no values to take the majority of")
    value = max(sorted(counts), key=counts.get)
    return value, counts[value] / sum(counts.values())


def beside(results, guesses):
    """The eval log's text: each result with what guessing scores.

    "eval_accuracy 0.7108 (always guessing the majority label, 1: 0.6838); eval_f1 ...".

    Args:
      results: {metric: the model's value}.
      guesses: {metric: [(a guess, in words, its value of the metric), ...]}, in the order
        to print.

    Returns:
      str.
    """
    return "; ".join(f"{metric} {results[metric]:.4f} ({_scores(scores)})"
                     for metric, scores in guesses.items())


def _scores(scores):
    return ", or ".join(f"{guess}: {value:.4f}" for guess, value in scores)
