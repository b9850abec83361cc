"""Checks once that the peer's `chunk_f1` counts entity chunks exactly as the project's
conlleval port (`modeling.evaluation.conlleval`) does: hand cases for IOB1 and IOB2 quirks,
then random tag sequences. Runs under the project's interpreter (the peer's venv has no
TensorFlow, and conlleval needs none, but the `modeling` package imports it):

  python benchmarks/peers/check_chunk_f1.py

Prints the number of cases compared and exits non-zero at the first disagreement.
"""
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import chunk_f1  # noqa: E402  (this folder, first on sys.path when run as a script)
from modeling.evaluation import conlleval  # noqa: E402

# (gold sentences, predicted sentences): each a list of tag lists.
HAND_CASES = [
    ([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]]),         # exact match
    ([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]]),             # predicted too short
    ([["I-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]]),         # IOB1 start == IOB2 start
    ([["O", "I-LOC", "I-LOC"]], [["O", "B-LOC", "I-LOC"]]),         # IOB1 after O, ends at end
    ([["I-LOC", "B-LOC", "O"]], [["I-LOC", "I-LOC", "O"]]),         # IOB1: B splits same type
    ([["B-ORG", "I-PER", "O"]], [["B-ORG", "B-PER", "O"]]),         # type change starts a chunk
    ([["B-MISC", "I-MISC"], ["I-MISC", "O"]],                       # sentence end closes chunks
     [["B-MISC", "I-MISC"], ["B-MISC", "O"]]),
    ([["O", "O"]], [["B-PER", "O"]]),                               # no gold chunk
    ([["B-PER", "O"]], [["O", "O"]]),                               # nothing predicted
    ([[]], [[]]),                                                   # empty sentence
]
RANDOM_CASES = 5000
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _counts_agree(gold, predicted):
    ours = chunk_f1.score(gold, predicted)
    theirs = conlleval.evaluate(gold, predicted).overall
    same = (ours.gold, ours.predicted, ours.correct) == (theirs.gold, theirs.predicted,
                                                         theirs.correct)
    return same and abs(100.0 * ours.f1 - theirs.f1) < 1e-9, ours, theirs


def main():
    rng = random.Random(0)
    cases = list(HAND_CASES)
    for _ in range(RANDOM_CASES):
        lengths = [rng.randint(0, 8) for _ in range(rng.randint(1, 3))]
        cases.append(([[rng.choice(TAGS) for _ in range(n)] for n in lengths],
                      [[rng.choice(TAGS) for _ in range(n)] for n in lengths]))
    for gold, predicted in cases:
        agree, ours, theirs = _counts_agree(gold, predicted)
        if not agree:
            sys.exit(f"Disagreement on gold={gold} predicted={predicted}:\n"
                     f"  chunk_f1:  {ours}\n  conlleval: {theirs}")
    print(f"chunk_f1 agrees with modeling.evaluation.conlleval on {len(HAND_CASES)} hand "
          f"cases and {RANDOM_CASES} random ones")


if __name__ == "__main__":
    main()
