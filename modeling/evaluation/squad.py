"""The official SQuAD evaluation (evaluate-v1.1.py and evaluate-v2.0.py), built in.

Computes what the scripts of the SQuAD site compute, to the last bit of every float: the same
normalisation, the same sums in the same (file) order, the same output keys in the same order.

    python -m modeling.evaluation.squad DATA.json PREDICTIONS.json \
        [--na-prob-file null_odds.json] [--na-prob-thresh 1.0]

prints the JSON the official script for the data file's version prints. Where this module differs:
- v2.0 needs a prediction (and, with `na_probs`, a no-answer probability) for every question and
  says so in a `ValueError`; evaluate-v2.0.py prints "Missing prediction for ..." to stdout and
  then stops with a KeyError.
- evaluate-v2.0.py's `--out-image-dir` (precision-recall curves, and the `pr_*` keys that come
  with them) and `--out-file` are left out: the curves need matplotlib, and the JSON on stdout is
  the result.
- A malformed file is a one-line error (exit status 2), not a traceback.
"""
import argparse
import collections
import json
import re
import string
import sys

_PUNCTUATION = frozenset(string.punctuation)  # ASCII only: curly quotes and dashes stay.
_ARTICLES = re.compile(r"\b(a|an|the)\b")  # Whole words; \b is Unicode-aware on str patterns.

_Question = collections.namedtuple("_Question", ["id", "answers", "is_impossible"])


def normalize_answer(text):
    """Lower-cases, drops ASCII punctuation, then the articles a/an/the, and collapses spaces.

    The order matters and is the official one: "the." loses its dot first and is then an article,
    so it normalises to "".

    Args:
        text: str, an answer.

    Returns:
        str, the normalised answer.
    """
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction, ground_truth):
    """1 if both answers normalise to the same string, else 0 (both versions)."""
    return int(normalize_answer(prediction) == normalize_answer(ground_truth))


def _token_f1(prediction_tokens, ground_truth_tokens):
    """F1 of the tokens both lists share (with multiplicity); int 0 when they share none."""
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction, ground_truth):
    """Token F1 over normalised answers, as evaluate-v1.1.py: 0 when one side is empty.

    Two answers that both normalise to "" (say "the" and "a") score F1 0 but exact match 1.
    """
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def f1_score_v2(prediction, ground_truth):
    """Token F1 as evaluate-v2.0.py: an empty answer scores 1 against an empty one, else 0.

    This is what makes "" the right answer to an unanswerable question.
    """
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    if not prediction_tokens or not ground_truth_tokens:
        return int(prediction_tokens == ground_truth_tokens)
    return _token_f1(prediction_tokens, ground_truth_tokens)


