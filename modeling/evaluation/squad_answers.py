"""SQuAD post-processing: span logits -> answer texts, exactly as the original `run_squad.py`.

A SQuAD example is split into overlapping features (doc spans), and the model gives each
feature a start and an end logit per token. For each example this module

    1. takes, in every feature, the `n_best_size` best start and end positions and keeps the
       pairs that form a valid span of the context (see `_valid_spans`);
    2. for SQuAD 2.0, adds the null answer ([CLS], position 0) of the feature where it scores
       lowest: a span elsewhere must beat the *most* pessimistic null score;
    3. ranks the candidates by start + end logit, maps each back onto the original text
       (`get_final_text`) and keeps the first `n_best_size` distinct texts;
    4. predicts the best text (v1), or "" when the null score beats the best non-null one by
       more than `null_score_diff_threshold` (v2).

Every comparison, sort and float operation follows the original's order, so the JSON files
are byte-identical to its own. The one deliberate difference: the original crashes when the
n-best list holds no non-null answer (google-research/bert #1106); here that predicts "".

This module is pure Python (no TensorFlow): a metric may import it.
"""

import collections
import json
import math

import numpy as np
from absl import logging

from modeling.runtime import files
from modeling.text import tokenization

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
RawResult.__doc__ = """The model's output for one feature.

Attributes:
    unique_id: int, the feature's `unique_id`.
    start_logits: sequence of float [max_seq_length], one logit per token position (a list,
        or a float32 array: values are converted with `float()` as the original's caller did).
    end_logits: sequence of float [max_seq_length].
"""

_PrelimPrediction = collections.namedtuple(
    "_PrelimPrediction", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])
_NbestPrediction = collections.namedtuple("_NbestPrediction", ["text", "start_logit", "end_logit"])

# The running minimum of null scores starts here, "large and positive", as in the original.
NULL_SCORE_START = 1000000

# The original's stand-in when an example has no candidate at all (only possible for v1,
# since v2 always has the null answer).
EMPTY_PREDICTION = _NbestPrediction(text="empty", start_logit=0.0, end_logit=0.0)


def write_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length,
                      do_lower_case, output_prediction_file, output_nbest_file,
                      output_null_log_odds_file, version_2_with_negative=False,
                      null_score_diff_threshold=0.0, verbose_logging=False):
    """Computes the predictions and writes them as the original's three JSON files.

    Args: as `compute_predictions`, plus
        output_prediction_file: str, path of predictions.json ({qas_id: text}).
        output_nbest_file: str, path of nbest_predictions.json ({qas_id: [entry, ...]}).
        output_null_log_odds_file: str or None, path of null_odds.json ({qas_id: float});
            written only when `version_2_with_negative`.

    Returns:
        The three dicts of `compute_predictions`.
    """
    logging.info("Writing predictions to: %s", output_prediction_file)
    logging.info("Writing nbest to: %s", output_nbest_file)
    predictions, nbest, null_odds = compute_predictions(
        all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
        version_2_with_negative, null_score_diff_threshold, verbose_logging)
    _write_json(output_prediction_file, predictions)
    _write_json(output_nbest_file, nbest)
    if version_2_with_negative:
        _write_json(output_null_log_odds_file, null_odds)
    return predictions, nbest, null_odds


