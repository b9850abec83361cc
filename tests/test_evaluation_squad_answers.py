"""SQuAD post-processing against the original run_squad.write_predictions (refs/squad)."""
import json
import types

import numpy as np
import pytest

from modeling.evaluation import squad_answers
from modeling.evaluation.squad_answers import RawResult, get_final_text


def _int_keys(mapping):
    return {int(key): value for key, value in mapping.items()}


def _golden(refs, as_arrays=False):
    """Examples, features and results as the original passed them to write_predictions."""
    squad = refs / "squad"
    examples = [types.SimpleNamespace(**json.loads(line))
                for line in open(squad / "examples_predict.jsonl", encoding="utf-8")]
    features = []
    for line in open(squad / "features_predict.jsonl", encoding="utf-8"):
        row = json.loads(line)
        row["token_to_orig_map"] = _int_keys(row["token_to_orig_map"])
        row["token_is_max_context"] = _int_keys(row["token_is_max_context"])
        features.append(types.SimpleNamespace(**row))
    logits = np.load(squad / "synthetic_logits.npz")
    assert [f.unique_id for f in features] == logits["unique_ids"].tolist()
    results = [RawResult(int(unique_id), start if as_arrays else start.tolist(),
                         end if as_arrays else end.tolist())
               for unique_id, start, end in zip(logits["unique_ids"], logits["start_logits"],
                                                logits["end_logits"])]
    meta = json.loads((squad / "meta.json").read_text())
    return examples, features, results, meta


def _write(tmp_path, examples, features, results, meta, **kwargs):
    paths = [tmp_path / name for name in
             ("predictions.json", "nbest_predictions.json", "null_odds.json")]
    returned = squad_answers.write_predictions(
        examples, features, results, meta["n_best_size"], meta["max_answer_length"],
        meta["do_lower_case"], *map(str, paths), **kwargs)
    return paths, returned


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_files_are_byte_identical_to_the_originals(refs, tmp_path, version):
    examples, features, results, meta = _golden(refs)
    v2 = version == "v2"
    paths, returned = _write(tmp_path, examples, features, results, meta,
                             version_2_with_negative=v2,
                             null_score_diff_threshold=meta["null_score_diff_threshold"])
    expected_dir = refs / "squad" / f"predictions_{version}"
    for path, data in zip(paths, returned):
        expected = expected_dir / path.name
        if not v2 and path.name == "null_odds.json":
            assert not expected.exists() and not path.exists() and data == {}
            continue
        assert path.read_bytes() == expected.read_bytes(), path.name
        assert data == json.loads(expected.read_text())
    # Written atomically: nothing but the results is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in paths if v2 or p.name != "null_odds.json")


def test_float32_arrays_give_the_same_files(refs, tmp_path):
    """The original's caller converted the logits with float(); so do we."""
    examples, features, results, meta = _golden(refs, as_arrays=True)
    paths, _ = _write(tmp_path, examples, features, results, meta, version_2_with_negative=True)
    for path in paths:
        assert path.read_bytes() == (refs / "squad/predictions_v2" / path.name).read_bytes()


def test_golden_covers_the_interesting_cases(refs):
    """q3 has no answer; accents and the period after Zürich are restored/removed."""
    predictions = json.loads((refs / "squad/predictions_v2/predictions.json").read_text())
    examples, features, results, meta = _golden(refs)
    ours, _, null_odds = squad_answers.compute_predictions(
        examples, features, results, meta["n_best_size"], meta["max_answer_length"], True,
        version_2_with_negative=True)
    assert ours == predictions
    assert ours["q3"] == "" and null_odds["q3"] > 0
    assert ours["q6"] == "José Núñez-García" and ours["q8"] == "Zürich"


def test_threshold(refs):
    examples, features, results, meta = _golden(refs)
    nbest_ref = json.loads((refs / "squad/predictions_v2/nbest_predictions.json").read_text())
    odds_ref = json.loads((refs / "squad/predictions_v2/null_odds.json").read_text())
    best_non_null = {qid: next(e["text"] for e in entries if e["text"])
                     for qid, entries in nbest_ref.items()}
    # Every question's odds, and one exactly at the threshold: "" only when strictly above.
    for threshold in sorted(odds_ref.values()) + [-100.0, 100.0]:
        predictions, nbest, null_odds = squad_answers.compute_predictions(
            examples, features, results, meta["n_best_size"], meta["max_answer_length"], True,
            version_2_with_negative=True, null_score_diff_threshold=threshold)
        assert null_odds == odds_ref and nbest == nbest_ref
        assert predictions == {qid: "" if odds_ref[qid] > threshold else best_non_null[qid]
                               for qid in odds_ref}
    assert predictions["q3"] == "biscuits, because the supply"  # threshold 100: no ""