def _questions(dataset):
    """Lists the questions of `dataset` in file order.

    Args:
        dataset: the "data" list of a SQuAD JSON file: articles of "paragraphs" of "qas".

    Returns:
        A non-empty list of `_Question(id, answers, is_impossible)`; `answers` are the gold texts.

    Raises:
        ValueError: when `dataset` does not have that structure, or holds no question.
    """
    try:
        questions = [
            _Question(qa["id"], [answer["text"] for answer in qa["answers"]],
                      bool(qa.get("is_impossible", False)))
            for article in dataset
            for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError("Not a SQuAD dataset: articles need 'paragraphs', paragraphs 'qas', "
                         "questions 'id' and 'answers' with 'text' "
                         f"({type(error).__name__}: {error})") from None
    if not questions:
        raise ValueError("The SQuAD dataset holds no question")
    return questions


def _check_predictions(predictions, source="Predictions"):
    """Raises a ValueError naming `source` unless `predictions` maps ids to answer strings."""
    if not isinstance(predictions, dict):
        raise ValueError(f"{source} must be a JSON object of question id -> answer text, "
                         f"got {type(predictions).__name__}")
    for qid, answer in predictions.items():
        if not isinstance(answer, str):
            raise ValueError(f"{source} must be a JSON object of question id -> answer text, "
                             f"but {qid!r} -> {answer!r}")


def _require_every_question(questions, mapping, what):
    missing = [question.id for question in questions if question.id not in mapping]
    if missing:
        raise ValueError(f"{what} miss {len(missing)} of {len(questions)} questions, the first "
                         f"{missing[0]!r} (evaluate-v2.0.py stops with a KeyError there)")


def evaluate_v1(dataset, predictions):
    """SQuAD v1.1 exact match and F1, as evaluate-v1.1.py.

    Every question counts: one without a prediction scores 0, with the official message on
    stderr. Each question takes its best score over its gold answers.

    Args:
        dataset: the "data" list of a SQuAD v1.1 JSON file.
        predictions: dict, question id (str) -> predicted answer text (str).

    Returns:
        {"exact_match": float, "f1": float}, percentages over all questions of `dataset`.

    Raises:
        ValueError: for a malformed dataset or predictions, or a predicted question without gold
            answers (a v2.0 dataset: use `evaluate_v2`).
    """
    _check_predictions(predictions)
    questions = _questions(dataset)
    exact_match = f1 = 0
    for question in questions:
        if question.id not in predictions:
            print(f"Unanswered question {question.id} will receive score 0.", file=sys.stderr)
            continue
        if not question.answers:
            raise ValueError(f"Question {question.id!r} has no gold answer: a SQuAD v2.0 "
                             "dataset is scored by evaluate_v2")
        prediction = predictions[question.id]
        exact_match += max(exact_match_score(prediction, gold) for gold in question.answers)
        f1 += max(f1_score(prediction, gold) for gold in question.answers)
    return {"exact_match": 100.0 * exact_match / len(questions),
            "f1": 100.0 * f1 / len(questions)}


def _summary(exact, f1, qids):
    """{"exact", "f1", "total"} over `qids`, summed in their order as the official script."""
    return {"exact": 100.0 * sum(exact[qid] for qid in qids) / len(qids),
            "f1": 100.0 * sum(f1[qid] for qid in qids) / len(qids),
            "total": len(qids)}


def find_best_thresh(predictions, scores, na_probs, qid_to_has_ans):
    """The best total score over no-answer thresholds, as the official find_best_thresh.

    Starts from answering nothing (every unanswerable question right, every other one wrong) and
    answers one more question at a time, in increasing order of no-answer probability: an
    answerable one adds its score, an unanswerable one loses 1 when its prediction is not "".

    Args:
        predictions: dict, question id -> predicted answer text.
        scores: dict, question id -> exact or F1 score before any threshold; only these count.
        na_probs: dict, question id -> no-answer probability (or any score ordered alike).
        qid_to_has_ans: dict, question id -> bool, True when it has a gold answer.

    Returns:
        (best score as a percentage of `len(scores)`, the na_prob of the last question answered
        at that score; 0.0 when answering nothing is best).
    """
    score = best_score = sum(1 for has_ans in qid_to_has_ans.values() if not has_ans)
    best_thresh = 0.0
    for qid in sorted(na_probs, key=na_probs.get):  # Stable: ties keep the file's order.
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best_score:
            best_score, best_thresh = score, na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """SQuAD v2.0 scores, as evaluate-v2.0.py (without its precision-recall curves).

    An unanswerable question's gold answers are [""] (so are those of a question whose gold
    answers all normalise to ""). A question whose no-answer probability exceeds `na_prob_thresh`
    counts as answered with "": 1 when it is unanswerable, else 0.

    Args:
        dataset: the "data" list of a SQuAD v2.0 JSON file.
        predictions: dict, question id (str) -> predicted answer text (str, "" for no answer),
            for every question.
        na_probs: optional dict, question id -> no-answer probability (float), for every
            question (null_odds.json). Without it no question is turned into "", and the best_*
            keys are left out.
        na_prob_thresh: float, the threshold above which a question counts as answered "".

    Returns:
        A dict in the official key order: exact, f1, total; HasAns_exact, HasAns_f1,
        HasAns_total when some question has an answer; NoAns_* when some has none; and with
        `na_probs`, best_exact, best_exact_thresh, best_f1, best_f1_thresh (raw scores, before
        `na_prob_thresh`). Scores are percentages, totals ints.

    Raises:
        ValueError: for a malformed dataset or predictions, or a question missing from
            `predictions` or from `na_probs`.
    """
    _check_predictions(predictions)
    questions = _questions(dataset)
    _require_every_question(questions, predictions, "The predictions")
    if na_probs is not None:
        _require_every_question(questions, na_probs, "The no-answer probabilities")
        for qid, prob in na_probs.items():
            if isinstance(prob, bool) or not isinstance(prob, (int, float)):
                raise ValueError(f"No-answer probabilities must be numbers, but {qid!r} -> "
                                 f"{prob!r}")
    # As the official script: "has an answer" means a non-empty answers list, not is_impossible.
    qid_to_has_ans = {question.id: bool(question.answers) for question in questions}
    exact_raw, f1_raw = {}, {}
    for question in questions:
        golds = [text for text in question.answers if normalize_answer(text)] or [""]
        prediction = predictions[question.id]
        exact_raw[question.id] = max(exact_match_score(prediction, gold) for gold in golds)
        f1_raw[question.id] = max(f1_score_v2(prediction, gold) for gold in golds)

    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}

    def apply_threshold(scores):
        return {qid: float(not qid_to_has_ans[qid]) if probs[qid] > na_prob_thresh else score
                for qid, score in scores.items()}

    exact, f1 = apply_threshold(exact_raw), apply_threshold(f1_raw)
    result = _summary(exact, f1, list(exact))
    for prefix, has_ans in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, value in qid_to_has_ans.items() if value == has_ans]
        if qids:
            result.update((f"{prefix}_{key}", value)
                          for key, value in _summary(exact, f1, qids).items())
    if na_probs is not None:
        result["best_exact"], result["best_exact_thresh"] = find_best_thresh(
            predictions, exact_raw, na_probs, qid_to_has_ans)
        result["best_f1"], result["best_f1_thresh"] = find_best_thresh(
            predictions, f1_raw, na_probs, qid_to_has_ans)
    return result