def compute_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length,
                        do_lower_case, version_2_with_negative=False,
                        null_score_diff_threshold=0.0, verbose_logging=False):
    """Turns the features' logits into each example's answer, n-best list and null odds.

    Args:
        all_examples: sequence of SQuAD examples, with `qas_id` (str) and `doc_tokens`
            (list of str: the context split on whitespace).
        all_features: sequence of features, with `unique_id` (int), `example_index` (int,
            into `all_examples`), `tokens` (list of str), `token_to_orig_map` ({int: int},
            token position -> index into `doc_tokens`, context tokens only) and
            `token_is_max_context` ({int: bool}).
        all_results: iterable of `RawResult`, one per feature.
        n_best_size: int, how many start and end positions per feature, and how many
            answers per example, to keep.
        max_answer_length: int, the longest answer in wordpieces.
        do_lower_case: bool, as the tokenizer that made the features.
        version_2_with_negative: bool, SQuAD 2.0: questions may have no answer.
        null_score_diff_threshold: float, v2 predicts "" when the null score minus the best
            non-null score exceeds this.
        verbose_logging: bool, log why `get_final_text` fell back to the original text.

    Returns:
        predictions: dict {qas_id: str}, in example order.
        nbest: dict {qas_id: list of dict} with keys "text", "probability" (softmax of
            start + end logit over the n-best list), "start_logit", "end_logit".
        null_odds: dict {qas_id: float}, null score minus best non-null score; empty for v1.
            When no non-null answer made the n-best list, the difference is taken against the
            original's "empty" stand-in (logits 0.0), i.e. it is the null score itself, and
            "" is predicted whatever the threshold: there is no span to predict instead.

    Raises:
        ValueError: a feature has no result.
    """
    example_index_to_features = collections.defaultdict(list)
    for feature in all_features:
        example_index_to_features[feature.example_index].append(feature)
    unique_id_to_result = {result.unique_id: result for result in all_results}

    predictions, nbest, null_odds = {}, {}, {}
    for example_index, example in enumerate(all_examples):
        features = example_index_to_features[example_index]
        results = []
        for feature in features:
            if feature.unique_id not in unique_id_to_result:
                raise ValueError(f"No result for feature unique_id={feature.unique_id} of "
                                 f"example {example_index} (qas_id={example.qas_id!r})")
            result = unique_id_to_result[feature.unique_id]
            results.append(([float(x) for x in result.start_logits],
                            [float(x) for x in result.end_logits]))
        entries, score_null = _nbest(example, features, results, n_best_size, max_answer_length,
                                     do_lower_case, version_2_with_negative, verbose_logging)

        probs = _compute_softmax([entry.start_logit + entry.end_logit for entry in entries])
        nbest[example.qas_id] = [
            {"text": entry.text, "probability": prob, "start_logit": entry.start_logit,
             "end_logit": entry.end_logit} for entry, prob in zip(entries, probs)]

        if not version_2_with_negative:
            predictions[example.qas_id] = entries[0].text
            continue
        best_non_null = next((entry for entry in entries if entry.text), None)
        if best_non_null is None:  # The original crashes here (#1106).
            null_odds[example.qas_id] = (score_null - EMPTY_PREDICTION.start_logit
                                         - EMPTY_PREDICTION.end_logit)
            predictions[example.qas_id] = ""
            continue
        score_diff = score_null - best_non_null.start_logit - best_non_null.end_logit
        null_odds[example.qas_id] = score_diff
        predictions[example.qas_id] = ("" if score_diff > null_score_diff_threshold
                                       else best_non_null.text)
    return predictions, nbest, null_odds


def _nbest(example, features, results, n_best_size, max_answer_length, do_lower_case,
           version_2_with_negative, verbose_logging):
    """One example's n-best list of `_NbestPrediction`s, best first, and its null score."""
    prelim_predictions = []
    score_null = NULL_SCORE_START
    null_prediction = _PrelimPrediction(0, 0, 0, 0, 0)
    for feature_index, (feature, (start_logits, end_logits)) in enumerate(zip(features, results)):
        if version_2_with_negative:
            feature_null_score = start_logits[0] + end_logits[0]
            if feature_null_score < score_null:  # strict: the first feature wins a tie
                score_null = feature_null_score
                null_prediction = _PrelimPrediction(feature_index, 0, 0, start_logits[0],
                                                    end_logits[0])
        prelim_predictions.extend(_valid_spans(feature, feature_index, start_logits, end_logits,
                                               n_best_size, max_answer_length))
    if version_2_with_negative:
        prelim_predictions.append(null_prediction)
    # A stable sort: equal scores keep the order they were found in, as in the original.
    prelim_predictions.sort(key=lambda pred: pred.start_logit + pred.end_logit, reverse=True)

    seen_texts = set()
    entries = []
    for pred in prelim_predictions:
        if len(entries) >= n_best_size:
            break
        if pred.start_index > 0:  # position 0 is [CLS]: only the null answer starts there
            text = _span_text(example, features[pred.feature_index], pred, do_lower_case,
                              verbose_logging)
            # Different spans (overlapping doc spans, or wordpieces of one word) often give
            # the same text; the n-best list holds each text once.
            if text in seen_texts:
                continue
        else:
            text = ""
        seen_texts.add(text)
        entries.append(_NbestPrediction(text, pred.start_logit, pred.end_logit))

    # The null answer is always a choice in v2, even if n_best_size spans outscored it.
    if version_2_with_negative and "" not in seen_texts:
        entries.append(_NbestPrediction("", null_prediction.start_logit,
                                        null_prediction.end_logit))
    if not entries:
        entries.append(EMPTY_PREDICTION)
    return entries, score_null


