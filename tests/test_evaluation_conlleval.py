import random

import pytest

from modeling.evaluation import conlleval
from modeling.data import ner

# Four sentences with a right entity, a too-short one, a wrong type, a spurious and a missed one.
# John Smith visited New York City . / Acme Corp sued Paris Hilton / the EU said /
# Obama met Merkel
GOLD = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC", "O"],
        ["B-ORG", "I-ORG", "O", "B-PER", "I-PER"],
        ["O", "B-ORG", "O"],
        ["B-PER", "O", "B-PER"]]
PREDICTED = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O"],  # New York: too short
             ["B-ORG", "I-ORG", "O", "B-LOC", "I-LOC"],            # Paris Hilton: wrong type
             ["B-MISC", "O", "O"],                                 # "the" spurious, EU missed
             ["B-PER", "O", "O"]]                                  # Merkel missed

# What the conlleval script (2004-01-26) prints for these, run on the file of `word gold pred`.
REPORT = """\
processed 18 tokens with 7 phrases; found: 6 phrases; correct: 3.
accuracy:  66.67%; precision:  50.00%; recall:  42.86%; FB1:  46.15
              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  2
             MISC: precision:   0.00%; recall:   0.00%; FB1:   0.00  1
              ORG: precision: 100.00%; recall:  50.00%; FB1:  66.67  1
              PER: precision: 100.00%; recall:  50.00%; FB1:  66.67  2
"""


def test_partial_and_wrong_type_matches():
    result = conlleval.evaluate(GOLD, PREDICTED)
    # Gold chunks: John Smith/PER, New York City/LOC, Acme Corp/ORG, Paris Hilton/PER, EU/ORG,
    # Obama/PER, Merkel/PER = 7. Predicted: John Smith/PER, New York/LOC, Acme Corp/ORG,
    # Paris Hilton/LOC, the/MISC, Obama/PER = 6. Correct (same start, end, type): John Smith,
    # Acme Corp, Obama = 3; New York ends early and Paris Hilton has the wrong type.
    assert (result.overall.gold, result.overall.predicted, result.overall.correct) == (7, 6, 3)
    # P = 3/6 = 50%; R = 3/7 = 42.857%; F1 = 2PR/(P+R) = 2*.5*.428571/.928571 = 46.154%.
    assert result.overall.precision == pytest.approx(50.0)
    assert result.overall.recall == pytest.approx(300 / 7)
    assert result.overall.f1 == pytest.approx(600 / 13)
    # Tokens right: 6 of 7 (City), 3 of 5 (Paris, Hilton), 1 of 3 (the, EU), 2 of 3 (Merkel):
    # 12 of 18 = 66.67%.
    assert (result.tokens, result.correct_tags) == (18, 12)
    assert result.accuracy == pytest.approx(200 / 3)


def test_per_type_scores():
    per_type = conlleval.evaluate(GOLD, PREDICTED).per_type
    assert list(per_type) == ["LOC", "MISC", "ORG", "PER"]
    counts = {name: (s.gold, s.predicted, s.correct) for name, s in per_type.items()}
    # LOC: New York City in the gold; New York and Paris Hilton predicted; none right.
    # MISC: only the spurious "the". ORG: Acme Corp and EU, Acme Corp found.
    # PER: John Smith, Paris Hilton, Obama, Merkel; John Smith and Obama found, both right.
    assert counts == {"LOC": (1, 2, 0), "MISC": (0, 1, 0), "ORG": (2, 1, 1), "PER": (4, 2, 2)}
    # ORG: P = 1/1 = 100%, R = 1/2 = 50%, F1 = 2*100*50/150 = 66.67%.
    org = per_type["ORG"]
    assert (org.precision, org.recall) == (100.0, 50.0)
    assert org.f1 == pytest.approx(200 / 3)
    # PER: P = 2/2 = 100%, R = 2/4 = 50%, F1 = 66.67%. LOC and MISC: 0 correct, all 0.
    assert (per_type["PER"].precision, per_type["PER"].recall) == (100.0, 50.0)
    assert all(getattr(per_type[name], field) == 0.0 for name in ("LOC", "MISC")
               for field in ("precision", "recall", "f1"))


def test_report_is_the_scripts():
    assert conlleval.report(conlleval.evaluate(GOLD, PREDICTED)) == REPORT