def _read_json(path):
    """Parses a JSON file; OSError for a missing file, ValueError (naming it) for bad JSON."""
    with open(path, encoding="utf-8-sig") as file:
        try:
            return json.load(file)
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{path} is not a JSON file: {error}") from None


def _is_v2(dataset_json, data_file):
    """Whether a SQuAD file is v2.0: by its "version", else by any `is_impossible` question."""
    version = dataset_json.get("version")
    if version is None:
        return any(question.is_impossible for question in _questions(dataset_json["data"]))
    major = str(version).lstrip("v").split(".")[0]
    if major not in ("1", "2"):
        raise ValueError(f"{data_file} has SQuAD version {version!r}; only 1.1 and 2.0 are scored")
    return major == "2"


def evaluate_file(data_file, prediction_file, na_prob_file=None, na_prob_thresh=1.0):
    """Scores a predictions file with the official script for the data file's SQuAD version.

    Args:
        data_file: path of a SQuAD JSON file (v1.1 or v2.0, told by its "version" field; without
            one, a dataset with any `is_impossible` question is v2.0).
        prediction_file: path of a JSON object, question id -> answer text.
        na_prob_file: optional path of a JSON object, question id -> no-answer probability
            (null_odds.json); v2.0 only.
        na_prob_thresh: float, see `evaluate_v2`; v2.0 only.

    Returns:
        The dict of `evaluate_v1` or `evaluate_v2`.

    Raises:
        OSError: when a file cannot be read.
        ValueError: when a file is not the JSON it should be, or the no-answer options are given
            for a v1.1 dataset.
    """
    dataset_json = _read_json(data_file)
    if not isinstance(dataset_json, dict) or not isinstance(dataset_json.get("data"), list):
        raise ValueError(f"{data_file} is not a SQuAD dataset: it needs a JSON object with a "
                         "'data' list of articles")
    predictions = _read_json(prediction_file)
    _check_predictions(predictions, source=str(prediction_file))
    if _is_v2(dataset_json, data_file):
        na_probs = None if na_prob_file is None else _read_json(na_prob_file)
        if na_probs is not None and not isinstance(na_probs, dict):
            raise ValueError(f"{na_prob_file} must be a JSON object of question id -> "
                             f"no-answer probability, got {type(na_probs).__name__}")
        return evaluate_v2(dataset_json["data"], predictions, na_probs, na_prob_thresh)
    if na_prob_file is not None or na_prob_thresh != 1.0:
        raise ValueError(f"{data_file} is a SQuAD v1.1 dataset: the no-answer probability file "
                         "and threshold apply to v2.0 only")
    return evaluate_v1(dataset_json["data"], predictions)


def main(argv=None):
    """The command line; returns the exit status (2 for a user error, on one line of stderr)."""
    parser = argparse.ArgumentParser(
        prog="squad_evaluate",
        description="Official SQuAD v1.1 / v2.0 evaluation; prints the official script's JSON.")
    parser.add_argument("data_file", metavar="DATA.json", help="SQuAD dev file (v1.1 or v2.0).")
    parser.add_argument("prediction_file", metavar="PREDICTIONS.json",
                        help="JSON object: question id -> answer text.")
    parser.add_argument("--na-prob-file", metavar="null_odds.json",
                        help="v2.0: JSON object, question id -> no-answer probability; adds the "
                             "best_* keys.")
    parser.add_argument("--na-prob-thresh", type=float, default=1.0,
                        help='v2.0: predict "" where the no-answer probability exceeds this '
                             "(default 1.0).")
    args = parser.parse_args(argv)
    try:
        result = evaluate_file(args.data_file, args.prediction_file, args.na_prob_file,
                               args.na_prob_thresh)
    except (OSError, ValueError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    # evaluate-v1.1.py prints its dict on one line, evaluate-v2.0.py with indent=2.
    print(json.dumps(result) if "exact_match" in result else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
