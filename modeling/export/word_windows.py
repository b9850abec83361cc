"""`modeling.data.ner`'s windows in the graph: long sentences cut at word boundaries into
overlapping windows, and the one window that predicts each word, over a batch of rows, so that
the NER export tags a long sentence exactly as run_ner.py does.

The rule (see `modeling.data.ner`): a window takes as many whole words as fit in `max_pieces`
(at least one), the next starts at the first word at least `stride` pieces after the previous
window's start, but no later than the word after its last; a word is predicted in the window
where the smaller of its left and right context (in pieces) is largest, then the longer
window, then the earlier one.

Shape legend: B rows, N words of a row, W windows of a row, K windows that hold one word.
"""
import tensorflow as tf

from modeling.export.windows import first_argmax

_BEYOND = tf.int64.max  # pads sorted rows, so that `tf.searchsorted` never counts the padding


def windows(piece_counts, max_pieces, stride):
    """The windows of each row and the window that predicts each word, as
    `modeling.data.windows.word_spans`.

    Args:
      piece_counts: int RaggedTensor [B, (N)], the pieces of each word (>= 0).
      max_pieces: int (or int64 scalar Tensor), the most pieces a window holds (>= 1).
      stride: int (or int64 scalar Tensor), pieces from one window's start to the next,
        rounded up to a word (>= 1).

    Returns:
      (firsts, ends, owners): int64 RaggedTensors. `firsts` and `ends` [B, (W)], each window's
      first word and end word (exclusive), a single window (0, 0) for a row of no words;
      `owners` [B, (N)], for each word the index in its row of the window that predicts it.
    """
    counts = tf.cast(piece_counts, tf.int64)
    num_words = counts.row_lengths()  # [B]
    starts = _piece_starts(counts)  # [B, N + 1]
    firsts, ends = _cut(starts, num_words, max_pieces, stride)
    return firsts, ends, _owners(starts, num_words, firsts, ends)


def _piece_starts(counts):
    """int64 [B, N + 1]: the piece offset of each word of a row, then the row's total, then
    `_BEYOND` (the padding, after the row's last word)."""
    padded = counts.to_tensor(0)  # [B, N]
    batch = tf.shape(padded, out_type=tf.int64)[0]
    starts = tf.concat([tf.zeros([batch, 1], tf.int64), tf.cumsum(padded, axis=1)], axis=1)
    index = tf.range(tf.shape(starts, out_type=tf.int64)[1])
    return tf.where(index[tf.newaxis] <= counts.row_lengths()[:, tf.newaxis], starts, _BEYOND)


def _cut(starts, num_words, max_pieces, stride):
    """(firsts, ends) int64 RaggedTensors [B, (W)]: one window of every unfinished row a
    loop step, until each row's last window reaches its end."""
    batch = tf.shape(num_words, out_type=tf.int64)[0]

    def piece_search(first, pieces, side):
        """For each row, `tf.searchsorted` of (start of word `first` + `pieces`): [B]."""
        offset = tf.gather(starts, first[:, tf.newaxis], batch_dims=1)  # [B, 1]
        return tf.searchsorted(starts, offset + pieces, side=side, out_type=tf.int64)[:, 0]

    def step(first, done, all_firsts, all_ends, windows_per_row):
        # The last word whose end is within max_pieces of the window's start; at least one.
        fit = piece_search(first, max_pieces, "right") - 1
        end = tf.minimum(tf.maximum(fit, first + 1), num_words)
        # The first word `stride` pieces on, but never past the window's end: none skipped.
        reach = piece_search(first, stride, "left")
        following = tf.minimum(tf.maximum(reach, first + 1), end)
        windows_per_row += tf.cast(~done, tf.int64)
        all_firsts = tf.concat([all_firsts, first[:, tf.newaxis]], axis=1)
        all_ends = tf.concat([all_ends, end[:, tf.newaxis]], axis=1)
        done |= end >= num_words
        return tf.where(done, first, following), done, all_firsts, all_ends, windows_per_row

    empty = tf.zeros([batch, 0], tf.int64)
    _, _, all_firsts, all_ends, windows_per_row = tf.while_loop(
        lambda first, done, *_: tf.reduce_any(~done), step,
        (tf.zeros([batch], tf.int64), tf.zeros([batch], tf.bool), empty, empty,
         tf.zeros([batch], tf.int64)),
        shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]),
                          tf.TensorShape([None, None]), tf.TensorShape([None, None]),
                          tf.TensorShape([None])))
    # A finished row's windows are a prefix of the steps: what came after is left out.
    return (tf.RaggedTensor.from_tensor(all_firsts, lengths=windows_per_row),
            tf.RaggedTensor.from_tensor(all_ends, lengths=windows_per_row))


def _owners(starts, num_words, firsts, ends):
    """int64 RaggedTensor [B, (N)]: the window of each word with the most context."""
    word = tf.range(tf.shape(starts, out_type=tf.int64)[1] - 1)[tf.newaxis]  # [1, N]
    real = word < num_words[:, tf.newaxis]  # [B, N]
    # Windows advance in both first and end word, so those holding a word are a run [lo, hi).
    word = tf.broadcast_to(word, tf.shape(real, out_type=tf.int64))
    lo = tf.searchsorted(ends.to_tensor(_BEYOND), word, side="right", out_type=tf.int64)
    hi = tf.searchsorted(firsts.to_tensor(_BEYOND), word, side="right", out_type=tf.int64)
    held_by = tf.where(real, hi - lo, 0)
    most = tf.reduce_max(tf.concat([tf.reshape(held_by, [-1]), [0]], axis=0))  # K
    candidate = lo[:, :, tf.newaxis] + tf.range(most)[tf.newaxis, tf.newaxis]  # [B, N, K]
    holds = candidate < hi[:, :, tf.newaxis]
    last_window = tf.maximum(firsts.row_lengths() - 1, 0)[:, tf.newaxis, tf.newaxis]
    candidate = tf.minimum(candidate, last_window)  # in range, where it holds nothing

    def window_pieces(bounds):  # [B, N, K] the piece offset of each candidate's bound word
        offsets = tf.gather(starts, bounds.to_tensor(0), batch_dims=1)  # [B, W]
        return tf.gather(offsets, candidate, batch_dims=1)

    low, high = window_pieces(firsts), window_pieces(ends)
    word_start = starts[:, :-1, tf.newaxis]  # [B, N, 1]
    word_end = tf.where(real, starts[:, 1:], 0)[:, :, tf.newaxis]
    context = tf.where(holds, tf.minimum(word_start - low, high - word_end), -1)
    best = context == tf.reduce_max(context, axis=2, keepdims=True)
    # Equal context: the longer window, then the first (`first_argmax`), as the Python rule.
    length = tf.where(holds & best, high - low, -1)
    owners = lo + first_argmax(length, axis=2)  # [B, N]
    return tf.RaggedTensor.from_tensor(owners, lengths=num_words)