def _one_example(*logits, max_context=True):
    """[CLS] q ? [SEP] steve smith ' s [SEP]: doc_tokens "Steve", "Smith's" at positions 4..7.

    Args:
        *logits: one (start_logits, end_logits) pair per feature; several features stand for
            overlapping doc spans with the same tokens.
        max_context: bool, the features' `token_is_max_context` for every context token.
    """
    example = types.SimpleNamespace(qas_id="x", doc_tokens=["Steve", "Smith's"])
    features, results = [], []
    for index, (start_logits, end_logits) in enumerate(logits):
        features.append(types.SimpleNamespace(
            unique_id=7 + index, example_index=0,
            tokens=["[CLS]", "q", "?", "[SEP]", "steve", "smith", "'", "s", "[SEP]"],
            token_to_orig_map={4: 0, 5: 1, 6: 1, 7: 1},
            token_is_max_context={4: max_context, 5: max_context, 6: max_context,
                                  7: max_context}))
        results.append(RawResult(7 + index, start_logits, end_logits))
    return [example], features, results


def test_every_nbest_entry_null_predicts_empty_without_crashing(tmp_path):
    """google-research/bert #1106: the original raises on None.start_logit here.

    In v2 the null answer is always in the n-best list, so every entry is null exactly when
    no valid span exists among the best start and end positions.
    """
    # No context token is in its max-context span.
    start = [3.0, 1.0, 0.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0]
    end = [1.5, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0]
    examples, features, results = _one_example((start, end), max_context=False)
    paths = [str(tmp_path / n) for n in ("p.json", "n.json", "o.json")]
    predictions, nbest, null_odds = squad_answers.write_predictions(
        examples, features, results, 20, 30, True, *paths, version_2_with_negative=True,
        null_score_diff_threshold=10.0)
    assert predictions == {"x": ""}
    assert nbest == {"x": [{"text": "", "probability": 1.0, "start_logit": 3.0,
                            "end_logit": 1.5}]}
    # Against the original's "empty" stand-in (logits 0): the null score, 4.5, below the
    # threshold, yet "" is predicted since there is no span to predict instead.
    assert null_odds == {"x": 4.5}
    assert [json.loads(open(path).read()) for path in paths] == [predictions, nbest, null_odds]

    # The two best starts are [CLS] and the question: no span with n_best_size=2.
    examples, features, results = _one_example(([3.0, 2.5] + start[2:], end))
    predictions, nbest, null_odds = squad_answers.compute_predictions(
        examples, features, results, 2, 30, True, version_2_with_negative=True,
        null_score_diff_threshold=-100.0)
    assert predictions == {"x": ""} and [e["text"] for e in nbest["x"]] == [""]
    assert null_odds == {"x": 4.5}
    # With 3 best positions, a span exists and the threshold decides.
    predictions, nbest, null_odds = squad_answers.compute_predictions(
        examples, features, results, 3, 30, True, version_2_with_negative=True,
        null_score_diff_threshold=1.0)
    assert predictions == {"x": "Steve Smith"} and null_odds == {"x": 0.5}
    assert [e["text"] for e in nbest["x"]] == ["", "Steve Smith", "Steve"]


def test_span_selection_ranking_and_dedup():
    # Position 1 (the question) has the best logits and must never be chosen.
    start = [0.0, 5.0, 0.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0]
    end = [0.0, 5.0, 0.0, 0.0, 1.0, 2.0, 0.5, 0.3, 0.0]
    # Two overlapping doc spans give every text twice; each is kept once, with the better
    # (first feature's) logits. The two 3.0 ties keep the order they were found in.
    examples, features, results = _one_example(
        (start, end), ([x - 1 for x in start], [x - 1 for x in end]))
    predictions, nbest, null_odds = squad_answers.compute_predictions(
        examples, features, results, 20, 30, True)
    assert [(e["text"], e["start_logit"] + e["end_logit"]) for e in nbest["x"]] == [
        ("Steve Smith", 4.0), ("Steve", 3.0), ("Smith", 3.0), ("Steve Smith'", 2.5),
        ("Steve Smith's", 2.3), ("Smith'", 1.5), ("Smith's", 1.3), ("'", 0.5), ("'s", 0.3),
        # "s" alone is found at the start of "smith ' s": the heuristic's known weakness.
        ("S", 0.3)]
    assert predictions == {"x": "Steve Smith"} and null_odds == {}
    assert sum(e["probability"] for e in nbest["x"]) == pytest.approx(1.0)
    # Only the n best starts and ends, and answers of at most max_answer_length wordpieces.
    _, nbest, _ = squad_answers.compute_predictions(examples, features, results, 3, 30, True)
    assert [e["text"] for e in nbest["x"]] == ["Steve Smith", "Steve", "Smith"]
    _, nbest, _ = squad_answers.compute_predictions(examples, features, results, 20, 1, True)
    assert [e["text"] for e in nbest["x"]] == ["Steve", "Smith", "'", "S"]
    # Positions past the feature's tokens are dropped even if the map (wrongly) has them.
    features[0].tokens = features[0].tokens[:6]
    _, nbest, _ = squad_answers.compute_predictions(examples, features[:1], results, 20, 30,
                                                        True)
    assert [e["text"] for e in nbest["x"]] == ["Steve Smith", "Steve", "Smith"]


