"""Tests for modeling/evaluation/squad.py.

Hand-made cases derive every expected value in a comment; the real-data tests score Google's
published BERT dev predictions, whose official scores are in ../shared/data/MANIFEST.md.
"""
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from modeling.evaluation import squad as se

V1_PREDICTIONS = "reference_predictions/bert-large-ensemble_squad-v1.1_dev_predictions.json"
V2_PREDICTIONS = "reference_predictions/bert-large-single_squad-v2.0_dev_predictions.json"


def squad(questions, version=None):
    """A SQuAD JSON object of one article; `questions` are (id, gold answer texts) pairs."""
    qas = [{"id": qid, "question": "?", "is_impossible": not golds,
            "answers": [{"text": text, "answer_start": 0} for text in golds]}
           for qid, golds in questions]
    dataset = {"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}
    if version is not None:
        dataset["version"] = version
    return dataset


def write_json(path, value):
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "modeling.evaluation.squad", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_normalize_answer():
    assert se.normalize_answer("  The Denver   Broncos!\n") == "denver broncos"
    # Articles go as whole words only: "an" in "banana", "the" in "theatre" stay.
    assert se.normalize_answer("A banana, an apple and THE theatre") == "banana apple and theatre"
    # Punctuation goes first, so "the." becomes the article "the", and "a-b" the word "ab".
    assert se.normalize_answer("the.") == ""
    assert se.normalize_answer("a-b, l'a") == "ab la"
    # string.punctuation is ASCII: curly quotes and the en dash stay.
    assert se.normalize_answer("“Hello” – World") == "“hello” – world"


def test_exact_match_and_f1():
    assert se.exact_match_score("The Broncos.", "broncos") == 1
    assert se.exact_match_score("Denver Broncos", "broncos") == 0
    # [cat, sat] vs [cat, sat, on, mat]: P = 1, R = 1/2, F1 = 2/3.
    assert se.f1_score("the cat sat", "cat sat on a mat") == pytest.approx(2 / 3)
    # Tokens count with multiplicity: [x, x, y] & [x, y, y] = {x, y}: P = R = 2/3.
    assert se.f1_score("x x y", "x y y") == pytest.approx(2 / 3)
    assert se.f1_score("paris", "london") == 0
    # Both normalise to "": v1.1 gives F1 0 (no shared token), v2.0 gives 1 (a correct "").
    assert se.exact_match_score("the", "a") == 1
    assert se.f1_score("the", "a") == 0
    assert se.f1_score_v2("the", "a") == 1
    assert se.f1_score_v2("", "paris") == 0
    assert se.f1_score_v2("the cat sat", "cat sat on a mat") == pytest.approx(2 / 3)


def test_v1_best_gold_answer_and_a_missing_prediction(capsys):
    dataset = squad([("q1", ["Denver Broncos", "The Denver Broncos"]),
                     ("q2", ["Santa Clara, California", "Levi's Stadium"]),
                     ("q3", ["Super Bowl 50"])])["data"]
    predictions = {"q1": "the denver broncos.", "q2": "Levi's Stadium in Santa Clara"}
    result = se.evaluate_v1(dataset, predictions)
    # q1 matches exactly. q2 is [levis stadium in santa clara]: against [santa clara california]
    # P = 2/5, R = 2/3, F1 = 1/2; against [levis stadium] P = 2/5, R = 1, F1 = 4/7 (the max).
    # q3 has no prediction and scores 0, but still counts: EM = 1/3, F1 = (1 + 4/7) / 3 = 11/21.
    assert list(result) == ["exact_match", "f1"]
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(1100 / 21)
    assert capsys.readouterr().err == "Unanswered question q3 will receive score 0.\n"


# q1 and q2 have answers, q3 and q4 have none; q2 scores F1 2/3 (P = 1, R = 1/2).
V2_QUESTIONS = [("q1", ["Paris"]), ("q2", ["blue whale"]), ("q3", []), ("q4", [])]
V2_PREDICTIONS_BY_HAND = {"q1": "Paris", "q2": "whale", "q3": "", "q4": "London"}
NULL_ODDS = {"q1": 0.1, "q2": 0.6, "q3": 0.5, "q4": 0.7}


def test_v2_without_no_answer_probabilities():
    result = se.evaluate_v2(squad(V2_QUESTIONS)["data"], V2_PREDICTIONS_BY_HAND)
    # Exact: q1 1, q2 0, q3 1 ("" for no answer), q4 0. F1: 1, 2/3, 1, 0.
    assert result == pytest.approx({
        "exact": 50.0, "f1": 100 * (8 / 3) / 4, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 100 * (5 / 3) / 2, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                            "NoAns_exact", "NoAns_f1", "NoAns_total"]


def test_v2_threshold_and_best_thresholds():
    result = se.evaluate_v2(squad(V2_QUESTIONS)["data"], V2_PREDICTIONS_BY_HAND, NULL_ODDS,
                            na_prob_thresh=0.6)
    # Only q4 (0.7) is above 0.6 and counts as answered "": it scores 1. q2, at exactly 0.6,
    # keeps its answer: exact 0, F1 2/3. q3 predicted "" itself. Exact: 1, 0, 1, 1.
    # best_*: answering nothing scores 2 (q3, q4). In na_prob order: q1 (0.1) +1 -> 3;
    # q3 (0.5) "" +0; q2 (0.6) exact +0 -> 3, F1 +2/3 -> 11/3; q4 (0.7) "London" -1.
    assert result == pytest.approx({
        "exact": 75.0, "f1": 100 * (11 / 3) / 4, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 100 * (5 / 3) / 2, "HasAns_total": 2,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 2,
        "best_exact": 75.0, "best_exact_thresh": 0.1,
        "best_f1": 100 * (11 / 3) / 4, "best_f1_thresh": 0.6})
    assert list(result)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]


def test_v2_only_unanswerable_questions():
    # No HasAns_* keys; answering nothing is best, so the threshold stays 0.0.
    result = se.evaluate_v2(squad([("q4", [])])["data"], {"q4": "London"}, {"q4": 0.7})
    assert result == {"exact": 0.0, "f1": 0.0, "total": 1,
                      "NoAns_exact": 0.0, "NoAns_f1": 0.0, "NoAns_total": 1,
                      "best_exact": 100.0, "best_exact_thresh": 0.0,
                      "best_f1": 100.0, "best_f1_thresh": 0.0}


def test_v2_needs_every_prediction_and_probability():
    dataset = squad(V2_QUESTIONS)["data"]
    with pytest.raises(ValueError, match=r"predictions miss 1 of 4 questions, the first 'q4'"):
        se.evaluate_v2(dataset, {"q1": "", "q2": "", "q3": ""})
    with pytest.raises(ValueError, match=r"probabilities miss 3 of 4 questions, the first 'q2'"):
        se.evaluate_v2(dataset, V2_PREDICTIONS_BY_HAND, {"q1": 0.5})
    with pytest.raises(ValueError, match=r"must be numbers, but 'q3' -> '0.5'"):
        se.evaluate_v2(dataset, V2_PREDICTIONS_BY_HAND, dict(NULL_ODDS, q3="0.5"))


def test_evaluate_file_picks_the_version(tmp_path):
    predictions = write_json(tmp_path / "predictions.json", V2_PREDICTIONS_BY_HAND)
    for version in ("v2.0", None):  # Without a version, is_impossible questions mean v2.0.
        data = write_json(tmp_path / "data.json", squad(V2_QUESTIONS, version))
        assert se.evaluate_file(data, predictions)["total"] == 4
    data = write_json(tmp_path / "data.json", squad([("q1", ["Paris"])], None))
    assert se.evaluate_file(data, predictions) == {"exact_match": 100.0, "f1": 100.0}


def test_cli_with_a_null_odds_file(tmp_path):
    data = write_json(tmp_path / "dev.json", squad(V2_QUESTIONS, "v2.0"))
    predictions = write_json(tmp_path / "predictions.json", V2_PREDICTIONS_BY_HAND)
    null_odds = write_json(tmp_path / "null_odds.json", NULL_ODDS)
    process = run_cli(data, predictions, "--na-prob-file", null_odds, "--na-prob-thresh", "0.5")
    assert process.returncode == 0, process.stderr
    expected = se.evaluate_v2(squad(V2_QUESTIONS)["data"], V2_PREDICTIONS_BY_HAND, NULL_ODDS, 0.5)
    assert process.stdout == json.dumps(expected, indent=2) + "\n"
    # Above 0.5, q2 now scores 0 too (F1 1, 0, 1, 1), and the best thresholds do not move.
    assert json.loads(process.stdout)["f1"] == 75.0
    assert json.loads(process.stdout)["best_f1_thresh"] == 0.6


@pytest.mark.parametrize("data, predictions, extra, message", [
    (None, {}, [], "No such file or directory"),
    ("{not json", {}, [], "is not a JSON file"),
    ([1, 2], {}, [], "is not a SQuAD dataset: it needs a JSON object with a 'data' list"),
    ({"data": [{"title": "no paragraphs"}]}, {}, [], "Not a SQuAD dataset: articles need"),
    (squad([("q1", ["a b"])], "1.1"), ["a b"], [],
     "must be a JSON object of question id -> answer text, got list"),
    (squad([("q1", ["a b"])], "1.1"), {"q1": 3}, [], "but 'q1' -> 3"),
    (squad([("q1", ["a b"])], "1.1"), {"q1": "a"}, ["--na-prob-thresh", "0.5"],
     "apply to v2.0 only"),
    (squad([("q1", ["a b"])], "3.0"), {"q1": "a"}, [], "only 1.1 and 2.0 are scored"),
    (squad(V2_QUESTIONS, "v2.0"), {"q1": "a"}, [], "predictions miss 3 of 4 questions"),
])
def test_cli_errors_are_one_line(tmp_path, data, predictions, extra, message):
    data_file = tmp_path / "dev.json"
    if isinstance(data, str):
        data_file.write_text(data, encoding="utf-8")
    elif data is not None:
        write_json(data_file, data)
    process = run_cli(data_file, write_json(tmp_path / "predictions.json", predictions), *extra)
    assert process.returncode == 2
    assert process.stdout == ""
    assert process.stderr.startswith("squad_evaluate: error: ")
    assert message in process.stderr and process.stderr.count("\n") == 1, process.stderr


def test_real_v1_bert_ensemble(data):
    squad_dir = data / "squad"
    result = se.evaluate_file(squad_dir / "dev-v1.1.json", squad_dir / V1_PREDICTIONS)
    print(result)
    # MANIFEST: EM 86.206, F1 92.196 (the official script's 86.21 / 92.20).
    assert round(result["exact_match"], 3) == 86.206
    assert round(result["f1"], 3) == 92.196
    process = run_cli(squad_dir / "dev-v1.1.json", squad_dir / V1_PREDICTIONS)
    assert process.returncode == 0, process.stderr
    assert process.stdout == json.dumps(result) + "\n"


def test_real_v2_bert_single(data):
    squad_dir = data / "squad"
    result = se.evaluate_file(squad_dir / "dev-v2.0.json", squad_dir / V2_PREDICTIONS)
    print(result)
    # MANIFEST: EM 78.742, F1 81.775 (the official script's 78.74 / 81.78).
    assert round(result["exact"], 3) == 78.742
    assert round(result["f1"], 3) == 81.775
    assert (result["total"], result["HasAns_total"], result["NoAns_total"]) == (11873, 5928, 5945)
    # The overall scores are the question-weighted mean of the two halves.
    for key in ("exact", "f1"):
        mean = (result[f"HasAns_{key}"] * 5928 + result[f"NoAns_{key}"] * 5945) / 11873
        assert result[key] == pytest.approx(mean, rel=1e-12)
    # An unanswerable question scores F1 1 exactly when it scores exact match 1.
    assert result["NoAns_exact"] == result["NoAns_f1"]
    process = run_cli(squad_dir / "dev-v2.0.json", squad_dir / V2_PREDICTIONS)
    assert process.returncode == 0, process.stderr
    assert process.stdout == json.dumps(result, indent=2) + "\n"
