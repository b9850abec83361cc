"""Entity-level precision, recall and F1 over B/I/O tags, as CoNLL's `conlleval` counts them,
for the peer NER benchmark (which must not assume seqeval, nor import the project's library
under the peer's interpreter).

A chunk is a maximal run of tokens of one entity type: it begins at a B- tag, or at an I- tag
that follows O, another type or the sentence start (so IOB1 files, whose entities begin with
I-, and IOB2 files score alike), and it ends before O, before a B- tag, before a tag of another
type, and at the sentence end. A predicted chunk is correct when a gold chunk has the same
type, start and end. `check_chunk_f1.py` compares this with the project's conlleval port.

Imports nothing outside the standard library.
"""
import dataclasses


@dataclasses.dataclass
class ChunkScores:
    """Overall entity scores.

    Attributes:
      precision, recall, f1: float, fractions in [0, 1]; 0.0 where undefined, as conlleval.
      gold: int, chunks in the gold tags.
      predicted: int, chunks in the predicted tags.
      correct: int, predicted chunks equal to a gold chunk.
    """
    precision: float
    recall: float
    f1: float
    gold: int
    predicted: int
    correct: int


def chunks(tags):
    """The chunks of one sentence.

    Args:
      tags: list of str, "O", "B-TYPE" or "I-TYPE".

    Returns:
      list of (type, start, end) tuples, `end` exclusive, in order.
    """
    found, start, open_type = [], 0, None
    for index, tag in enumerate(list(tags) + ["O"]):  # the final O closes the last chunk
        prefix, _, entity_type = tag.partition("-")
        inside = prefix != "O"
        continues = prefix == "I" and entity_type == open_type
        if open_type is not None and not continues:
            found.append((open_type, start, index))
            open_type = None
        if inside and not continues:
            start, open_type = index, entity_type
    return found


def score(gold_sentences, predicted_sentences):
    """Scores predicted tags against gold ones.

    Args:
      gold_sentences: list (one per sentence) of lists of str tags.
      predicted_sentences: the predictions, shaped alike.

    Returns:
      `ChunkScores`.

    Raises:
      ValueError: if the numbers of sentences, or of tags in a sentence, differ.
    """
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError(f"{len(gold_sentences)} gold sentences but "
                         f"{len(predicted_sentences)} predicted")
    gold_total = predicted_total = correct = 0
    for index, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
        if len(gold) != len(predicted):
            raise ValueError(f"Sentence {index} has {len(gold)} gold tags but "
                             f"{len(predicted)} predicted")
        gold_chunks, predicted_chunks = set(chunks(gold)), set(chunks(predicted))
        gold_total += len(gold_chunks)
        predicted_total += len(predicted_chunks)
        correct += len(gold_chunks & predicted_chunks)
    precision = correct / predicted_total if predicted_total else 0.0
    recall = correct / gold_total if gold_total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return ChunkScores(precision, recall, f1, gold_total, predicted_total, correct)