def test_null_score_is_the_first_lowest_and_odds_round_as_the_original():
    # Both features' null scores are 4.5: the first feature's logits are the null answer's.
    examples, features, results = _one_example(
        ([3.0] + [0.0] * 8, [1.5] + [0.0] * 8), ([2.0] + [0.0] * 8, [2.5] + [0.0] * 8),
        max_context=False)
    _, nbest, null_odds = squad_answers.compute_predictions(
        examples, features, results, 20, 30, True, version_2_with_negative=True)
    assert nbest["x"][0]["start_logit"] == 3.0 and null_odds == {"x": 4.5}
    # (null - start) - end, in that order: null - (start + end) is 5.300000000000001 here.
    start = [4.1, -9.0, -9.0, -9.0, -0.2, -9.0, -9.0, -9.0, -9.0]
    end = [4.7, -9.0, -9.0, -9.0, -9.0, 3.7, -9.0, -9.0, -9.0]
    examples, features, results = _one_example((start, end))
    predictions, _, null_odds = squad_answers.compute_predictions(
        examples, features, results, 20, 30, True, version_2_with_negative=True,
        null_score_diff_threshold=5.3)
    assert null_odds == {"x": 5.3} and predictions == {"x": "Steve Smith"}


def test_v1_without_any_span_predicts_the_originals_empty():
    examples, features, results = _one_example(([0.0] * 9, [0.0] * 9), max_context=False)
    predictions, nbest, _ = squad_answers.compute_predictions(
        examples, features, results, 20, 30, True)
    assert predictions == {"x": "empty"}
    assert nbest == {"x": [{"text": "empty", "probability": 1.0, "start_logit": 0.0,
                            "end_logit": 0.0}]}


def test_missing_result_is_an_error():
    examples, features, _ = _one_example(([0.0] * 9, [0.0] * 9))
    with pytest.raises(ValueError, match="unique_id=7"):
        squad_answers.compute_predictions(examples, features, [], 20, 30, True)


@pytest.mark.parametrize("pred_text, orig_text, do_lower_case, expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    # Accents are stripped in pred_text and restored from the original text.
    ("jose nunez - garcia", "José Núñez-García", True, "José Núñez-García"),
    ("garcia", "José Núñez-García", True, "García"),
    # A period glued to the answer's word is cut off.
    ("zurich", "Zürich.", True, "Zürich"),
    ("ca va ?", "\"Ça va?\"", True, "Ça va?"),
    ("Steve Smith", "Steve Smith's", False, "Steve Smith"),
    # Not found (cased text, lower-cased prediction): the whole original text.
    ("steve smith", "Steve Smith's", False, "Steve Smith's"),
    ("smith jones", "Steve Smith's", True, "Steve Smith's"),
    # Decomposed é (e + U+0301): accent stripping shortens the text, so the character
    # alignment fails on the length check and the whole original text comes back.
    ("jose", "Jose\u0301's", True, "Jose\u0301's"),
    # A tab is not stripped like " ", so the lengths differ: the whole original text.
    ("a b", "a\tb.", True, "a\tb."),
])
def test_get_final_text(pred_text, orig_text, do_lower_case, expected):
    assert get_final_text(pred_text, orig_text, do_lower_case) == expected


def test_get_final_text_logs_its_fallbacks(monkeypatch):
    messages = []
    monkeypatch.setattr(squad_answers.logging, "info",
                        lambda message, *args: messages.append(message % args))
    assert get_final_text("jose", "Jose\u0301's", True, verbose_logging=True) == "Jose\u0301's"
    assert get_final_text("x", "Steve", True, verbose_logging=True) == "Steve"
    assert get_final_text("x", "Steve", True) == "Steve"
    assert messages == ["Length not equal after stripping spaces: 'Jose\u0301's' vs 'jose's'",
                        "Unable to find text: 'x' in 'Steve'"]


def test_best_indexes_and_softmax():
    # Ties keep index order (a stable sort), as Python's sorted in the original.
    assert squad_answers._get_best_indexes([1.0, 3.0, 2.0, 3.0, 2.0], 4) == [1, 3, 2, 4]
    assert squad_answers._get_best_indexes([1.0, 2.0], 5) == [1, 0]
    assert squad_answers._compute_softmax([]) == []
    probs = squad_answers._compute_softmax([1000.0, 1000.0, 999.0])
    assert probs[0] == probs[1] and probs[2] == pytest.approx(probs[0] / np.e)
    assert sum(probs) == pytest.approx(1.0)
    # The original adds left to right; a compensated sum (Python 3.12's sum()) would give a
    # total of 1.0000000000000002 here, and a first probability below 1.0.
    assert squad_answers._compute_softmax([0.0, -36.8, -36.8])[0] == 1.0
