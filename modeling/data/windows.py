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

A classified document is its windows, each scored alone; `document_probabilities` turns the
windows' logits into the document's probabilities (`AGGREGATIONS`). `head_tail` is the cheap
alternative: one window of the document's first and last pieces.

No TensorFlow is imported here.
"""
import collections

import numpy as np

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


def word_spans(piece_counts, max_pieces, stride):
    """Windows of whole words over a sequence of words of `piece_counts` pieces, as NER reads
    a sentence longer than a window.

    A window takes as many whole words as fit in `max_pieces` (at least one word); the next
    starts at the first word at least `stride` pieces after the start of the previous one, but
    no later than the word after the previous window's last, so no word is skipped. Each word
    belongs to its max-context window (see the module doc), its context counted in pieces; ties
    go to the longer window, then to the earlier one.

    Returns:
      (windows, owners): (first word, end word exclusive) of each window, in order, and for
      each word the index of the window that predicts it. No words: one empty window.
    """
    if not piece_counts:  # an empty sentence: one window of [CLS] [SEP]
        return [(0, 0)], []
    starts = [0]  # piece offset of each word, then the total
    for count in piece_counts:
        starts.append(starts[-1] + count)
    spans, first = [], 0
    while True:
        end = first + 1
        while end < len(piece_counts) and starts[end + 1] - starts[first] <= max_pieces:
            end += 1
        spans.append((first, end))
        if end == len(piece_counts):
            break
        following = first + 1
        while following < end and starts[following] - starts[first] < stride:
            following += 1
        first = following
    owners, best = [None] * len(piece_counts), [None] * len(piece_counts)
    for window_index, (first, end) in enumerate(spans):
        low, high = starts[first], starts[end]
        for word in range(first, end):
            score = (min(starts[word] - low, high - starts[word + 1]), high - low)
            if best[word] is None or score > best[word]:
                best[word], owners[word] = score, window_index
    return spans, owners


def check_stride(stride, window, flag, window_is):
    """Raises ValueError unless 1 <= `stride` < `window`: the one bound on a stride, for every
    task and export that reads windows. A stride of a whole window or more would leave windows
    that do not overlap, and `spans` would cut it to the window anyway.

    Args:
      flag: how the caller's user names the stride, e.g. "--doc_stride".
      window_is: what makes the window `window` pieces long, for the message.
    """
    if not 1 <= stride < window:
        raise ValueError(f"{flag}={stride} must be at least 1 and below the {window} pieces of "
                         f"a window ({window_is})")


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


# How a sequence is cut to one window: "head" keeps its first pieces (the original's cut),
# "head_tail" those of `head_tail`.
TRUNCATIONS = ("head", "head_tail")
# Sun et al. (2019), "How to Fine-Tune BERT for Text Classification?": of a 510-piece window,
# the first 128 and the last 382 pieces read best; other windows keep the same shares.
HEAD_TAIL = (128, 510)


def head_tail(num_tokens, window):
    """The pieces one window keeps of a longer sequence: its first `head` and last `tail`.

    Args:
      num_tokens: int, the sequence's pieces.
      window: int >= 1, the most pieces a window holds.

    Returns:
      (head, tail): ints, head + tail = min(num_tokens, window); tail is 0 when the whole
      sequence fits, else head is window * 128 / 510 rounded half up.
    """
    if num_tokens <= window:
        return num_tokens, 0
    head = (2 * window * HEAD_TAIL[0] + HEAD_TAIL[1]) // (2 * HEAD_TAIL[1])
    return head, window - head


# How a document's windows make its prediction; each window was trained with the document's
# label, so each window's softmax is a guess at the document's class.
#   mean: the mean of the windows' probabilities, an ensemble of those guesses, which a window
#     of boilerplate (a scraped page's adverts, say) sways by only 1 / W.
#   max: the softmax of each class's largest logit over the windows ("hier. max" pooling of
#     Sun et al. 2019, at the head's output): the class that some window argues for most
#     strongly, for labels that one passage decides.
AGGREGATIONS = ("mean", "max")


def document_probabilities(logits, counts, aggregation):
    """The documents' class probabilities from their windows' logits.

    Args:
      logits: float [W, K], every window's logits, each document's windows together, the
        documents in order.
      counts: int [D], each document's windows (each >= 1), summing to W.
      aggregation: one of `AGGREGATIONS`.

    Returns:
      float64 [D, K]: each row sums to 1.
    """
    logits = np.asarray(logits, np.float64)
    counts = np.asarray(counts, np.int64)
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {AGGREGATIONS}")
    if np.any(counts < 1) or counts.sum() != len(logits):
        raise ValueError(f"window counts {counts.tolist()} do not split {len(logits)} windows "
                         f"into documents of at least one")
    if not len(counts):
        return np.zeros([0, logits.shape[-1]])
    firsts = np.cumsum(counts) - counts  # [D] each document's first window
    if aggregation == "max":
        return _softmax(np.maximum.reduceat(logits, firsts, axis=0))
    return np.add.reduceat(_softmax(logits), firsts, axis=0) / counts[:, np.newaxis]


def _softmax(logits):
    exps = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)