def test_iob1_chunks():
    # IOB1 gold: "I-PER I-PER" is one PER, the "B-PER" after it a second, the I-LOC after O a
    # LOC: 3 chunks. The IOB2 prediction runs the first PER on to token 2 (one PER of 3 tokens,
    # wrong) and gets the LOC: 2 found, 1 correct.
    result = conlleval.evaluate([["I-PER", "I-PER", "B-PER", "O", "I-LOC"]],
                                [["B-PER", "I-PER", "I-PER", "O", "B-LOC"]])
    assert (result.overall.gold, result.overall.predicted, result.overall.correct) == (3, 2, 1)
    # P = 1/2 = 50%, R = 1/3 = 33.33%, F1 = 2*50*33.33/83.33 = 40%.
    assert (result.overall.precision, result.overall.f1) == (50.0, pytest.approx(40.0))
    assert result.overall.recall == pytest.approx(100 / 3)
    # Tokens right: I-PER/B-PER differs, so 2 of 5 (token 2's I-PER and the O).
    assert result.accuracy == pytest.approx(40.0)


def test_iob1_and_iob2_of_the_same_entities_score_100():
    iob1 = [["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]]
    result = conlleval.evaluate(iob1, [ner.to_iob2(iob1[0])])
    assert (result.overall.gold, result.overall.correct, result.overall.f1) == (4, 4, 100.0)
    assert result.accuracy == pytest.approx(50.0)  # 3 tags are spelled differently


def test_a_type_change_and_a_sentence_boundary_end_chunks():
    # "I-PER I-LOC": the change of type begins a LOC. Across sentences an I-PER begins a new PER.
    result = conlleval.evaluate([["I-PER", "I-LOC"], ["B-PER"], ["I-PER"]],
                                [["B-PER", "B-LOC"], ["B-PER"], ["B-PER"]])
    assert (result.overall.gold, result.overall.predicted, result.overall.correct) == (4, 4, 4)


def test_iobes():
    # Gold: S-PER, B-LOC E-LOC, S-LOC = 3 chunks. Predicted: S-PER, then B-LOC I-LOC E-LOC as
    # one LOC of 3 tokens = 2 chunks; only the PER is right.
    result = conlleval.evaluate([["S-PER", "B-LOC", "E-LOC", "S-LOC"]],
                                [["S-PER", "B-LOC", "I-LOC", "E-LOC"]])
    assert (result.overall.gold, result.overall.predicted, result.overall.correct) == (3, 2, 1)


def _chunks(tags):
    """(start, end, type) of each IOB1/IOB2 entity: begun by B-X, or by I-X after a tag not
    of type X; continued by I-X."""
    chunks = []
    for index, tag in enumerate(tags):
        prefix, _, entity_type = tag.partition("-")
        if prefix == "I" and chunks and chunks[-1][1] == index and chunks[-1][2] == entity_type:
            chunks[-1][1] = index + 1
        elif prefix in ("B", "I"):
            chunks.append([index, index + 1, entity_type])
    return {tuple(chunk) for chunk in chunks}


def test_counts_equal_exact_span_matching_on_random_tags():
    rng = random.Random(7)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    for _ in range(300):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 9))]
                for _ in range(rng.randint(1, 4))]
        predicted = [[t if rng.random() < 0.6 else rng.choice(tags) for t in s] for s in gold]
        gold_chunks = [_chunks(s) for s in gold]
        predicted_chunks = [_chunks(s) for s in predicted]
        overall = conlleval.evaluate(gold, predicted).overall
        assert (overall.gold, overall.predicted, overall.correct) == (
            sum(map(len, gold_chunks)), sum(map(len, predicted_chunks)),
            sum(len(g & p) for g, p in zip(gold_chunks, predicted_chunks))), (gold, predicted)


def test_nothing_to_score():
    result = conlleval.evaluate([], [])
    assert (result.overall.f1, result.accuracy, result.per_type) == (0.0, 0.0, {})
    assert conlleval.report(result) == (
        "processed 0 tokens with 0 phrases; found: 0 phrases; correct: 0.\n")


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        conlleval.evaluate([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="Sentence 1 has 2 gold tags but 1 predicted"):
        conlleval.evaluate([["O"], ["O", "O"]], [["O"], ["O"]])


def test_perfect_predictions_on_real_valid(data):
    gold = [s.tags for s in ner.read_split(data / "conll2003", "dev")]
    result = conlleval.evaluate(gold, gold)
    assert (result.overall.gold, result.overall.correct, result.tokens) == (5942, 5942, 51362)
    assert (result.overall.precision, result.overall.recall, result.overall.f1) == (100, 100, 100)
    assert {name: s.gold for name, s in result.per_type.items()} == {
        "LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}
    assert all(s.f1 == 100.0 for s in result.per_type.values())