def _valid_spans(feature, feature_index, start_logits, end_logits, n_best_size,
                 max_answer_length):
    """Yields the `_PrelimPrediction`s of one feature, in the original's order.

    A pair of best start and end positions is a span only if both lie in the context (not the
    question, [CLS], [SEP] or padding), the start is in the doc span that sees it with the
    most context around it (another span scores it otherwise), the end is not before the
    start, and the span is at most `max_answer_length` wordpieces long.
    """
    end_indexes = _get_best_indexes(end_logits, n_best_size)
    for start_index in _get_best_indexes(start_logits, n_best_size):
        for end_index in end_indexes:
            if start_index >= len(feature.tokens) or end_index >= len(feature.tokens):
                continue
            if (start_index not in feature.token_to_orig_map
                    or end_index not in feature.token_to_orig_map):
                continue
            if not feature.token_is_max_context.get(start_index, False):
                continue
            if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                continue
            yield _PrelimPrediction(feature_index, start_index, end_index,
                                    start_logits[start_index], end_logits[end_index])


def _span_text(example, feature, pred, do_lower_case, verbose_logging):
    """The original-text answer of a non-null span: its wordpieces projected on doc_tokens."""
    tok_text = " ".join(feature.tokens[pred.start_index:pred.end_index + 1])
    # Glue the wordpieces back into words, then normalise the whitespace.
    tok_text = tok_text.replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    orig_doc_start = feature.token_to_orig_map[pred.start_index]
    orig_doc_end = feature.token_to_orig_map[pred.end_index]
    orig_text = " ".join(example.doc_tokens[orig_doc_start:orig_doc_end + 1])
    return get_final_text(tok_text, orig_text, do_lower_case, verbose_logging)


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Projects a normalised prediction back onto the original text.

    `orig_text` is the whitespace-delimited words the predicted wordpieces came from, so it
    may hold more than the answer: pred_text "steve smith" comes from orig_text "Steve
    Smith's". `pred_text` itself is lower-cased and accent-stripped, so it is no answer to
    show either. Re-tokenizing `orig_text` with the same BasicTokenizer gives a text that,
    with spaces removed, is usually character-for-character `orig_text` without spaces; that
    alignment maps the prediction's characters back ("Steve Smith"). When it is not (the
    tokenizer dropped or changed characters) or the prediction is not found, the whole
    `orig_text` is returned.

    Args:
        pred_text: str, the predicted wordpieces joined into words, space separated.
        orig_text: str, the original words the prediction spans, space separated.
        do_lower_case: bool, as the tokenizer that made the features.
        verbose_logging: bool, log why the projection failed.

    Returns:
        str: the answer as a substring of `orig_text`, or `orig_text`.
    """
    tok_text = " ".join(tokenization.BasicTokenizer(do_lower_case=do_lower_case)
                        .tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return orig_text
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logging.info("Length not equal after stripping spaces: '%s' vs '%s'",
                         orig_ns_text, tok_ns_text)
        return orig_text

    # Equal lengths: assume the i-th non-space characters of both texts correspond.
    tok_s_to_ns_map = {tok_index: i for i, tok_index in tok_ns_to_s_map.items()}
    orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(start_position))
    if orig_start_position is None:
        if verbose_logging:
            logging.info("Couldn't map start position")
        return orig_text
    orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(end_position))
    if orig_end_position is None:
        if verbose_logging:
            logging.info("Couldn't map end position")
        return orig_text
    return orig_text[orig_start_position:orig_end_position + 1]


def _strip_spaces(text):
    """Returns `text` without " " (other whitespace stays) and {index there: index in text}."""
    ns_chars = []
    ns_to_s_map = {}
    for i, char in enumerate(text):
        if char == " ":
            continue
        ns_to_s_map[len(ns_chars)] = i
        ns_chars.append(char)
    return "".join(ns_chars), ns_to_s_map


def _get_best_indexes(logits, n_best_size):
    """Indexes of the `n_best_size` largest logits, largest first; ties keep index order."""
    # A stable sort of the negated logits keeps equal ones in index order, as Python's
    # sorted(..., reverse=True) does; numpy does it in C, not for every feature in Python.
    return np.argsort(-np.asarray(logits, np.float64), kind="stable")[:n_best_size].tolist()


def _compute_softmax(scores):
    """Softmax of a list of floats, in the original's order of float operations."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total_sum = 0.0
    for exp_score in exp_scores:  # left to right as the original; 3.12's sum() compensates
        total_sum += exp_score
    return [exp_score / total_sum for exp_score in exp_scores]


def _write_json(path, value):
    """Writes `json.dumps(value, indent=4)` and a newline, as the original, atomically."""
    with files.atomic_write(path) as writer:
        writer.write(json.dumps(value, indent=4) + "\n")
