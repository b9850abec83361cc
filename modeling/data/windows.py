"""The one rule for inputs longer than a window: overlapping windows of word pieces.

A sequence of n pieces is read through windows of at most `window` pieces: the first starts at
piece 0, each next one `stride` pieces after the previous one (never further than the
previous window's length, so no piece is skipped), and the last is the first to reach piece
n - 1. This is the original `run_squad.py`'s doc spans (`doc_stride`); the classifier's long
documents use it too, and `modeling.export.windows` builds the same windows in the graph.

A piece then lies in several windows. The "max context" window of a piece is the one where it
has the most context on both sides: the smaller of its left and right context, plus 0.01 times
the window's length (longer windows win near-ties), the first window winning exact ties. SQuAD
counts a window's answer start only where that window is the piece's max context.

No TensorFlow is imported here.
"""
import collections

Span = collections.namedtuple("Span", ["start", "length"])
Span.__doc__ = "One window: its first piece's index and its number of pieces."


def spans(num_tokens, window, stride):
    """The windows over `num_tokens` pieces ([] for none), as the original's doc spans.

    Args:
      num_tokens: int, the sequence's pieces.
      window: int >= 1, the most pieces a window holds.
      stride: int >= 1, pieces from one window's start to the next.

    Returns:
      list of `Span`, in order.
    """
    if window < 1 or stride < 1:
        raise ValueError(f"window ({window}) and stride ({stride}) must be at least 1")
    result = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, window)
        result.append(Span(start, length))
        if start + length == num_tokens:
            break
        start += min(length, stride)
    return result


def max_context_index(all_spans, position):
    """The index of the window in which the piece at `position` has the most context, or
    None where no window holds it."""
    best_score = None
    best_index = None
    for index, span in enumerate(all_spans):
        end = span.start + span.length - 1
        if position < span.start or position > end:
            continue
        # In this order and in float, as the original: min(int, int) + 0.01 * int.
        score = min(position - span.start, end - position) + 0.01 * span.length
        if best_score is None or score > best_score:
            best_score = score
            best_index = index
    return best_index
