"""modeling/evaluation/baseline.py: the majority guess and the eval log's comparison."""
import pytest

from modeling.evaluation import baseline


def test_the_majority_and_its_share_a_tie_going_to_the_least_value():
    assert baseline.majority([1, 0, 1, 1]) == (1, 0.75)
    assert baseline.majority(["b", "a", "b", "a"]) == ("a", 0.5)
    assert baseline.majority(tag for tag in "OOBO") == ("O", 0.75)
    with pytest.raises(ValueError, match="no values"):
        baseline.majority([])


def test_each_result_is_printed_with_what_its_guesses_score():
    text = baseline.beside({"eval_accuracy": 0.71078, "eval_f1": 0.825, "eval_loss": 0.6}, {
        "eval_accuracy": [("always guessing the majority label, 1", 279 / 408)],
        "eval_f1": [("always guessing the majority label, 1", 0.8122),
                    ("one of 2 at random", 0.5)]})
    assert text == ("eval_accuracy 0.7108 (always guessing the majority label, 1: 0.6838); "
                    "eval_f1 0.8250 (always guessing the majority label, 1: 0.8122, or one of 2 "
                    "at random: 0.5000)")
