"""`modeling.data.windows` in the graph: the same windows and max-context rule over a batch of
sequences, so that an export reads a long input exactly as its script does.

Shape legend: B rows, W windows of a row, N pieces of a row.
"""
import tensorflow as tf


def spans(num_tokens, window, stride):
    """The windows of each row, as `modeling.data.windows.spans`.

    Args:
      num_tokens: int [B], each row's pieces.
      window: int scalar or [B], the most pieces a window of the row holds (>= 1).
      stride: int scalar, pieces from one window's start to the next (>= 1).

    Returns:
      (starts, lengths): int64 RaggedTensors [B, (W)]; no windows for a row of no pieces.
    """
    num_tokens = tf.cast(num_tokens, tf.int64)
    window = tf.broadcast_to(tf.cast(window, tf.int64), tf.shape(num_tokens, tf.int64))
    step = tf.minimum(window, tf.cast(stride, tf.int64))  # no piece is skipped
    beyond_first = tf.maximum(num_tokens - window, 0)
    count = tf.where(num_tokens > 0, 1 + (beyond_first + step - 1) // step, 0)
    starts = tf.ragged.range(count) * step[:, tf.newaxis]  # [B, (W)]
    lengths = tf.minimum(num_tokens[:, tf.newaxis] - starts, window[:, tf.newaxis])
    return starts, lengths


def max_context_windows(starts, lengths):
    """For each piece, the window where it has the most context, as
    `modeling.data.windows.max_context_index`.

    Args:
      starts, lengths: int64 RaggedTensors [B, (W)], from `spans`.

    Returns:
      int64 RaggedTensor [B, (N)]: the window index of each of a row's pieces.
    """
    ends = starts + lengths - 1  # [B, (W)] the last piece of each window
    row_pieces = tf.maximum(tf.reduce_max(ends, axis=1) + 1, 0)  # [B]; 0 without windows
    first = starts.to_tensor(0)[:, :, tf.newaxis]  # [B, W, 1]
    last = ends.to_tensor(-1)[:, :, tf.newaxis]
    length = tf.cast(lengths.to_tensor(0)[:, :, tf.newaxis], tf.float64)
    position = tf.range(tf.reduce_max(tf.concat([row_pieces, [0]], 0)))[tf.newaxis, tf.newaxis]
    inside = (position >= first) & (position <= last)  # [B, W, N]
    # In float64 and this order, as the original: min(left, right) + 0.01 * length.
    context = tf.cast(tf.minimum(position - first, last - position), tf.float64)
    score = tf.where(inside, context + 0.01 * length, float("-inf"))
    best = first_argmax(score, axis=1)  # [B, N]
    return tf.RaggedTensor.from_tensor(best, lengths=row_pieces)


def first_argmax(values, axis):
    """The index of the largest value along `axis`, the first one on ties (`tf.argmax` does
    not promise which): int64, `values`' shape without `axis`."""
    values = tf.convert_to_tensor(values)
    largest = tf.reduce_max(values, axis=axis, keepdims=True)
    index = tf.range(tf.shape(values, out_type=tf.int64)[axis])
    index = tf.reshape(index, [-1] + [1] * (values.shape.rank - 1 - (axis % values.shape.rank)))
    big = tf.shape(values, out_type=tf.int64)[axis]
    return tf.reduce_min(tf.where(values == largest, index, big), axis=axis)
