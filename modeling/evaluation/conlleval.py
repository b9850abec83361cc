"""Entity-level precision, recall and F1 as the CoNLL shared tasks' `conlleval` script
(version 2004-01-26, Erik Tjong Kim Sang) computes them, and its report.

A tag is split at its first hyphen into a prefix and a type ("B-ORG" -> B, ORG; "O" -> O, "").
A chunk (entity) starts and ends where the script's `startOfChunk` and `endOfChunk` say, from
the previous and the current token's prefixes and types: B begins a chunk; I begins one after O
(so IOB1, where entities begin with I-, scores as IOB2 does); any change of type ends the chunk
before and begins a new one; O ends a chunk. For B, I and O tags these are the script's rules
exactly. E and S (IOBES) follow the extension later ports of the script use: a chunk ends after E
or S and begins at S. The script's bracket tags `[`, `]` and its `.` tag are not supported.
Every sentence boundary ends all chunks.

A predicted chunk is correct when a gold chunk starts at the same token, ends at the same token
and has the same type. Precision = correct / predicted chunks, recall = correct / gold chunks,
F1 their harmonic mean; all are percentages (0-100), as the script prints them, and 0.0 where
undefined (nothing predicted, nothing in the gold, or both scores 0), as the script. Token
accuracy counts the tokens whose predicted tag equals the gold one.
"""
import collections
import dataclasses


@dataclasses.dataclass
class ChunkScores:
    """Scores of one entity type, or of all together.

    Attributes:
      precision, recall, f1: float, percentages.
      gold: int, chunks in the gold tags.
      predicted: int, chunks in the predicted tags.
      correct: int, predicted chunks that are correct.
    """
    precision: float
    recall: float
    f1: float
    gold: int
    predicted: int
    correct: int


@dataclasses.dataclass
class Evaluation:
    """What `evaluate` finds.

    Attributes:
      overall: `ChunkScores` over every type.
      per_type: dict str -> `ChunkScores`, one per type found in the gold or the predictions,
        sorted by type.
      accuracy: float, percentage of tokens tagged right (0.0 for no token).
      tokens: int, tokens scored.
      correct_tags: int, tokens tagged right.
    """
    overall: ChunkScores
    per_type: dict
    accuracy: float
    tokens: int
    correct_tags: int


def _split(tag):
    prefix, _, chunk_type = tag.partition("-")
    return prefix, chunk_type


def _ends(previous, current):
    """endOfChunk: whether a chunk ended between the previous token and this one; each is a
    (prefix, type) pair."""
    (previous_prefix, previous_type), (prefix, chunk_type) = previous, current
    if previous_prefix in ("E", "S"):
        return True
    if previous_prefix in ("B", "I") and prefix in ("B", "S", "O"):
        return True
    return previous_prefix != "O" and previous_type != chunk_type


def _starts(previous, current):
    """startOfChunk: whether a chunk started between the previous token and this one."""
    (previous_prefix, previous_type), (prefix, chunk_type) = previous, current
    if prefix in ("B", "S"):
        return True
    if prefix in ("I", "E") and previous_prefix in ("E", "S", "O"):
        return True
    return prefix != "O" and previous_type != chunk_type


def _scores(correct, predicted, gold):
    precision = 100.0 * correct / predicted if predicted else 0.0
    recall = 100.0 * correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return ChunkScores(precision, recall, f1, gold, predicted, correct)


def evaluate(gold_tags_sentences, predicted_tags_sentences):
    """Scores predicted tags against gold ones, as `conlleval` scores a file of both.

    Args:
      gold_tags_sentences: list (one per sentence) of lists of str tags.
      predicted_tags_sentences: the predicted tags, shaped alike.

    Returns:
      `Evaluation`.

    Raises:
      ValueError: if the number of sentences, or of tags in a sentence, differs.
    """
    if len(gold_tags_sentences) != len(predicted_tags_sentences):
        raise ValueError(f"{len(gold_tags_sentences)} gold sentences but "
                         f"{len(predicted_tags_sentences)} predicted")
    found_gold, found_predicted, correct_chunks = (collections.Counter() for _ in range(3))
    tokens = correct_tags = 0
    in_correct = False  # inside a predicted chunk that has matched a gold one so far
    last_gold = last_predicted = ("O", "")
    boundary = ("O", "")
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold_tags_sentences,
                                                            predicted_tags_sentences)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"Sentence {index} has {len(gold_tags)} gold tags but "
                             f"{len(predicted_tags)} predicted")
        pairs = [(_split(g), _split(p)) for g, p in zip(gold_tags, predicted_tags)]
        # The script's empty line between sentences: an O for both, not counted as a token.
        # It closes every chunk, so the script's check for one still open at the end of the
        # file is never needed here.
        for position, (gold, predicted) in enumerate(pairs + [(boundary, boundary)]):
            gold_ends, predicted_ends = _ends(last_gold, gold), _ends(last_predicted, predicted)
            if in_correct:
                if gold_ends and predicted_ends and last_gold[1] == last_predicted[1]:
                    in_correct = False
                    correct_chunks[last_gold[1]] += 1
                elif gold_ends != predicted_ends or gold[1] != predicted[1]:
                    in_correct = False
            gold_starts = _starts(last_gold, gold)
            predicted_starts = _starts(last_predicted, predicted)
            if gold_starts and predicted_starts and gold[1] == predicted[1]:
                in_correct = True
            if gold_starts:
                found_gold[gold[1]] += 1
            if predicted_starts:
                found_predicted[predicted[1]] += 1
            if position < len(pairs):
                correct_tags += gold == predicted
                tokens += 1
            last_gold, last_predicted = gold, predicted
    per_type = {chunk_type: _scores(correct_chunks[chunk_type], found_predicted[chunk_type],
                                    found_gold[chunk_type])
                for chunk_type in sorted(set(found_gold) | set(found_predicted))}
    overall = _scores(sum(correct_chunks.values()), sum(found_predicted.values()),
                      sum(found_gold.values()))
    accuracy = 100.0 * correct_tags / tokens if tokens else 0.0
    return Evaluation(overall, per_type, accuracy, tokens, correct_tags)


def report(evaluation):
    """The text `conlleval` prints for `evaluation` (str, lines ending in newlines)."""
    overall = evaluation.overall
    lines = [f"processed {evaluation.tokens} tokens with {overall.gold} phrases; "
             f"found: {overall.predicted} phrases; correct: {overall.correct}."]
    if evaluation.tokens:
        lines.append(f"accuracy: {evaluation.accuracy:6.2f}%; precision: "
                     f"{overall.precision:6.2f}%; recall: {overall.recall:6.2f}%; "
                     f"FB1: {overall.f1:6.2f}")
    for chunk_type, scores in evaluation.per_type.items():
        lines.append(f"{chunk_type:>17}: precision: {scores.precision:6.2f}%; "
                     f"recall: {scores.recall:6.2f}%; FB1: {scores.f1:6.2f}  "
                     f"{scores.predicted}")
    return "\n".join(lines) + "\n"
